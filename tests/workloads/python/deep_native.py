"""deep_native.py - Python frames on both sides of a deep native recursion:
main() calls build/workloads/libdeeprec.so's deep_recurse through ctypes,
which recurses in C and calls back into Python at the bottom, where spin()
burns CPU.  Calls alternate between a shallow recursion (SHALLOW frames:
the whole stack fits the unwinder's 127 frames) and a deep one (DEEP
frames: it cannot), each spinning SPIN_SECONDS of thread CPU time, so
about half the samples are of each by construction.

Root first, a sample in spin() reads: _start ... <module> -> main ->
deep_recurse x depth -> (ctypes' callback machinery) -> spin.

usage: python3 /abs/path/deep_native.py LIBDEEPREC [CPU_SECONDS]
    prints "ready CPython 3.X.Y" after one round of both, then runs for
    CPU_SECONDS of this thread's CPU time, or until killed
"""
import ctypes
import platform
import sys
import time

SHALLOW = 20
DEEP = 400
SPIN_SECONDS = 0.005
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


def spin(_):
    x = 0
    until = time.thread_time() + SPIN_SECONDS
    while time.thread_time() < until:
        for i in range(500):
            x = (x + i * i) % 1000003  # HOT: spin
    return 0


def main(lib_path, cpu_seconds):
    lib = ctypes.CDLL(lib_path)
    callback = CALLBACK(spin)
    start = time.thread_time()
    rounds = 0
    while cpu_seconds is None or time.thread_time() - start < cpu_seconds:
        lib.deep_recurse(SHALLOW, callback)  # CALL: shallow
        lib.deep_recurse(DEEP, callback)  # CALL: deep
        rounds += 1
        if rounds == 1:
            print("ready", platform.python_implementation(),
                  "%d.%d.%d" % sys.version_info[:3], flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)  # CALL: main
