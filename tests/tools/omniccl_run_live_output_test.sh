#!/usr/bin/env bash
# omniccl-run and Python ranks: lines appear as they are printed (the ranks
# get PYTHONUNBUFFERED=1), output written before a rank is terminated is not
# lost, and a .py file given as PROGRAM gets a hint to run it with Python.
source "$(dirname "$0")/lib.sh" "$@"
PY=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
unset PYTHONUNBUFFERED  # the launcher must provide it

# A line printed while the rank keeps running shows up before the rank ends.
"$RUN" -n 1 -- "$PY" -c 'import time; print("tick"); time.sleep(6)' >"$TMP/live.out" 2>"$TMP/live.err" &
pid=$!
seen=no
for ((i = 0; i < 40; i++)); do
  grep -qF "[0] tick" "$TMP/live.out" && { seen=yes; break; }
  sleep 0.1
done
if [[ $seen == yes ]] && kill -0 "$pid" 2>/dev/null; then
  ok "live: '[0] tick' printed while the rank still runs"
else
  fail "live: '[0] tick' not seen within 4 s while the rank runs"; show "$TMP/live.out"
fi
wait_pid_bounded "$pid" 20
expect_rc live 0

# Survivors terminated after --grace keep what they printed before.
run kept -n 2 --grace 1 -- "$PY" -c '
import os, sys, time
if os.environ["RANK"] == "1":
    sys.exit(3)
print("written before the end")
time.sleep(30)'
expect_rc kept 3
expect_contains kept "$TMP/kept.out" "[0] written before the end"

# A user who set PYTHONUNBUFFERED keeps their value.
PYTHONUNBUFFERED=x run own -n 1 -- "$PY" -c 'import os; print(os.environ["PYTHONUNBUFFERED"])'
expect_contains own "$TMP/own.out" "[0] x"

# A .py file without a '#!' line, or not executable: say how to run it.
printf 'print("hi")\n' >"$TMP/script.py"
run pyhint -n 2 "$TMP/script.py"
expect_rc pyhint 126
expect_contains pyhint "$TMP/pyhint.err" "is a Python script without a '#!' line"
expect_contains pyhint "$TMP/pyhint.err" "omniccl-run -n 2 python3 $TMP/script.py"
expect_contains pyhint "$TMP/pyhint.err" "python3 -m omniccl.run -n 2 $TMP/script.py"
printf '#!/usr/bin/env python3\nprint("hi")\n' >"$TMP/exe.py"
run pyhint2 -n 1 "$TMP/exe.py"
expect_rc pyhint2 126
expect_contains pyhint2 "$TMP/pyhint2.err" "is a Python script that is not executable"
chmod +x "$TMP/exe.py"
run pyexe -n 1 "$TMP/exe.py"
expect_rc pyexe 0
expect_contains pyexe "$TMP/pyexe.out" "[0] hi"
finish
