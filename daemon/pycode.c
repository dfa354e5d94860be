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
 * str layout (all of 3.8-3.13): after PyObject_HEAD, length at 16, hash at
 * 24, a 32-bit state at 32 whose bits 2-4 are the kind, bit 5 compact and
 * bit 6 ascii.  A compact ASCII string's bytes follow the PyASCIIObject
 * header; other compact strings follow the longer PyCompactUnicodeObject
 * header (utf8_length, utf8 and, before 3.12, wstr_length).
 */
#include "pycode.h"

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

int pymem_read(pid_t pid, uint64_t addr, void *buf, size_t size)
{
	struct iovec local = { .iov_base = buf, .iov_len = size };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = size };
	ssize_t n;

	if (addr == 0)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	return (size_t)n == size ? 0 : -EFAULT;
}

static int read_u64(pid_t pid, uint64_t addr, uint64_t *ret)
{
	return pymem_read(pid, addr, ret, sizeof(*ret));
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
	uint8_t head[40];
	uint64_t length, data;
	uint32_t state;
	unsigned kind;
	_cleanup_free_ void *chars = NULL;
	int r;

	r = pymem_read(pid, addr, head, sizeof(head));
	if (r < 0)
		return r;
	memcpy(&length, head + STR_LENGTH, sizeof(length));
	memcpy(&state, head + STR_STATE, sizeof(state));
	kind = STR_KIND(state);
	/* A name may be long (it is cut), but not absurd: that is not a str. */
	if (!STR_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) ||
	    (STR_ASCII(state) && kind != 1) || length > STR_MAX_LENGTH)
		return -EBADMSG;
	if (length > size - 1)
		length = size - 1; /* the name is cut anyway */
	data = addr + (uint64_t)o->unicode_ascii_data;
	if (!STR_ASCII(state))
		data += rt->minor >= 12 ? 16 : 24; /* utf8_length, utf8[, wstr_length] */
	chars = malloc(length * kind + 1);
	if (!chars)
		return -ENOMEM;
	r = pymem_read(pid, data, chars, length * kind);
	if (r < 0)
		return r;
	pycode_utf8(chars, length, kind, out, size);
	return 0;
}

/* Reads the bytes object at addr into a new buffer. */
static int read_bytes(pid_t pid, const struct pyruntime *rt, uint64_t addr,
		      uint8_t **ret, size_t *ret_size)
{
	const struct pyoffsets *o = rt->offsets;
	uint64_t size;
	uint8_t *buf;
	int r;

	r = read_u64(pid, addr + (uint64_t)o->var_size, &size);
	if (r < 0)
		return r;
	if (size > PYCODE_LINETABLE_MAX)
		return -EBADMSG;
	*ret = NULL;
	*ret_size = 0;
	if (size == 0)
		return 0;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	r = pymem_read(pid, addr + (uint64_t)o->bytes_sval, buf, size);
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	*ret_size = size;
	return 0;
}

int pycode_read(pid_t pid, const struct pyruntime *rt, uint64_t addr, struct pycode *ret)
{
	const struct pyoffsets *o = rt->offsets;
	uint64_t type, name, filename, table;
	int32_t firstlineno, table_off;
	int r;

	if (!o)
		return -EPROTONOSUPPORT;
	table_off = o->code_linetable >= 0 ? o->code_linetable : o->code_lnotab;
	r = read_u64(pid, addr + OB_TYPE, &type);
	if (r < 0)
		return r;
	if (rt->code_type_addr && type != rt->code_type_addr)
		return -EBADMSG;
	if ((r = read_u64(pid, addr + (uint64_t)(o->code_qualname >= 0 ? o->code_qualname : o->code_name),
			  &name)) < 0 ||
	    (r = read_u64(pid, addr + (uint64_t)o->code_filename, &filename)) < 0 ||
	    (r = read_u64(pid, addr + (uint64_t)table_off, &table)) < 0 ||
	    (r = pymem_read(pid, addr + (uint64_t)o->code_firstlineno, &firstlineno,
			    sizeof(firstlineno))) < 0)
		return r;
	/* Filled only on success, as the header promises: strings are big,
	 * so they are read in place and the caller's copy is only trusted
	 * on 0. */
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
