"""load.py - sends service.py one request after another, for its 50 users in turn.

Run:  python3 load.py [PORT] [SECONDS]   (default 8080, until stopped)
"""
import sys
import time
import urllib.request


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else float("inf")
    end = time.monotonic() + seconds
    user = 0
    while time.monotonic() < end:
        user = (user + 1) % 50
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/report?user={user}") as r:
            r.read()


if __name__ == "__main__":
    main()
