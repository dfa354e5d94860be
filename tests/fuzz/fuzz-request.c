/* SPDX-License-Identifier: MIT */
/*
 * fuzz-request.c - the protocol's request parser (api/request.c), which
 * every local user reaches: one line, any bytes, NULs included, exactly as
 * server.c hands it over (not NUL-terminated).
 */
#include "api/request.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfd_request_error e;
	struct perfd_request req;
	/* a copy of exactly size bytes, so ASan sees any read past the line */
	char *line = malloc(size ? size : 1);

	if (!line)
		return 0;
	for (size_t i = 0; i < size; i++)
		line[i] = (char)data[i];
	(void)request_parse(line, size, &req, &e);
	free(line);
	return 0;
}
