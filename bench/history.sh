#!/usr/bin/env bash
# Extracts the raw benchmark history that bench/results/ held until commit
# 057f1c6 (every comparison run, the per-round profiles, the Python latency
# runs and the probe programs, about 4,300 files) into DIR/bench/results.
# The tree keeps only the latest curated results (bench/results/latest/).
# Usage: bench/history.sh DIR   (DIR is created if missing)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bench/history.sh DIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$1"
git archive 057f1c6 bench/results | tar -x -C "$1"
echo "history: $(find "$1/bench/results" -type f | wc -l) files in $1/bench/results"
