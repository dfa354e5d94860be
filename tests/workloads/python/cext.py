"""cext.py - a Python function that spends its time in C: call_native()
hashes a 16 MiB buffer with hashlib.sha256 over and over, on CPython 3.6
and later.  hashlib's sha256 is OpenSSL's (the _hashlib extension calling
libcrypto's EVP_DigestUpdate and SHA-256 block function) on every CPython
built with OpenSSL, the interpreter's own _sha256/_sha2 module otherwise;
either way the CPU goes to native code, with the GIL released, called from
the line marked "# HOT: native", under the Python frames
<module> -> main -> call_native.

usage: python3 /abs/path/cext.py [CPU_SECONDS]
    prints "ready CPython 3.X.Y" after the first hash, then runs for
    CPU_SECONDS of CPU time in all, or until killed
"""
import hashlib
import platform
import sys
import time

BUF = bytes(range(256)) * (64 * 1024)  # 16 MiB


def call_native(buf):
    return hashlib.sha256(buf).digest()  # HOT: native


def main(cpu_seconds):
    start = time.process_time()
    call_native(BUF)
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    while cpu_seconds is None or time.process_time() - start < cpu_seconds:
        call_native(BUF)  # CALL: native


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None)  # CALL: main
