/* SPDX-License-Identifier: MIT */
/*
 * jitdump.c - see jitdump.h.
 *
 * The code bytes, which are most of a jitdump (CPython's trampolines and
 * their unwind records: ~200 bytes a function), are seeked over, never
 * read: a parse reads ~60 bytes per function plus its name.  Sizes in the
 * file are the writer's and are trusted for nothing but moving on: every
 * field is read with its bound checked against the record's size, and the
 * read stops at the first record that does not fit in the file (the writer
 * is appending it now) or past PERFMAP_MAX_BYTES.  Functions land in a
 * perfmap (perfmap_add), so lookups and overlaps work as for perf maps.
 */
#include "symbols/jitdump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "perfd/macro.h"

#define HEADER_SIZE 40  /* magic, version, total_size, elf_mach, pad1, pid, timestamp, flags */
#define HEADER_MAX 4096 /* a header that says it is bigger is not a jitdump */
#define RECORD_PREFIX 16 /* id, total_size, timestamp */
#define LOAD_FIELDS 40   /* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIELDS 48   /* pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index */
#define JITDUMP_VERSION 1

enum record_id {
	JIT_CODE_LOAD = 0,
	JIT_CODE_MOVE = 1,
};

static uint32_t get_u32(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

static uint64_t get_u64(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

bool jitdump_is(const void *head, size_t n)
{
	return n >= 4 && get_u32(head) == JITDUMP_MAGIC;
}

/* Reads exactly n bytes; false at the end of the file or on an error
 * (ferror tells them apart). */
static bool read_exact(FILE *f, void *buf, size_t n)
{
	return fread(buf, 1, n, f) == n;
}

struct reader {
	FILE *f;
	struct perfmap *map;
	struct u64map loads; /* code_index -> index of its function in map, + 1 */
	size_t skipped, functions;
};

/* Reads the NUL-terminated name that starts here, room bytes of record
 * left, into name (JITDUMP_NAME_MAX bytes), 256 bytes at a time: a name is
 * short, the code after it may be long.  Returns its length (cut at
 * JITDUMP_NAME_MAX), -EBADMSG when the record ends before its NUL, or
 * -ENODATA when the file does. */
static ssize_t read_name(FILE *f, size_t room, char *name)
{
	size_t len = 0;

	for (;;) {
		size_t chunk = MIN(MIN(room, (size_t)JITDUMP_NAME_MAX) - len, (size_t)256), got;
		const char *nul;

		if (chunk == 0)
			break;
		got = fread(name + len, 1, chunk, f);
		nul = memchr(name + len, '\0', got);
		if (nul)
			return nul - name;
		len += got;
		if (got < chunk)
			return -ENODATA;
	}
	return room > JITDUMP_NAME_MAX ? JITDUMP_NAME_MAX : -EBADMSG;
}

/* A code load: its fields, then its NUL-terminated name, within size bytes
 * (size - RECORD_PREFIX of them left).  Returns 1 to go on, 0 at a record
 * cut short, or -errno. */
static int read_load(struct reader *rd, uint32_t size)
{
	uint8_t fields[LOAD_FIELDS];
	char name[JITDUMP_NAME_MAX];
	uint64_t index;
	ssize_t len;
	int r;

	if (size < RECORD_PREFIX + LOAD_FIELDS + 1) {
		rd->skipped++;
		return 1;
	}
	if (!read_exact(rd->f, fields, sizeof(fields)))
		return 0;
	len = read_name(rd->f, size - RECORD_PREFIX - LOAD_FIELDS, name);
	if (len == -ENODATA)
		return 0;
	if (len < 0) {
		rd->skipped++; /* no NUL within the record */
		return 1;
	}
	if (rd->functions >= JITDUMP_MAX_FUNCTIONS)
		return -EFBIG;
	r = perfmap_add(rd->map, get_u64(fields + 16), get_u64(fields + 24), name, (size_t)len);
	if (r == -EINVAL) {
		rd->skipped++; /* no code, or an empty name */
		return 1;
	}
	if (r < 0)
		return r;
	index = get_u64(fields + 32);
	if (index != U64MAP_EMPTY) {
		uint64_t *slot = u64map_upsert(&rd->loads, index, NULL);

		if (!slot)
			return -ENOMEM;
		*slot = rd->functions + 1;
	}
	rd->functions++;
	return 1;
}

/* A code move: the code of a load, by its index, now at another address
 * (under the same name).  Returns as read_load. */
static int read_move(struct reader *rd, uint32_t size)
{
	uint8_t fields[MOVE_FIELDS];
	uint64_t index, *slot;
	int r;

	if (size < RECORD_PREFIX + MOVE_FIELDS) {
		rd->skipped++;
		return 1;
	}
	if (!read_exact(rd->f, fields, sizeof(fields)))
		return 0;
	index = get_u64(fields + 40);
	slot = index != U64MAP_EMPTY ? u64map_get(&rd->loads, index) : NULL;
	if (!slot) {
		rd->skipped++; /* moves code that was never loaded */
		return 1;
	}
	if (rd->functions >= JITDUMP_MAX_FUNCTIONS)
		return -EFBIG;
	/* by the name's offset, not a pointer into the names perfmap_add may move */
	r = perfmap_add_named_as(rd->map, get_u64(fields + 24), get_u64(fields + 32),
				 (size_t)(*slot - 1));
	if (r == -EINVAL) {
		rd->skipped++;
		return 1;
	}
	if (r < 0)
		return r;
	*slot = rd->functions + 1; /* moved again: from here */
	rd->functions++;
	return 1;
}

/* Reads the records after the header, from offset pos on, up to the end
 * of the file at end. */
static int read_records(struct reader *rd, uint64_t pos, uint64_t end)
{
	for (;;) {
		uint8_t prefix[RECORD_PREFIX];
		uint32_t id, size;
		int r;

		if (pos >= end)
			return 0; /* the last record ran to the end, or past it */
		if (fseeko(rd->f, (off_t)pos, SEEK_SET) < 0)
			return -errno;
		if (!read_exact(rd->f, prefix, sizeof(prefix)))
			return ferror(rd->f) ? -EIO : 0;
		id = get_u32(prefix);
		size = get_u32(prefix + 4);
		if (size < RECORD_PREFIX) {
			rd->skipped++; /* nothing to move on by */
			return 0;
		}
		if (pos + size > PERFMAP_MAX_BYTES)
			return -EFBIG;
		r = id == JIT_CODE_LOAD ? read_load(rd, size) :
		    id == JIT_CODE_MOVE ? read_move(rd, size) : 1;
		if (r <= 0)
			return r < 0 ? r : (ferror(rd->f) ? -EIO : 0);
		pos += size;
	}
}

int jitdump_parse(FILE *f, struct perfmap **ret, size_t *ret_skipped)
{
	struct reader rd = { .f = f };
	uint8_t header[HEADER_SIZE];
	uint32_t size;
	off_t end;
	int r;

	if (!read_exact(f, header, sizeof(header)))
		return ferror(f) ? -EIO : -ENOEXEC;
	if (get_u32(header) == __builtin_bswap32(JITDUMP_MAGIC))
		return -EPROTONOSUPPORT;
	size = get_u32(header + 8);
	if (!jitdump_is(header, sizeof(header)) || size < HEADER_SIZE || size > HEADER_MAX)
		return -ENOEXEC;
	if (get_u32(header + 4) != JITDUMP_VERSION)
		return -EPROTONOSUPPORT;
	if (fseeko(f, 0, SEEK_END) < 0 || (end = ftello(f)) < 0)
		return -errno;
	r = perfmap_new(&rd.map);
	if (r < 0)
		return r;
	u64map_init(&rd.loads);
	r = read_records(&rd, size, (uint64_t)end);
	u64map_done(&rd.loads);
	if (r < 0) {
		perfmap_free(rd.map);
		return r;
	}
	perfmap_seal(rd.map);
	if (ret_skipped)
		*ret_skipped = rd.skipped;
	*ret = rd.map;
	return 0;
}
