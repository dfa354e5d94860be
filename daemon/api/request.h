/* SPDX-License-Identifier: MIT */
/*
 * request.h - parsing and validating one protocol request line
 * (see include/perfd/protocol.h).  Pure: no I/O, no daemon state.
 */
#ifndef PERFD_REQUEST_H
#define PERFD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum perfd_command {
	PERFD_CMD_STATUS,
	PERFD_CMD_PS,
	PERFD_CMD_SNAPSHOT,
};

enum perfd_format {
	PERFD_FORMAT_FOLDED,
};

struct perfd_request {
	enum perfd_command command;
	/* ps */
	unsigned interval_seconds;
	/* snapshot */
	int32_t pid;
	double duration_seconds;
	enum perfd_format format;
	bool lines; /* frames as "function (file:line)", inlined frames expanded */
	bool python_lines; /* Python frames with their line (default) */
	bool threads;      /* each stack rooted at its thread */
};

struct perfd_request_error {
	const char *code; /* a PERFD_ERR_* string (static) */
	char message[256];
};

/* Parses one request (the line without its '\n'; len bytes, need not be
 * NUL-terminated, may contain NUL bytes which make it malformed).  Returns 0
 * and fills *ret with defaults applied, or -EINVAL and fills *ret_error with
 * a stable code and a message fit to show a person. */
int request_parse(const char *line, size_t len, struct perfd_request *ret,
		  struct perfd_request_error *ret_error);

const char *perfd_command_to_string(enum perfd_command c);
const char *perfd_format_to_string(enum perfd_format f);

#endif
