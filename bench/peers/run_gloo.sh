#!/usr/bin/env bash
# run_gloo.sh LAUNCHER GLOO_BENCH N ARGS...: starts N ranks of gloo_bench
# with LAUNCHER (omniccl-run, a plain process launcher that sets RANK and
# WORLD_SIZE) and a fresh FileStore directory for their rendezvous, removed
# afterwards. Exits with the launcher's status.
set -u
launcher=$1 gloo=$2 n=$3
shift 3
store=$(mktemp -d "${TMPDIR:-/tmp}/gloo-store.XXXXXX")
trap 'rm -rf "$store"' EXIT
"$launcher" -n "$n" --no-prefix "$gloo" --store "$store" "$@"
