#!/usr/bin/env bash
# omniccl-run: output of each rank is prefixed with "[RANK] " line by line,
# stdout to stdout and stderr to stderr, partial last lines are completed,
# lines never mix, --no-prefix passes output through untouched.
source "$(dirname "$0")/lib.sh" "$@"

# Multi-line and partial-line output on both streams.
run lines -n 3 -- bash -c '
  printf "a%s\nb%s\n" "$RANK" "$RANK"
  printf "e%s\nf%s\n" "$RANK" "$RANK" >&2
  printf "tail%s" "$RANK"
  printf "etail%s" "$RANK" >&2'
expect_rc lines 0
for i in 0 1 2; do
  expect_eq "lines: rank $i stdout" "[$i] a$i|[$i] b$i|[$i] tail$i|" \
    "$(grep -F "[$i] " "$TMP/lines.out" | tr '\n' '|')"
  expect_eq "lines: rank $i stderr" "[$i] e$i|[$i] f$i|[$i] etail$i|" \
    "$(grep -F "[$i] " "$TMP/lines.err" | tr '\n' '|')"
done
expect_eq "lines: stdout line count" 9 "$(wc -l <"$TMP/lines.out")"
expect_eq "lines: stderr line count" 9 "$(wc -l <"$TMP/lines.err")"
expect_eq "lines: stdout ends with a newline" 1 "$(tail -c 1 "$TMP/lines.out" | wc -l)"
expect_eq "lines: stderr ends with a newline" 1 "$(tail -c 1 "$TMP/lines.err" | wc -l)"
expect_eq "lines: every stdout line is prefixed" 0 "$(grep -cvE '^\[[0-2]\] ' "$TMP/lines.out")"

# A line written in pieces, with a pause in the middle, stays one line.
run pieces -n 2 -- bash -c 'printf "part1-"; sleep 0.3; printf "part2\n"; printf "x"; sleep 0.2; printf "y"'
expect_rc pieces 0
for i in 0 1; do
  expect_eq "pieces: rank $i" "[$i] part1-part2|[$i] xy|" \
    "$(grep -F "[$i] " "$TMP/pieces.out" | tr '\n' '|')"
done

# Empty lines and lines with "[" keep their content.
run empty -n 1 -- printf '\n[7] x\n\n'
expect_rc empty 0
expect_file_eq empty "$TMP/empty.out" "[0] 
[0] [7] x
[0] "

# No mid-line mixing: 4 ranks each write 1500 lines, every line in two
# separate writes, as fast as they can, to stdout and stderr.
run mix -n 4 -- bash -c '
  pad=$(printf "%0150d" 0)
  for ((k = 0; k < 1500; k++)); do
    printf "%s" "$RANK:$k:"; printf "%s\n" "${pad//0/x}"
    if ((k % 10 == 0)); then printf "%s" "E$RANK:" >&2; printf "%s\n" "$k" >&2; fi
  done'
expect_rc mix 0
expect_eq "mix: stdout lines" 6000 "$(wc -l <"$TMP/mix.out")"
expect_eq "mix: malformed stdout lines" 0 \
  "$(grep -cvE '^\[([0-3])\] \1:[0-9]+:x{150}$' "$TMP/mix.out")"
expect_eq "mix: stderr lines" 600 "$(wc -l <"$TMP/mix.err")"
expect_eq "mix: malformed stderr lines" 0 "$(grep -cvE '^\[([0-3])\] E\1:[0-9]+$' "$TMP/mix.err")"
for i in 0 3; do
  if diff <(seq 0 1499) <(grep -F "[$i] " "$TMP/mix.out" | cut -d: -f2) >"$TMP/mix.diff"; then
    ok "mix: rank $i lines complete and in order"
  else
    fail "mix: rank $i lines missing or out of order"
    head -n 20 "$TMP/mix.diff" >&2
  fi
done

# A line much longer than one pipe buffer (64 KiB) arrives whole.
run long -n 2 -- bash -c 'head -c 300000 /dev/zero | tr "\0" y; echo; echo after'
expect_rc long 0
expect_eq "long: line lengths" "300004 300004 9 9" \
  "$(awk '{ print length($0) }' "$TMP/long.out" | sort -rn | tr '\n' ' ' | sed 's/ $//')"
expect_eq "long: content" 0 "$(grep -cvE '^\[[01]\] (y+|after)$' "$TMP/long.out")"

# --no-prefix: the ranks write straight to the launcher's stdout/stderr.
run raw -n 2 --no-prefix -- bash -c 'echo "out $RANK"; echo "err $RANK" >&2; printf "p$RANK"'
expect_rc raw 0
expect_eq "raw: stdout" "out 0|out 1|" "$(grep -o 'out [01]' "$TMP/raw.out" | sort | tr '\n' '|')"
expect_eq "raw: stderr" "err 0|err 1|" "$(sort "$TMP/raw.err" | tr '\n' '|')"
expect_not_contains raw "$TMP/raw.out" "["
expect_contains raw "$TMP/raw.out" "p0"

# The launcher's stdout is a pipe that closes early (| head): the ranks get
# SIGPIPE like in a shell pipeline and the launcher does not hang.
start=$(now_ms)
timeout -k 5 60 "$RUN" -n 2 -- yes 2>"$TMP/pipe.err" | head -n 5 >"$TMP/pipe.out"
RC=${PIPESTATUS[0]}
ELAPSED_MS=$(($(now_ms) - start))
expect_eq "pipe: head got 5 lines" 5 "$(wc -l <"$TMP/pipe.out")"
expect_rc pipe 141
expect_contains pipe "$TMP/pipe.err" "killed by signal 13 (SIGPIPE)"
expect_elapsed pipe 0 20000

# Output left after the rank exited (a background helper holding the pipe)
# is read for a moment; the launcher then stops waiting and ends the helper.
run helper -n 1 -- bash -c 'echo $$ >"$TMP/rank.pid"; (echo $BASHPID >"$TMP/helper.pid"; sleep 0.5; echo late; exec sleep 30) & echo main'
expect_rc helper 0
expect_contains helper "$TMP/helper.out" "[0] main"
expect_contains helper "$TMP/helper.out" "[0] late"
expect_contains helper "$TMP/helper.err" "rank 0 left processes running after it exited"
expect_elapsed helper 0 10000
expect_dead helper "$TMP/helper.pid"

finish
