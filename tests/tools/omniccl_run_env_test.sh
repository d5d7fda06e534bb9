#!/usr/bin/env bash
# omniccl-run: every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT and OMNICCL_LAUNCHER; the rest of the environment
# is kept; stdin goes to rank 0 only.
source "$(dirname "$0")/lib.sh" "$@"

SHOW_ENV='printf "RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s OMNICCL_LAUNCHER=%s KEEP=%s\n" "$RANK" "$WORLD_SIZE" "$LOCAL_RANK" "$LOCAL_WORLD_SIZE" "$MASTER_ADDR" "$OMNICCL_LAUNCHER" "${KEEP-unset}"; echo "port=$MASTER_PORT"'

# Defaults; RANK/WORLD_SIZE already in the environment must be overridden.
RANK=99 WORLD_SIZE=77 LOCAL_RANK=55 KEEP=kept run env -n 4 -- bash -c "$SHOW_ENV"
expect_rc env 0
for i in 0 1 2 3; do
  expect_contains env "$TMP/env.out" \
    "[$i] RANK=$i WORLD_SIZE=4 LOCAL_RANK=$i LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 OMNICCL_LAUNCHER=omniccl-run KEEP=kept"
done
expect_eq "env: 8 lines" 8 "$(wc -l <"$TMP/env.out")"
ports=$(grep -o 'port=.*' "$TMP/env.out" | sort -u)
expect_eq "env: one MASTER_PORT for all ranks" 1 "$(printf '%s\n' "$ports" | wc -l)"
port=${ports#port=}
if [[ "$port" =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65535)); then
  ok "env: MASTER_PORT=$port is a port number"
else
  fail "env: MASTER_PORT '$port' is not a port number"
fi
# The chosen port is free: nothing accepts connections on it.
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  fail "env: something listens on MASTER_PORT $port"
else
  ok "env: MASTER_PORT $port is not in use"
fi

# Two runs get ports that are free at the time; both must be valid.
run env2 -n 1 -- bash -c 'echo "$MASTER_PORT"'
expect_rc env2 0
[[ "$(cat "$TMP/env2.out")" =~ ^\[0\]\ [0-9]+$ ]] && ok "env2: port printed" || fail "env2: bad output $(cat "$TMP/env2.out")"

# A job token: one per job, the same in every rank, 64 hex digits; a given one is kept.
run token -n 3 -- bash -c 'echo "$OMNICCL_JOB_TOKEN"'
expect_rc token 0
tokens=$(sed 's/^\[[0-9]\] //' "$TMP/token.out" | sort -u)
expect_eq "token: one OMNICCL_JOB_TOKEN for all ranks" 1 "$(printf '%s\n' "$tokens" | wc -l)"
[[ "$tokens" =~ ^[0-9a-f]{64}$ ]] && ok "token: 64 hex digits" || fail "token: '$tokens'"
run token2 -n 1 -- bash -c 'echo "$OMNICCL_JOB_TOKEN"'
[ "$(sed 's/^\[0\] //' "$TMP/token2.out")" != "$tokens" ] && ok "token: a new one per job" || fail "token: reused"
OMNICCL_JOB_TOKEN=given run token3 -n 2 -- bash -c 'echo "$OMNICCL_JOB_TOKEN"'
expect_contains token3 "$TMP/token3.out" "[1] given"

# Explicit address and port.
run addr -n 2 --master-addr 10.9.8.7 --master-port 29555 -- bash -c 'echo "$MASTER_ADDR:$MASTER_PORT"'
expect_rc addr 0
expect_contains addr "$TMP/addr.out" "[0] 10.9.8.7:29555"
expect_contains addr "$TMP/addr.out" "[1] 10.9.8.7:29555"
run addr2 -n 1 --master-addr=node7 --master_port=1234 -- bash -c 'echo "$MASTER_ADDR:$MASTER_PORT"'
expect_rc addr2 0
expect_file_eq addr2 "$TMP/addr2.out" "[0] node7:1234"

# Spellings of the rank count.
for spelling in "-n 3" "-n3" "--nproc 3" "--nproc=3" "--nproc-per-node 3" \
                "--nproc-per-node=3" "--nproc_per_node 3"; do
  # shellcheck disable=SC2086
  run spell $spelling bash -c 'echo "$WORLD_SIZE/$LOCAL_WORLD_SIZE"'
  expect_rc spell 0
  expect_eq "spelling '$spelling'" "3/3 3/3 3/3" "$(sed 's/^\[[0-9]\] //' "$TMP/spell.out" | tr '\n' ' ' | sed 's/ $//')"
done

# Arguments after PROGRAM are PROGRAM's, even when they look like options.
run args -n 1 printf '%s|' a "b c" --help -n
expect_rc args 0
expect_file_eq args "$TMP/args.out" "[0] a|b c|--help|-n|"

# PATH lookup of PROGRAM.
run path -n 2 env
expect_rc path 0
expect_contains path "$TMP/path.out" "[1] RANK=1"

# stdin (not a terminal here) goes to rank 0; the others read /dev/null.
start=$(now_ms)
echo hello | timeout -k 5 60 "$RUN" -n 3 -- bash -c 'read -r line; echo "got=${line:-EOF}"' \
  >"$TMP/stdin.out" 2>"$TMP/stdin.err"
RC=$?
expect_rc stdin 0
expect_contains stdin "$TMP/stdin.out" "[0] got=hello"
expect_contains stdin "$TMP/stdin.out" "[1] got=EOF"
expect_contains stdin "$TMP/stdin.out" "[2] got=EOF"

finish
