/* SPDX-License-Identifier: MIT */
/* statefile.c - see statefile.h for the layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "base/varint.h"
#include "perfd/macro.h"
#include "state/statefile.h"

void sbuf_done(struct sbuf *b)
{
	free(b->data);
	*b = (struct sbuf){ 0 };
}

static bool sbuf_room(struct sbuf *b, size_t n)
{
	size_t cap;
	uint8_t *data;

	if (b->failed)
		return false;
	if (b->cap - b->len >= n)
		return true;
	cap = MAX(b->cap * 2, b->len + n + 256);
	data = realloc(b->data, cap);
	if (!data) {
		b->failed = true;
		return false;
	}
	b->data = data;
	b->cap = cap;
	return true;
}

void sbuf_put_varint(struct sbuf *b, uint64_t v)
{
	if (sbuf_room(b, VARINT_MAX_BYTES))
		b->len = (size_t)(varint_put(b->data + b->len, v) - b->data);
}

void sbuf_put_bytes(struct sbuf *b, const void *data, size_t len)
{
	if (len && sbuf_room(b, len)) {
		memcpy(b->data + b->len, data, len);
		b->len += len;
	}
}

void sbuf_put_str(struct sbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	sbuf_put_varint(b, n);
	sbuf_put_bytes(b, s, n);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32(crc32(0, Z_NULL, 0), p, (uInt)n);
}

int statefile_boot_id(uint8_t id[16])
{
	char text[64];
	size_t n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (!f)
		return -errno;
	if (!fgets(text, sizeof(text), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	for (const char *p = text; *p && n < 32; p++) {
		int v = *p >= '0' && *p <= '9' ? *p - '0' :
			*p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (v < 0)
			continue;
		if (n % 2 == 0)
			id[n / 2] = (uint8_t)(v << 4);
		else
			id[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : -EIO;
}

void statefile_put_header(struct sbuf *b, const uint8_t boot_id[16])
{
	uint8_t h[STATEFILE_HEADER_BYTES];

	memcpy(h, STATEFILE_MAGIC, 8);
	put_le32(h + 8, STATEFILE_VERSION);
	memcpy(h + 12, boot_id, 16);
	put_le32(h + 28, crc(h, 28));
	sbuf_put_bytes(b, h, sizeof(h));
}

size_t statefile_begin_record(struct sbuf *b, uint8_t type)
{
	uint8_t h[STATEFILE_RECORD_HEADER_BYTES] = { 0 };
	size_t at = b->len;

	h[8] = type;
	sbuf_put_bytes(b, h, sizeof(h));
	return at;
}

void statefile_end_record(struct sbuf *b, size_t at)
{
	size_t len;

	if (b->failed)
		return;
	len = b->len - at - STATEFILE_RECORD_HEADER_BYTES;
	put_le32(b->data + at, (uint32_t)len);
	put_le32(b->data + at + 4, crc(b->data + at + 8, len + 1));
}

uint64_t scur_varint(struct scur *c)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t byte;

		if (c->bad || c->p >= c->end)
			break;
		byte = *c->p++;
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

const char *scur_str(struct scur *c, char *buf, size_t max)
{
	uint64_t n = scur_varint(c);

	buf[0] = 0;
	if (c->bad || n > max || n > (uint64_t)(c->end - c->p) || memchr(c->p, 0, n)) {
		c->bad = true;
		return buf;
	}
	memcpy(buf, c->p, n);
	buf[n] = 0;
	c->p += n;
	return buf;
}

bool scur_done(const struct scur *c)
{
	return !c->bad && c->p == c->end;
}

int statefile_open(struct statefile_reader *r, const uint8_t *data, size_t len,
		   uint8_t boot_id[16])
{
	*r = (struct statefile_reader){ .data = data, .len = len };
	if (len < STATEFILE_HEADER_BYTES || memcmp(data, STATEFILE_MAGIC, 8) ||
	    get_le32(data + 28) != crc(data, 28))
		return -EBADMSG;
	if (get_le32(data + 8) != STATEFILE_VERSION)
		return -EPROTONOSUPPORT;
	memcpy(boot_id, data + 12, 16);
	r->pos = r->good = STATEFILE_HEADER_BYTES;
	return 0;
}

int statefile_next(struct statefile_reader *r, uint8_t *type, struct scur *payload)
{
	const uint8_t *h = r->data + r->pos;
	size_t left = r->len - r->pos;
	uint32_t len;

	if (!left)
		return 0;
	if (left < STATEFILE_RECORD_HEADER_BYTES)
		return -EBADMSG;
	len = get_le32(h);
	if (len > STATEFILE_MAX_RECORD || len > left - STATEFILE_RECORD_HEADER_BYTES ||
	    get_le32(h + 4) != crc(h + 8, (size_t)len + 1))
		return -EBADMSG;
	*type = h[8];
	*payload = (struct scur){ .p = h + STATEFILE_RECORD_HEADER_BYTES,
				  .end = h + STATEFILE_RECORD_HEADER_BYTES + len };
	r->pos += STATEFILE_RECORD_HEADER_BYTES + len;
	r->good = r->pos;
	return 1;
}
