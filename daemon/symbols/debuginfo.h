/* SPDX-License-Identifier: MIT */
/*
 * debuginfo.h - finding the symbols a stripped ELF file left elsewhere.
 *
 * Distributions strip their binaries and ship the symbols apart, in one of
 * two ways, and this module finds them the way gdb does:
 *
 *  - a separate debug file (Debian's -dbgsym/-dbg packages, Fedora's
 *    -debuginfo): looked up by build-id under DEBUG_DIR/.build-id/, then
 *    through the .gnu_debuglink section (a file name and a CRC32) next to
 *    the binary, in its .debug/ subdirectory and under DEBUG_DIR/<its
 *    directory>/.  A file is used only when it proves to be the right one:
 *    the same build-id, or the CRC the binary recorded.
 *  - MiniDebugInfo (Fedora, CentOS): an xz-compressed ELF in the binary's
 *    .gnu_debugdata section, holding a .symtab of the functions .dynsym
 *    lacks.
 *
 * Both results feed elf_symtab_add_from_fd()/_from_memory() (elfsym.h).
 * Files are opened read-only, close-on-exec and non-blocking (a FIFO
 * planted where a debug file is expected cannot hang the daemon), and only
 * regular files are accepted.
 */
#ifndef PERFD_DEBUGINFO_H
#define PERFD_DEBUGINFO_H

#include <stddef.h>

/* Where distributions install debug files; perfd's --debug-dir default. */
#define DEBUGINFO_DEFAULT_DIR "/usr/lib/debug"

/* Candidates are files a process's owner may choose: one bigger than
 * these is refused unread.  A build-id candidate is read for its headers
 * and notes; a debuglink candidate is read whole for its CRC (~50 ms at
 * the cap, from the page cache; seconds from a slow disk).  Both run on
 * the symbolizer's lanes (symload.h, debugsearch.h), never on the loop:
 * even an open is a file system's to answer. */
#define DEBUGINFO_MAX_BYTES ((uint64_t)1 << 30)
#define DEBUGINFO_CRC_MAX_BYTES ((uint64_t)64 << 20)

/* Which searches debuginfo_find does (or'ed). */
enum {
	DEBUGINFO_BY_BUILD_ID = 1 << 0, /* cheap: headers and notes */
	DEBUGINFO_BY_LINK = 1 << 1,     /* slow: whole files read for a CRC */
	DEBUGINFO_ALL = DEBUGINFO_BY_BUILD_ID | DEBUGINFO_BY_LINK,
};

/* Finds the separate debug file of the ELF file read from fd (only pread;
 * not kept or closed).
 *
 * path is the absolute path the process saw the binary at (from
 * /proc/PID/maps, without a " (deleted)" mark); it names the directories
 * .gnu_debuglink is searched in, and may be NULL to search by build-id
 * only.  root is the prefix under which the process's paths are found:
 * "/proc/PID/root" for a process in another mount namespace, "" (or NULL)
 * for the host.  Under a root, paths are resolved as if it were "/"
 * (openat2 RESOLVE_IN_ROOT, so absolute symlinks stay inside it).
 * debug_dir is the debug directory (NULL for DEBUGINFO_DEFAULT_DIR); it is
 * searched under root and then, when root is not the host's own, on the
 * host too, so that one --debug-dir can serve containers.  When root cannot
 * be opened (the process has exited), only debug_dir on the host is
 * searched.
 *
 * Order, first match wins, among the searches what asks for
 * (DEBUGINFO_BY_*): debug_dir/.build-id/xx/rest.debug (checked to
 * carry the same build-id); then the .gnu_debuglink name in the binary's
 * directory, in its .debug/ subdirectory, and in debug_dir/<directory>/
 * (each checked against the recorded CRC32, and never the binary itself).
 * Symlinks are followed in debug_dir (inside root: .build-id entries are
 * symlinks) but not in the binary's directory or its .debug/: those are
 * the binary owner's, who could point them anywhere.  A candidate past
 * the caps above, or a symlink there, is refused unread and counted in
 * *ret_refused (may be NULL), written whatever the result.
 *
 * Cost: a failed candidate is one open(); a build-id candidate reads its
 * ELF headers and notes; a debuglink candidate is read whole for its CRC
 * (about 1 ms per 4 MB) -- the reason the build-id comes first, and the
 * reason the daemon runs the debuglink search off its loop.
 *
 * Returns a new descriptor (O_CLOEXEC, owned by the caller), and, when
 * ret_path is not NULL, the path it was opened at (host view, malloc'd,
 * for messages).  Returns -ENOENT when there is no such file or the binary
 * names none, -ENOEXEC when fd is not ELF, -ENOMEM, or the -errno of
 * reading fd (-EBADF, -EIO). */
int debuginfo_find(int fd, const char *path, const char *root, const char *debug_dir,
		   unsigned what, char **ret_path, unsigned *ret_refused);

/* Decompresses the MiniDebugInfo of the ELF file read from fd (only pread;
 * not kept): the .gnu_debugdata section, an xz stream holding a small ELF
 * file with a .symtab.  On success *ret_image is a malloc'd ELF image of
 * *ret_size bytes, for elf_symtab_add_from_memory() and then free().
 *
 * Cost: the section is read whole and decompressed in memory: typically a
 * few hundred KB out, at xz's 50-100 MB/s.  The decoder may use up to 128
 * MiB and the image may reach 64 MiB; beyond that the data is refused.
 *
 * Returns 0, -ENOENT when the file has no .gnu_debugdata, -EBADMSG when it
 * is not a valid xz stream of an ELF file, -EFBIG past the limits above,
 * -ENOEXEC when fd is not ELF, -ENOMEM. */
int debuginfo_minidebuginfo(int fd, void **ret_image, size_t *ret_size);

#endif
