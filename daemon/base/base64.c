/* SPDX-License-Identifier: MIT */
/* base64.c - see base64.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base64.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const void *src, size_t n, char *dst)
{
	const unsigned char *s = src;
	char *d = dst;
	size_t i;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = alphabet[(v >> 6) & 63];
		*d++ = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);

		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		*d++ = '=';
	}
	return (size_t)(d - dst);
}

/* The value of base64 character c, or -1. */
static int value_of(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

ssize_t base64_decode(const char *src, size_t n, void *dst)
{
	unsigned char *d = dst;

	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int pad = last ? (src[i + 3] == '=') + (src[i + 2] == '=' && src[i + 3] == '=') : 0;
		uint32_t v = 0;

		for (int k = 0; k < 4 - pad; k++) {
			int x = value_of(src[i + k]);

			if (x < 0)
				return -EINVAL;
			v = v << 6 | (uint32_t)x;
		}
		v <<= 6 * pad;
		*d++ = (unsigned char)(v >> 16);
		if (pad < 2)
			*d++ = (unsigned char)(v >> 8);
		if (pad < 1)
			*d++ = (unsigned char)v;
	}
	return (ssize_t)(d - (unsigned char *)dst);
}
