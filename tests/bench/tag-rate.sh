#!/bin/sh
# tag-rate.sh - how often the BPF Python walker reads a code object's tag
# rather than taking it from its per-CPU cache (bpf/python.bpf.h, "Tags").
#
#   tests/bench/tag-rate.sh PERFD HZ PYTHON
#
# Starts PERFD at HZ, runs tests/workloads/python/deep.py under PYTHON (33
# frames of 4 code objects), and prints the tags read and cached per
# Python sample over 3 s after 1 s of warm-up, from `status --json`.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 PERFD HZ PYTHON" >&2; exit 2; }
perfd=$1 hz=$2 python=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
perfctl=$(dirname "$perfd")/perfctl
sock=$(mktemp -u /tmp/perfd-tags.XXXXXX)
"$perfd" --socket "$sock" --frequency "$hz" 2>/dev/null & p=$!
w=
trap 'kill $p $w 2>/dev/null || true' EXIT
sleep 2
"$python" "$here/tests/workloads/python/deep.py" 6 30 >/dev/null & w=$!
sleep 1
a=$("$perfctl" --socket "$sock" --json status)
sleep 3
b=$("$perfctl" --socket "$sock" --json status)
python3 - "$a" "$b" <<'EOF'
import json, sys
a, b = (json.loads(x)["python"] for x in sys.argv[1:3])
d = {k: b[k] - a[k] for k in ("samples", "code_tags_cached", "code_tags_read")}
print(f"{d['samples']} samples: {d['code_tags_read']} tags read, {d['code_tags_cached']} cached, "
      f"{d['code_tags_read'] / d['samples']:.2f} read a sample")
EOF
