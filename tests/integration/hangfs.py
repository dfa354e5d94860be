"""hangfs.py - a read-only FUSE filesystem serving one file, whose server
can be made to stop answering: what a user who mounts a filesystem of their
own can do to anyone who reads a file on it (test_modules.py).

usage: hangfs.py MOUNTPOINT SOURCE NAME HANG_FILE LOG_FILE [live]

Serves a copy of the file SOURCE (read at start, kept in memory; with
"live", read again at every request, so that it may be written later) as
MOUNTPOINT/NAME (a pattern, as fnmatch's: under every name it matches), mounted with attr_timeout=0 and entry_timeout=0: every
stat() of it reaches this server.  While HANG_FILE exists every request
blocks (init and destroy excepted), each for at most HANG_MAX seconds, so
that a test that fails before removing it cannot leave a caller stuck for
ever; each blocked request is logged to LOG_FILE as "OP TID" (the thread
that asked, as the kernel tells) when it arrives.  Prints "mounted" once the
kernel has the mount.  Runs on Debian's python3 with python3-fusepy (whose
module is named fusepy; pip's is named fuse) and libfuse2, which mounts
directly when root, without fusermount.
"""

import errno
import fnmatch
import os
import stat
import sys
import time

try:
    import fusepy as fuse
except ImportError:
    import fuse

HANG_MAX = 20.0


class HangFS(fuse.Operations):
    def __init__(self, source, live, name, hang_file, log_file):
        self.source, self.live = source, live
        self.kept = None if live else self.read_source()
        self.pattern = name
        self.hang_file = hang_file
        self.log = open(log_file, "a", buffering=1)
        now = time.time()
        self.times = {"st_atime": now, "st_mtime": now, "st_ctime": now}

    def read_source(self):
        with open(self.source, "rb") as f:
            return f.read()

    @property
    def data(self):
        return self.read_source() if self.live else self.kept

    def __call__(self, op, *args):
        if op not in ("init", "destroy") and os.path.exists(self.hang_file):
            tid = fuse.fuse_get_context()[2]
            self.log.write(f"{op} {tid}\n")
            deadline = time.monotonic() + HANG_MAX
            while os.path.exists(self.hang_file) and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().__call__(op, *args)

    def init(self, path):
        print("mounted", flush=True)

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2, **self.times)
        if self.serves(path):
            return dict(st_mode=stat.S_IFREG | 0o755, st_nlink=1, st_size=len(self.data),
                        **self.times)
        raise fuse.FuseOSError(errno.ENOENT)

    def serves(self, path):
        return fnmatch.fnmatchcase(path[1:], self.pattern) and "/" not in path[1:]

    def readdir(self, path, fh):
        literal = not any(c in self.pattern for c in "*?[")
        return [".", ".."] + ([self.pattern] if literal else [])

    def open(self, path, flags):
        if not self.serves(path):
            raise fuse.FuseOSError(errno.ENOENT)
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise fuse.FuseOSError(errno.EROFS)
        return 0

    def read(self, path, size, offset, fh):
        return self.data[offset:offset + size]


def main():
    mountpoint, source, name, hang_file, log_file = sys.argv[1:6]
    live = sys.argv[6:] == ["live"]
    fuse.FUSE(HangFS(source, live, name, hang_file, log_file), mountpoint, foreground=True,
              nothreads=False, ro=True, allow_other=True, attr_timeout=0, entry_timeout=0,
              negative_timeout=0, kernel_cache=True, fsname="perfd-hangfs")


if __name__ == "__main__":
    main()
