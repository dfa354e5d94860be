"""materialize.py - the classic Python memory mistake next to its fix, on
CPython 3.6 and later: materialize() reads a whole large file and keeps
every token of it in a list, stream() reads the same file line by line and
keeps only a count.

Proves: a memory profiler names the line that made memory grow, and what
made the peak.  Both functions tokenize the very same input (about MIB
megabytes of ASCII words, 40 by default, written by the script itself and
identical on every run and every CPython), and count the same tokens.
stream() holds one line at a time, so it grows the process by next to
nothing; materialize() grows it by several times the file's size, all from
one line (marked "# GROW: materialize"): f.read() of the whole file, then
split() into some 5 million str objects and the list that holds them.  The
file's text is freed when split() returns, so the process peaks at the end
of that line, and then holds the list (what the last line printed says it
costs) for HOLD seconds.  stream runs first, materialize after it, with a
pause before each, so the growth of the two is apart in time and the peak
is materialize's.  stream()'s line is marked "# GROW: stream", the calls
"# CALL: stream" and "# CALL: materialize".

Tokens are words of 3 to 12 letters, never shorter: CPython shares one
object for each 1-character string, and those would not grow anything.
The input is a temporary file without a name (tempfile.TemporaryFile,
O_TMPFILE), which both functions open by its /proc/self/fd path, so a
killed run leaves no file behind.

usage: python3 /abs/path/materialize.py [--mib MIB] [--hold SECONDS] [--pause SECONDS]
    prints, one line each, flushed at once:
    "ready CPython 3.X.Y input BYTES"   once the input is written; then it
                                        sleeps PAUSE seconds (default 1)
    "streamed TOKENS tokens"            stream() returned; PAUSE seconds more
    "materialized TOKENS tokens holding BYTES bytes"
                                        materialize() returned; BYTES is what
                                        the list and its strings take, by
                                        sys.getsizeof rounded up to the
                                        allocator's 16 bytes; it sleeps HOLD
                                        seconds (default 0) holding them
    "done"                              about to exit (status 0)
"""
import argparse
import os
import platform
import sys
import tempfile
import time

# CPython's small-object allocator rounds every block up to this (on 64-bit
# builds, 3.8 and later; 3.6 and 3.7 round to 8, so the estimate is a little
# high there).
ALLOC_ALIGN = 16


def lcg(seed):
    """A tiny deterministic generator, the same on every CPython (random's
    algorithms for ranges have changed between versions)."""
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield x >> 33


def vocabulary(rand, size=4096):
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    for _ in range(size):
        n = 3 + next(rand) % 10
        words.append("".join(letters[next(rand) % 26] for _ in range(n)))
    return words


def write_input(f, mib):
    """Writes mib MiB of lines of words to the binary file f: a block of
    1 MiB of lines, written mib times (the block is freed before anything
    is measured).  Returns the bytes written."""
    rand = lcg(20240611)
    words = vocabulary(rand)
    lines, size = [], 0
    while size < (1 << 20):
        line = " ".join(words[next(rand) % len(words)] for _ in range(12)) + "\n"
        lines.append(line)
        size += len(line)
    block = "".join(lines).encode("ascii")
    del lines
    for _ in range(mib):
        f.write(block)
    return len(block) * mib


def stream(path):
    count = 0
    with open(path, encoding="ascii") as f:
        for line in f:
            count += len(line.split())  # GROW: stream
    return count


def materialize(path):
    with open(path, encoding="ascii") as f:
        tokens = f.read().split()  # GROW: materialize
    return tokens


def held_bytes(tokens):
    """What tokens and its strings occupy, in bytes."""
    def block(n):
        return -(-n // ALLOC_ALIGN) * ALLOC_ALIGN
    return sys.getsizeof(tokens) + sum(block(sys.getsizeof(t)) for t in tokens)


def main(args):
    with tempfile.TemporaryFile() as f:
        size = write_input(f, args.mib)
        f.flush()
        path = "/proc/self/fd/%d" % f.fileno()
        print("ready", platform.python_implementation(),
              "%d.%d.%d" % sys.version_info[:3], "input", size, flush=True)
        time.sleep(args.pause)
        count = stream(path)  # CALL: stream
        print("streamed", count, "tokens", flush=True)
        time.sleep(args.pause)
        tokens = materialize(path)  # CALL: materialize
        if len(tokens) != count:
            sys.exit("materialize found %d tokens, stream %d" % (len(tokens), count))
        print("materialized", len(tokens), "tokens holding", held_bytes(tokens), "bytes",
              flush=True)
        time.sleep(args.hold)
    print("done", flush=True)


def parse_args():
    p = argparse.ArgumentParser(description="materialize a file's tokens, or stream them")
    p.add_argument("--mib", type=int, default=40, help="size of the input in MiB (default 40)")
    p.add_argument("--hold", type=float, default=0.0,
                   help="seconds to hold the tokens (default 0)")
    p.add_argument("--pause", type=float, default=1.0,
                   help="seconds before each phase (default 1)")
    args = p.parse_args()
    if args.mib < 1 or args.hold < 0 or args.pause < 0:
        p.error("MIB must be positive, HOLD and PAUSE not negative")
    return args


if __name__ == "__main__":
    main(parse_args())  # CALL: main
