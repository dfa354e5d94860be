#!/bin/sh
# bpf-cost.sh - the kernel cost per sample of one perfd binary on one
# workload, for A/B comparisons of BPF changes (run old and new alternately;
# the machine's drift between runs is the noise to beat).
#
#   tests/bench/bpf-cost.sh PERFD COMMAND [ARGS...]
#
# Starts PERFD at 999 Hz, two copies of COMMAND (one per CPU of a 2-CPU
# machine), and prints bpf_stats' run_time_ns / run_cnt of on_cpu_clock over
# 4 s after 1 s of warm-up.  As root; bpf_stats_enabled is restored.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 PERFD COMMAND [ARGS...]" >&2; exit 2; }
perfd=$1; shift
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
sock=$(mktemp -u /tmp/perfd-cost.XXXXXX)
stats() {
	bpftool prog show name on_cpu_clock -j |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["run_time_ns"], d["run_cnt"])'
}
sysctl -q kernel.bpf_stats_enabled=1
a= b=
"$perfd" --socket "$sock" --frequency 999 2>/dev/null & p=$!
trap 'kill $p $a $b 2>/dev/null || true; sysctl -q kernel.bpf_stats_enabled=$old_stats' EXIT
sleep 2
"$@" >/dev/null & a=$!
"$@" >/dev/null & b=$!
sleep 1
s1=$(stats)
sleep 4
s2=$(stats)
echo "$s1 $s2" | awk '{printf "%.0f ns/sample over %d samples\n", ($3-$1)/($4-$2), $4-$2}'
