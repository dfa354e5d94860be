/* SPDX-License-Identifier: MIT */
/*
 * fuzz-http.c - the request line of the metrics port (api/httpd.c), which
 * anyone who can reach --metrics-address sends: a head of any bytes, NULs
 * included, as the server hands it over (a buffer of exactly its length,
 * cut in place).
 */
#include <string.h>

#include "api/httpd.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so ASan sees any read past the head */
	char *head = malloc(size ? size : 1);
	const char *path = NULL;
	bool head_only = false;
	int r;

	if (!head)
		return 0;
	memcpy(head, data, size);
	r = http_parse_request_line(head, size, &head_only, &path);
	if (r == 0 && (path < head || path >= head + size || strlen(path) >= size))
		abort(); /* the path must lie inside the head, NUL-terminated there */
	if (r != 0 && r != 400 && r != 405 && r != 505)
		abort();
	free(head);
	return 0;
}
