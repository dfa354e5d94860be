/* SPDX-License-Identifier: MIT */
/*
 * pycode.c - see pycode.h.
 *
 * Memory is read with process_vm_readv(): no ptrace stop, and a page that
 * is not mapped fails the read instead of the daemon.  A code object is
 * trusted only when its ob_type is PyCode_Type and its strings are compact
 * str objects of sane length: what the BPF walker recorded may point at
 * memory freed and reused since.
 *
 * Each object costs one read where it can: the code object's fields at
 * once, and a str or bytes object's header with its first bytes (a read
 * that may run past the object is split at page boundaries, so the part
 * before an unmapped page still arrives); only longer contents take a
 * second read.  A system call is microseconds here, the parsing nothing.
 *
 * str layout (all of 3.8-3.15): after PyObject_HEAD, length at 16, hash at
 * 24, a 32-bit state at 32 whose bits 2-4 are the kind, bit 5 compact and
 * bit 6 ascii.  A compact ASCII string's bytes follow the PyASCIIObject
 * header; other compact strings follow the longer PyCompactUnicodeObject
 * header (utf8_length, utf8 and, before 3.12, wstr_length).
 */
#include "interp/python/pycode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "perfd/macro.h"

#define OB_TYPE 8
#define STR_LENGTH 16
#define STR_STATE 32
#define STR_KIND(state) (((state) >> 2) & 7)
#define STR_COMPACT(state) (((state) >> 5) & 1)
#define STR_ASCII(state) (((state) >> 6) & 1)
#define STR_MAX_LENGTH (16u << 20)

#define PAGE 4096u
#define SPECULATIVE_BYTES 192 /* read beyond a header, for short contents */

/* Reads up to size bytes at addr; stops short at an unmapped page.
 * Returns the bytes read (>= want, or -EFAULT), or -ESRCH. */
static ssize_t read_some(pid_t pid, uint64_t addr, void *buf, size_t size, size_t want)
{
	struct iovec local = { .iov_base = buf, .iov_len = size };
	struct iovec remote[3];
	size_t n = 0;
	ssize_t got;

	/* partial transfers stop between iovec elements, never inside */
	for (uint64_t a = addr, end = addr + size; a < end && n < ELEMENTSOF(remote); n++) {
		uint64_t next = MIN((a & ~(uint64_t)(PAGE - 1)) + PAGE, end);

		if (n == ELEMENTSOF(remote) - 1)
			next = end;
		remote[n] = (struct iovec){ .iov_base = (void *)(uintptr_t)a, .iov_len = next - a };
		a = next;
	}
	if (addr == 0)
		return -EFAULT;
	got = process_vm_readv(pid, &local, 1, remote, n, 0);
	if (got < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	return (size_t)got >= want ? got : -EFAULT;
}

int pymem_read(pid_t pid, uint64_t addr, void *buf, size_t size)
{
	ssize_t got = read_some(pid, addr, buf, size, size);

	return got < 0 ? (int)got : 0;
}

static uint64_t get_u64(const uint8_t *b, int32_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static size_t put_utf8(uint32_t c, char *out, size_t room)
{
	if (c < 0x80 && room >= 1) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800 && room >= 2) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c >= 0x800 && c < 0x10000 && room >= 3) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	if (c >= 0x10000 && c < 0x110000 && room >= 4) {
		out[0] = (char)(0xf0 | c >> 18);
		out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[3] = (char)(0x80 | (c & 0x3f));
		return 4;
	}
	return 0;
}

size_t pycode_utf8(const void *chars, size_t length, unsigned kind, char *out, size_t size)
{
	size_t n = 0;

	if (size == 0)
		return 0;
	for (size_t i = 0; i < length; i++) {
		uint32_t c;
		size_t w;

		if (kind == 1)
			c = ((const uint8_t *)chars)[i];
		else if (kind == 2)
			c = ((const uint16_t *)chars)[i];
		else
			c = ((const uint32_t *)chars)[i];
		if (c >= 0x110000 || (c >= 0xd800 && c < 0xe000))
			c = 0xfffd; /* lone surrogates print as the replacement */
		w = put_utf8(c, out + n, size - 1 - n);
		if (w == 0)
			break;
		n += w;
	}
	out[n] = '\0';
	return n;
}

/* Reads the str object at addr into out as UTF-8. */
static int read_str(pid_t pid, const struct pyruntime *rt, uint64_t addr, char *out, size_t size)
{
	const struct pyoffsets *o = rt->offsets;
	uint8_t buf[128 + SPECULATIVE_BYTES];
	_cleanup_free_ uint8_t *chars = NULL;
	uint64_t length, skip, need;
	uint32_t state;
	unsigned kind;
	ssize_t got;

	got = read_some(pid, addr, buf, sizeof(buf), STR_STATE + sizeof(state));
	if (got < 0)
		return (int)got;
	length = get_u64(buf, STR_LENGTH);
	memcpy(&state, buf + STR_STATE, sizeof(state));
	kind = STR_KIND(state);
	/* A name may be long (it is cut), but not absurd: that is not a str. */
	if (!STR_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) ||
	    (STR_ASCII(state) && kind != 1) || length > STR_MAX_LENGTH)
		return -EBADMSG;
	if (length > size - 1)
		length = size - 1; /* the name is cut anyway */
	skip = (uint64_t)o->unicode_ascii_data;
	if (!STR_ASCII(state))
		skip += rt->minor >= 12 ? 16 : 24; /* utf8_length, utf8[, wstr_length] */
	need = length * kind;
	if (skip + need <= (uint64_t)got) {
		pycode_utf8(buf + skip, length, kind, out, size);
		return 0;
	}
	chars = malloc(need + 1);
	if (!chars)
		return -ENOMEM;
	got = read_some(pid, addr + skip, chars, need, need);
	if (got < 0)
		return (int)got;
	pycode_utf8(chars, length, kind, out, size);
	return 0;
}

/* Reads the bytes object at addr into a new buffer. */
static int read_bytes(pid_t pid, const struct pyruntime *rt, uint64_t addr,
		      uint8_t **ret, size_t *ret_size)
{
	const struct pyoffsets *o = rt->offsets;
	uint8_t head[64 + SPECULATIVE_BYTES];
	uint64_t size, skip = (uint64_t)o->bytes_sval;
	uint8_t *buf;
	ssize_t got;

	got = read_some(pid, addr, head, sizeof(head), (size_t)o->var_size + 8);
	if (got < 0)
		return (int)got;
	size = get_u64(head, o->var_size);
	if (size > PYCODE_LINETABLE_MAX)
		return -EBADMSG;
	*ret = NULL;
	*ret_size = 0;
	if (size == 0)
		return 0;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	if (skip + size <= (uint64_t)got)
		memcpy(buf, head + skip, size);
	else if ((got = read_some(pid, addr + skip, buf, size, size)) < 0) {
		free(buf);
		return (int)got;
	}
	*ret = buf;
	*ret_size = size;
	return 0;
}

int pycode_read(pid_t pid, const struct pyruntime *rt, uint64_t addr, struct pycode *ret)
{
	const struct pyoffsets *o = rt->offsets;
	uint8_t code[256];
	uint64_t name, filename, table;
	int32_t firstlineno, table_off, name_off, end;
	ssize_t got;
	int r;

	if (!o)
		return -EPROTONOSUPPORT;
	table_off = o->code_linetable >= 0 ? o->code_linetable : o->code_lnotab;
	name_off = o->code_qualname >= 0 ? o->code_qualname : o->code_name;
	end = MAX(MAX(table_off, name_off), MAX(o->code_filename, o->code_firstlineno)) + 8;
	if (end > (int32_t)sizeof(code))
		return -EPROTONOSUPPORT;
	got = read_some(pid, addr, code, (size_t)end, (size_t)end);
	if (got < 0)
		return (int)got;
	if (rt->code_type_addr && get_u64(code, OB_TYPE) != rt->code_type_addr)
		return -EBADMSG;
	name = get_u64(code, name_off);
	filename = get_u64(code, o->code_filename);
	table = get_u64(code, table_off);
	memcpy(&firstlineno, code + o->code_firstlineno, sizeof(firstlineno));
	/* Strings are big, so they are read in place: the caller trusts
	 * ret only on 0. */
	if ((r = read_str(pid, rt, name, ret->name, sizeof(ret->name))) < 0 ||
	    (r = read_str(pid, rt, filename, ret->filename, sizeof(ret->filename))) < 0)
		return r;
	r = read_bytes(pid, rt, table, &ret->linetable, &ret->linetable_size);
	if (r < 0)
		return r;
	ret->firstlineno = firstlineno;
	ret->filename_addr = filename;
	return 0;
}
