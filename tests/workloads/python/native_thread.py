"""native_thread.py - a Python process with a thread CPython never saw:
build/workloads/libnativethread.so, loaded with ctypes, starts a raw
pthread spinning in C (native_spin_work), while the main thread spins in
Python (py_spin).  Prints "native TID" (the C thread's kernel tid) and
"ready CPython X.Y.Z", then runs until the main thread has used
CPU_SECONDS of CPU, or until killed.

usage: python3 /abs/path/native_thread.py LIBNATIVETHREAD [CPU_SECONDS]
"""
import ctypes
import platform
import sys
import time


def py_spin(limit):
    x = 0
    while limit is None or time.thread_time() < limit:
        for i in range(10000):
            x = (x + i * i) % 1000003  # HOT: py
    return x


def main(lib_path, cpu_seconds):
    lib = ctypes.CDLL(lib_path)
    if lib.start_native_thread() != 0:
        sys.exit("cannot start the native thread")
    tid = ctypes.c_int.in_dll(lib, "native_thread_tid")
    while tid.value == 0:
        time.sleep(0.001)
    print("native", tid.value, flush=True)
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    py_spin(cpu_seconds)  # CALL: py


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)  # CALL: main
