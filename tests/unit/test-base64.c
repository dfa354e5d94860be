/* SPDX-License-Identifier: MIT */
/*
 * test-base64.c - base64 (daemon/base/base64.c), shared by the daemon's
 * binary formats and perfctl: RFC 4648's test vectors both ways, every
 * byte value round trip, and what the decoder refuses.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "base/base64.h"

static const struct {
	const char *plain, *encoded;
} vectors[] = {
	{ "", "" },	       { "f", "Zg==" },		{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },     { "foob", "Zm9vYg==" },	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
};

Test(base64, rfc4648_vectors)
{
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		char text[16] = "", bytes[16] = "";
		size_t n = strlen(vectors[i].plain);

		cr_assert_eq(base64_encode(vectors[i].plain, n, text), BASE64_ENCODED_LEN(n));
		cr_assert_str_eq(text, vectors[i].encoded);
		cr_assert_eq(base64_decode(text, strlen(text), bytes), (ssize_t)n);
		cr_assert_str_eq(bytes, vectors[i].plain);
	}
}

Test(base64, every_byte_round_trips)
{
	unsigned char in[256], out[256];
	char text[BASE64_ENCODED_LEN(256)];

	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)(255 - i);
	for (size_t n = 250; n <= 256; n++) {
		size_t len = base64_encode(in, n, text);

		cr_assert_eq(base64_decode(text, len, out), (ssize_t)n);
		cr_assert_eq(memcmp(in, out, n), 0);
	}
}

Test(base64, refuses_what_is_not_base64)
{
	static const char *const bad[] = { "Zg=", "Zg", "Z===", "Zm9v\n", "Zm=v", "Zm9*", "=Zm9" };
	unsigned char out[16];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(base64_decode(bad[i], strlen(bad[i]), out), -EINVAL, "%s", bad[i]);
}
