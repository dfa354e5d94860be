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

#include "perfd/protocol.h"

struct encoder;

enum perfd_command {
	PERFD_CMD_STATUS,
	PERFD_CMD_PS,
	PERFD_CMD_SNAPSHOT,
};

/* When a snapshot's samples were taken. */
enum perfd_when {
	PERFD_WHEN_DURATION, /* from now on, for duration_seconds */
	PERFD_WHEN_SINCE,    /* the last since_seconds, from history */
	PERFD_WHEN_RANGE,    /* [from_unix, to_unix], from history */
};

struct perfd_request {
	enum perfd_command command;
	/* ps */
	unsigned interval_seconds;
	/* snapshot: which processes (at least one of these) */
	uint32_t pids[PERFD_SNAPSHOT_MAX_PIDS];
	size_t n_pids;
	char comm[16];
	char cgroup[256];
	char unit[256];
	bool all;
	/* ... when */
	enum perfd_when when;
	double duration_seconds;
	double since_seconds;
	double from_unix, to_unix; /* seconds since the epoch; to_unix 0: now */
	/* ... and how */
	int kind;                       /* enum profile_kind */
	const struct encoder *format;   /* a row of encode.h's table */
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

#endif
