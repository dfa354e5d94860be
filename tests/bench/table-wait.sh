#!/bin/bash
# table-wait.sh - how long a new process's unwind table waits behind a huge
# one's, for A/B comparisons of the builder's lanes (daemon/unwind/builder.c;
# run old and new alternately).
#
#   tests/bench/table-wait.sh PERFD
#
# Starts PERFD at 999 Hz, lets it build the tables of what runs already,
# then starts clang (libLLVM and libclang-cpp: tables of 1-1.5M rows) and,
# 0.3 s later, CPython 3.13's split.py for 3 CPU-s.  Prints how many of
# split.py's samples were taken while its tables were pending, and when
# libpython's table was ready, from PERFD's --verbose log.  As root; needs
# clang-14 and pyenv's 3.13.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 PERFD" >&2; exit 2; }
perfd=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
python=$(pyenv prefix 3.13)/bin/python3.13
dir=$(mktemp -d /tmp/perfd-table-wait.XXXXXX)
p= c= w=
trap 'kill $p $c $w 2>/dev/null || true; rm -rf "$dir"' EXIT
"$perfd" --socket "$dir/s" --frequency 999 --verbose 2>"$dir/log" & p=$!
sleep 4
clang-14 -O2 -I"$repo/include" -I"$repo/daemon" -c "$repo/daemon/unwind/unwind_table.c" \
	-o /dev/null & c=$!
sleep 0.3
"$python" "$repo/tests/workloads/python/split.py" 3 >/dev/null & w=$!
"$repo/build/perfctl" --socket "$dir/s" snapshot --pid $w --duration 60 >"$dir/folded" 2>/dev/null
wait $c $w
kill $p
wait $p || true
pending=$(grep -F '[unwind table pending]' "$dir/folded" | awk '{s += $NF} END {print s + 0}')
all=$(awk '{s += $NF} END {print s + 0}' "$dir/folded")
echo "split.py: $pending of $all samples pending"
grep -o 'libpython3.13.so.1.0: .*' "$dir/log" || echo "libpython's table was not ready"
