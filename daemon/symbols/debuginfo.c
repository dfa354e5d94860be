/* SPDX-License-Identifier: MIT */
/*
 * debuginfo.c - finding the symbols a stripped ELF file left elsewhere.
 *
 * See debuginfo.h for the search order.  The binary is read once, with
 * libelf, for the two things that name its debug file: the GNU build-id
 * note and the .gnu_debuglink section.  Candidates are then opened in
 * order and each is proved before it is returned (same build-id, or the
 * recorded CRC32), so a stale or foreign file at a plausible path is
 * passed over, never used.  Candidates are bounded (debuginfo.h): a
 * file too big, or a symlink where the binary's owner chooses the path,
 * is refused unread and counted.  Nothing is cached here: the symbolizer asks
 * once per binary and keeps the symbols it merged.
 */
#include "symbols/debuginfo.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <lzma.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/elfopen.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "symbols/buildid.h"

#define CRC_CHUNK (128 * 1024)
/* xz -9 needs 65 MiB to decode; real MiniDebugInfo is a few MB at most. */
#define MINIDEBUGINFO_MEMLIMIT ((uint64_t)128 << 20)
#define MINIDEBUGINFO_MAX ((size_t)64 << 20)

/* What names an ELF file's debug file. */
struct elf_ids {
	unsigned char build_id[BUILD_ID_MAX];
	size_t build_id_len; /* 0: none */
	char *link_name;     /* .gnu_debuglink file name, NULL: none */
	uint32_t link_crc;
};

/* A tree paths are resolved in: the host's ("", fd -1) or a process's. */
struct search_root {
	const char *prefix;
	int fd; /* O_PATH directory of prefix */
};


static void elf_ids_done(struct elf_ids *ids)
{
	free(ids->link_name);
}

static void lzma_stream_done(lzma_stream *s)
{
	lzma_end(s);
}


/* .gnu_debuglink holds a NUL-terminated file name, padding to 4 bytes and
 * a 4-byte CRC in the file's byte order.  A name that is not a plain file
 * name is ignored: it is joined to directories. */
static int parse_debuglink(Elf_Data *data, unsigned char byte_order, struct elf_ids *ids)
{
	const unsigned char *p = data->d_buf;
	size_t len, crc_off;

	if (!p || data->d_size == 0)
		return 0;
	len = strnlen((const char *)p, data->d_size);
	crc_off = (len + 1 + 3) & ~(size_t)3;
	if (len == 0 || len >= NAME_MAX || crc_off + 4 > data->d_size ||
	    memchr(p, '/', len) || strcmp((const char *)p, ".") == 0 ||
	    strcmp((const char *)p, "..") == 0)
		return 0;

	ids->link_name = strndup((const char *)p, len);
	if (!ids->link_name)
		return -ENOMEM;
	p += crc_off;
	if (byte_order == ELFDATA2MSB)
		ids->link_crc = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	else
		ids->link_crc = (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
	return 0;
}

/* Reads the build-id (buildid.h: from the file) and, if want_link, the
 * debuglink. */
static int read_ids(int fd, bool want_link, struct elf_ids *ids)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	const uint8_t *id;
	GElf_Ehdr ehdr;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t len;
	int r;

	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	if (!gelf_getehdr(elf, &ehdr))
		return -ENOEXEC;

	/* a longer note than BUILD_ID_MAX is not looked up */
	if (build_id_from_elf(elf, BUILD_ID_FROM_FILE, BUILD_ID_MAX, &id, &len) == 0) {
		memcpy(ids->build_id, id, len);
		ids->build_id_len = len;
	}

	if (want_link) {
		scn = elf_find_section(elf, ".gnu_debuglink", &sh);
		if (scn && sh.sh_type != SHT_NOBITS) {
			Elf_Data *data = elf_rawdata(scn, NULL);

			if (data) {
				r = parse_debuglink(data, ehdr.e_ident[EI_DATA], ids);
				if (r < 0)
					return r;
			}
		}
	}
	return 0;
}

/* The CRC32 that gnu_debuglink records: zlib's, over the whole file. */
static int file_crc32(int fd, uint32_t *ret)
{
	_cleanup_free_ unsigned char *buf = malloc(CRC_CHUNK);
	uLong crc = crc32(0L, Z_NULL, 0);
	off_t off = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = pread(fd, buf, CRC_CHUNK, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	*ret = (uint32_t)crc;
	return 0;
}

/* Opens path (absolute) inside root as a regular file of at most max_size
 * bytes: the one way of opening a file under a process's root (procfs.h).
 * Symlinks are followed (inside the root) only when follow: .build-id
 * entries are symlinks, but the binary's own directory is its owner's.
 * Returns the fd or -errno (-EFBIG, -ELOOP: refused). */
static int open_in_root(const struct search_root *root, const char *path, bool follow,
			uint64_t max_size)
{
	const struct procfs_file_rules rules = { .follow_symlinks = follow, .max_size = max_size };

	return procfs_open_in_root(root->fd >= 0 ? root->fd : AT_FDCWD, path, &rules);
}

static bool same_file(int fd, const struct stat *other)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_dev == other->st_dev && st.st_ino == other->st_ino;
}

/* Fills roots with where to look and returns how many: the process's tree
 * first, then the host's when that is another one.  When prefix cannot be
 * opened (the process has exited), only the host is left and
 * *ret_have_tree is false: the binary's own directories are then unknown. */
static int open_roots(const char *prefix, struct search_root roots[2], bool *ret_have_tree)
{
	struct stat st, host;
	int fd;

	roots[0] = (struct search_root){ .prefix = "", .fd = -1 };
	*ret_have_tree = true;
	if (!prefix || !prefix[0])
		return 1;
	fd = open(prefix, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		*ret_have_tree = false;
		return 1;
	}
	if (fstat(fd, &st) == 0 && stat("/", &host) == 0 && st.st_dev == host.st_dev &&
	    st.st_ino == host.st_ino) {
		/* A process that shares the host's root. */
		(void)close(fd);
		return 1;
	}
	roots[0] = (struct search_root){ .prefix = prefix, .fd = fd };
	roots[1] = (struct search_root){ .prefix = "", .fd = -1 };
	return 2;
}

/* One search: what is looked for, and what was refused on the way. */
struct search {
	const struct elf_ids *want;
	const struct stat *binary;
	char **ret_path;
	unsigned refused; /* candidates too big, or symlinks where refused */
};

/* Opens a candidate and keeps it if it is the debug file: the same build-id
 * (by_build_id) or the recorded CRC.  Returns the fd, or < 0 to go on
 * (-ENOMEM stops the search). */
static int try_candidate(struct search *q, const struct search_root *root, const char *path,
			 bool by_build_id, bool follow)
{
	const struct elf_ids *want = q->want;
	_cleanup_close_ int fd = -1;
	int r;

	/* a CRC reads the whole file: smaller cap */
	fd = open_in_root(root, path, follow,
			  by_build_id ? DEBUGINFO_MAX_BYTES : DEBUGINFO_CRC_MAX_BYTES);
	if (fd == -EFBIG || fd == -ELOOP)
		q->refused++;
	if (fd < 0)
		return fd == -ENOMEM ? fd : -ENOENT;
	if (same_file(fd, q->binary))
		return -ENOENT;

	if (by_build_id) {
		struct elf_ids got = {};

		r = read_ids(fd, false, &got);
		elf_ids_done(&got);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || got.build_id_len != want->build_id_len ||
		    memcmp(got.build_id, want->build_id, want->build_id_len) != 0)
			return -ENOENT;
	} else {
		uint32_t crc;

		r = file_crc32(fd, &crc);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || crc != want->link_crc)
			return -ENOENT;
	}

	if (q->ret_path) {
		char *shown;

		if (asprintf(&shown, "%s%s", root->prefix, path) < 0)
			return -ENOMEM;
		*q->ret_path = shown;
	}
	return TAKE_FD(fd);
}

/* Tries the path made by format in the given root; see try_candidate(). */
_printf_(5, 6) static int try_path(struct search *q, const struct search_root *root,
				   bool by_build_id, bool follow, const char *format, ...)
{
	_cleanup_free_ char *path = NULL;
	va_list ap;
	int n;

	va_start(ap, format);
	n = vasprintf(&path, format, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	if (n >= PATH_MAX)
		return -ENOENT;
	return try_candidate(q, root, path, by_build_id, follow);
}

/* A found descriptor or -ENOMEM ends the search; other failures go on. */
#define FOUND(r) ((r) >= 0 || (r) == -ENOMEM)

int debuginfo_find(int fd, const char *path, const char *root, const char *debug_dir,
		   unsigned what, char **ret_path, unsigned *ret_refused)
{
	_cleanup_(elf_ids_done) struct elf_ids ids = {};
	struct search_root roots[2];
	char hex[2 * BUILD_ID_MAX + 1];
	struct stat binary;
	struct search q = { .want = &ids, .binary = &binary, .ret_path = ret_path };
	int n_roots, r = -ENOENT;
	bool have_tree;

	if (ret_refused)
		*ret_refused = 0;
	if (!debug_dir)
		debug_dir = DEBUGINFO_DEFAULT_DIR;

	r = read_ids(fd, (what & DEBUGINFO_BY_LINK) != 0, &ids);
	if (r < 0)
		return r;
	if (fstat(fd, &binary) < 0)
		return negative_errno();
	n_roots = open_roots(root, roots, &have_tree);

	r = -ENOENT;
	if ((what & DEBUGINFO_BY_BUILD_ID) && ids.build_id_len >= 2 &&
	    build_id_hex(ids.build_id, ids.build_id_len, hex, sizeof(hex)) == 0) {
		for (int i = 0; i < n_roots && !FOUND(r); i++)
			r = try_path(&q, &roots[i], true, true, "%s/.build-id/%.2s/%s.debug",
				     debug_dir, hex, hex + 2);
	}

	if (!FOUND(r) && ids.link_name && path && path[0] == '/') {
		const char *slash = strrchr(path, '/');
		int dir_len = (int)MIN((size_t)(slash - path), (size_t)PATH_MAX);
		const char *name = ids.link_name;

		/* The binary's own directories exist only in its root, and
		 * are its owner's to fill: no symlinks there.  The debug
		 * directory is searched in each root. */
		if (have_tree)
			r = try_path(&q, &roots[0], false, false, "%.*s/%s", dir_len, path, name);
		if (have_tree && !FOUND(r))
			r = try_path(&q, &roots[0], false, false, "%.*s/.debug/%s", dir_len, path,
				     name);
		for (int i = 0; i < n_roots && !FOUND(r); i++)
			r = try_path(&q, &roots[i], false, true, "%s%.*s/%s", debug_dir, dir_len,
				     path, name);
	}

	for (int i = 0; i < n_roots; i++)
		closep(&roots[i].fd);
	if (ret_refused)
		*ret_refused = q.refused;
	return FOUND(r) ? r : -ENOENT;
}

/* Decompresses the xz stream(s) in[0..in_size) into a new buffer. */
static int xz_decompress(const void *in, size_t in_size, void **ret, size_t *ret_size)
{
	_cleanup_(lzma_stream_done) lzma_stream s = LZMA_STREAM_INIT;
	_cleanup_free_ uint8_t *out = NULL;
	size_t cap;
	lzma_ret lr;

	lr = lzma_stream_decoder(&s, MINIDEBUGINFO_MEMLIMIT, LZMA_CONCATENATED);
	if (lr != LZMA_OK)
		return lr == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;

	/* Symbol tables compress about 4:1. */
	cap = MIN(MAX(in_size, (size_t)16384) * 4, MINIDEBUGINFO_MAX);
	out = malloc(cap);
	if (!out)
		return -ENOMEM;
	s.next_in = in;
	s.avail_in = in_size;
	s.next_out = out;
	s.avail_out = cap;

	for (;;) {
		lr = lzma_code(&s, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		switch (lr) {
		case LZMA_OK:
			break;
		case LZMA_MEM_ERROR:
			return -ENOMEM;
		case LZMA_MEMLIMIT_ERROR:
			return -EFBIG;
		default: /* format, options, data, truncation (BUF_ERROR) */
			return -EBADMSG;
		}
		if (s.avail_out == 0) {
			size_t grown = MIN(cap * 2, MINIDEBUGINFO_MAX);
			uint8_t *p;

			if (grown == cap)
				return -EFBIG;
			p = realloc(out, grown);
			if (!p)
				return -ENOMEM;
			out = p;
			s.next_out = out + cap;
			s.avail_out = grown - cap;
			cap = grown;
		}
	}

	*ret_size = (size_t)s.total_out;
	if (*ret_size < cap) {
		uint8_t *p = realloc(out, MAX(*ret_size, (size_t)1));

		if (p)
			out = p;
	}
	*ret = TAKE_PTR(out);
	return 0;
}

int debuginfo_minidebuginfo(int fd, void **ret_image, size_t *ret_size)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	_cleanup_free_ void *image = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t size;
	int r;

	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	scn = elf_find_section(elf, ".gnu_debugdata", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
		return -ENOENT;
	data = elf_rawdata(scn, NULL);
	if (!data || !data->d_buf)
		return -EBADMSG;

	r = xz_decompress(data->d_buf, data->d_size, &image, &size);
	if (r < 0)
		return r;
	if (size < SELFMAG || memcmp(image, ELFMAG, SELFMAG) != 0)
		return -EBADMSG;

	*ret_image = TAKE_PTR(image);
	*ret_size = size;
	return 0;
}
