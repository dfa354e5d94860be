/* SPDX-License-Identifier: MIT */
/*
 * base64.h - RFC 4648 base64 (standard alphabet, '=' padding), the one way
 * binary bytes travel inside perfd's JSON answers: the daemon encodes a
 * binary snapshot format (pprof) into the answer's "profile" string and
 * perfctl decodes it.  Both sides share this file.
 *
 * The encoder works in pieces (a caller keeps at most two bytes over from
 * one piece to the next), so an answer of many MiB is never held twice.
 */
#ifndef PERFD_BASE64_H
#define PERFD_BASE64_H

#include <stddef.h>
#include <sys/types.h>

/* The characters base64 takes for n bytes. */
#define BASE64_ENCODED_LEN(n) (((n) + 2) / 3 * 4)

/* Writes the BASE64_ENCODED_LEN(n) characters of the n bytes at src into
 * dst (no NUL); returns that count. */
size_t base64_encode(const void *src, size_t n, char *dst);

/* Decodes the n characters at src (padded to a multiple of four; no
 * whitespace) into dst, which has room for n / 4 * 3 bytes.  Returns the
 * byte count, or -EINVAL for anything that is not base64. */
ssize_t base64_decode(const char *src, size_t n, void *dst);

#endif
