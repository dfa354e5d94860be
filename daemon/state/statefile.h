/* SPDX-License-Identifier: MIT */
/*
 * statefile.h - the format of perfd's state files: what a segment of the
 * state directory holds, byte by byte, and a reader that trusts none of it.
 *
 *   file    := header record*
 *   header  := "perfdst\n"  (8 bytes)
 *              u32 version  (STATEFILE_VERSION)
 *              u8  boot_id[16]  (the boot it was written in)
 *              u32 crc32 of the 28 bytes before it
 *   record  := u32 len, u32 crc32 of (type, payload), u8 type, payload[len]
 *
 * Integers are little-endian; the payloads are varints (base/varint.h's
 * LEB128) and strings (varint length, bytes), read through a cursor that
 * checks every bound (struct scur).  A record is appended whole or, when
 * perfd died in the middle of a write, torn: a reader stops at the first
 * record that is short or fails its CRC and says where the good part ends.
 * What each record type means is persist.c's (state/persist.h).
 */
#ifndef PERFD_STATEFILE_H
#define PERFD_STATEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATEFILE_MAGIC "perfdst\n"
#define STATEFILE_VERSION 1
#define STATEFILE_HEADER_BYTES 32
#define STATEFILE_RECORD_HEADER_BYTES 9
/* No record is bigger: a length past it is corruption, not a big record. */
#define STATEFILE_MAX_RECORD (16u << 20)

/* A growing byte buffer records are written into. */
struct sbuf {
	uint8_t *data;
	size_t len, cap;
	bool failed; /* out of memory at some point: the buffer is not whole */
};

void sbuf_done(struct sbuf *b);
void sbuf_put_varint(struct sbuf *b, uint64_t v);
void sbuf_put_bytes(struct sbuf *b, const void *data, size_t len);
/* A string as varint length + bytes (NULL as ""). */
void sbuf_put_str(struct sbuf *b, const char *s);

/* This boot's id (/proc/sys/kernel/random/boot_id): what a header says.
 * Returns 0 or -errno. */
int statefile_boot_id(uint8_t id[16]);
/* Writes the header into b. */
void statefile_put_header(struct sbuf *b, const uint8_t boot_id[16]);
/* Starts a record of type in b; the payload follows (sbuf_put_*), and
 * statefile_end_record closes it.  Returns the record's offset. */
size_t statefile_begin_record(struct sbuf *b, uint8_t type);
void statefile_end_record(struct sbuf *b, size_t at);

/* Reading ------------------------------------------------------------- */

/* A bounds-checked cursor over a payload: every read past the end sets bad
 * and yields 0 / "". */
struct scur {
	const uint8_t *p, *end;
	bool bad;
};

uint64_t scur_varint(struct scur *c);
/* A string of at most max bytes, copied into buf (size > max) and
 * NUL-terminated; one with a NUL inside, or longer, sets bad. */
const char *scur_str(struct scur *c, char *buf, size_t max);
bool scur_done(const struct scur *c); /* all read, nothing bad */

struct statefile_reader {
	const uint8_t *data;
	size_t len;
	size_t pos;   /* the next record */
	size_t good;  /* bytes of whole, checked records (and the header) */
};

/* Checks the header: 0, -EBADMSG (not a state file, or its header is
 * damaged), -EPROTONOSUPPORT (another version); boot_id gets the file's
 * boot. */
int statefile_open(struct statefile_reader *r, const uint8_t *data, size_t len,
		   uint8_t boot_id[16]);
/* The next record: 1 and its type and payload, 0 at a clean end, -EBADMSG
 * at a short or damaged record (r->good: where the good part ends). */
int statefile_next(struct statefile_reader *r, uint8_t *type, struct scur *payload);

#endif
