/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - the one UTF-8 check of the writers that must put untrusted
 * names (process, function and file names hold any byte) into text with
 * rules of its own: JSON (base/jsonw.c) and XML (encode/flamesvg.c).
 * RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF.
 */
#ifndef PERFD_UTF8_H
#define PERFD_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (n > 0 bytes left), 0 when none
 * starts there; its code point in *ret_cp when one does. */
static inline size_t utf8_len(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80) {
		*ret_cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	*ret_cp = cp;
	return len;
}

#endif
