#!/bin/busybox sh
# init.sh - the /init of the kernel matrix's guests (tests/kernels/).
#
# It only collects: it mounts what perfd needs, runs perfd --check, starts
# perfd, snapshots two workloads of known shape and prints every output
# between markers on the serial console, then powers off.  Every judgement
# is made on the host (test_kernels.py), so a guest that misbehaves shows
# its raw output there.  A section reads
#   @@perfd-kernels begin NAME
#   ...output...
#   @@perfd-kernels end NAME rc=STATUS
# Settings (frequency, durations, timeouts) come from /etc/kmatrix.conf,
# written by the host into the image.
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /usr/sbin /sbin
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Only our markers on the console from here on; under emulation a perf
# interrupt takes long, and the kernel would lower the sample rate.
dmesg -n 1
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
. /etc/kmatrix.conf

SOCK=/run/perfd.sock
M=@@perfd-kernels

# section NAME FILE RC: prints FILE between markers.
section() {
	echo "$M begin $1"
	cat "$2"
	echo "$M end $1 rc=$3"
}

# run NAME CMD...: runs CMD (stdout and stderr together) and prints it.
run() {
	name=$1
	shift
	"$@" > /tmp/out 2>&1
	rc=$?
	section "$name" /tmp/out $rc
}

# snap NAME PID: a snapshot of PID for $DURATION seconds, its stdout and
# stderr each in a section.
snap() {
	perfctl --socket $SOCK snapshot --pid "$2" --duration "$DURATION" > /tmp/snap.out 2> /tmp/snap.err
	rc=$?
	section "$1" /tmp/snap.out $rc
	section "$1-stderr" /tmp/snap.err $rc
}

echo "$M boot $(cut -d' ' -f1 /proc/uptime) $(uname -r)"
run features sh -c 'ls /sys/kernel/btf/vmlinux /sys/fs/bpf /sys/kernel/tracing/events >/dev/null &&
	cat /proc/sys/kernel/perf_event_max_sample_rate'
# The verifier can take minutes under emulation: a program that runs into
# its 1M-instruction limit takes some 15 s of a native CPU.
run check timeout "$CHECK_TIMEOUT" perfd --check

# perfd as the integration tests start it (--socket); up once perfctl
# status answers.
perfd --socket $SOCK --frequency "$FREQUENCY" > /tmp/perfd.log 2>&1 &
PERFD=$!
started=$(cut -d' ' -f1 /proc/uptime)
up=0
deadline=$(($(cut -d. -f1 /proc/uptime) + READY_TIMEOUT))
while [ "$(cut -d. -f1 /proc/uptime)" -lt $deadline ]; do
	if perfctl --socket $SOCK status > /dev/null 2>&1; then
		up=1
		break
	fi
	kill -0 $PERFD 2>/dev/null || break
	sleep 0.2
done
alive=0
kill -0 $PERFD 2>/dev/null && alive=1
echo "$M perfd-start up=$up alive=$alive from=$started at=$(cut -d' ' -f1 /proc/uptime)"
if [ $up = 0 ] && [ $alive = 1 ]; then
	# Where it is stuck (in bpf(), syscall 321, with the verifier, most
	# likely): a task on a CPU shows "running" and no stack.
	{ grep '^State' /proc/$PERFD/status; echo "syscall: $(cat /proc/$PERFD/syscall)"
	  cat /proc/$PERFD/stack; } > /tmp/stack 2>&1
	section perfd-stack /tmp/stack 0
fi

if [ $up = 1 ]; then
	run status perfctl --socket $SOCK --json status
	# The kernel's own count of what its verifier did for each program,
	# whatever perfd reports of itself: verified_insns in the fdinfo of
	# perfd's program fds (Debian 12's bpftool does not print it), the
	# programs' names from bpftool.
	run progs bpftool -j prog show
	for f in /proc/$PERFD/fdinfo/*; do
		id=$(sed -n 's/^prog_id:[[:space:]]*//p' "$f")
		n=$(sed -n 's/^verified_insns:[[:space:]]*//p' "$f")
		[ -n "$id" ] && echo "prog_id=$id verified_insns=$n"
	done > /tmp/fdinfo
	section fdinfo /tmp/fdinfo 0

	# nofp: run longer than the snapshot, which starts once its unwind
	# tables had time to be built; stopped once it is taken.
	/workloads/nofp $((DURATION + SETTLE + 2)) > /tmp/nofp.log 2>&1 &
	NOFP=$!
	sleep "$SETTLE"
	snap nofp $NOFP
	kill $NOFP 2>/dev/null
	wait $NOFP

	# split.py prints "ready ..." once both of its functions have run.
	python3.11 -S -I /workloads/split.py $((DURATION + SETTLE + 4)) > /tmp/split.log 2>&1 &
	SPLIT=$!
	i=0
	while ! grep -q '^ready' /tmp/split.log && [ $i -lt 300 ] && kill -0 $SPLIT 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep "$SETTLE"
	snap python $SPLIT
	kill $SPLIT 2>/dev/null
	wait $SPLIT
	section split-log /tmp/split.log 0

	kill -TERM $PERFD
	wait $PERFD
	prc=$?
else
	kill -KILL $PERFD 2>/dev/null
	wait $PERFD
	prc=$?
fi
section perfd-log /tmp/perfd.log $prc
# What the kernel said (an OOM kill, a BPF warning), for the host's report.
dmesg | tail -n 60 > /tmp/dmesg
section dmesg /tmp/dmesg 0
echo "$M done"
sync
poweroff -f
