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

#include "api/command_list.h"
#include "perfd/protocol.h"

struct encoder;
struct json_object;

#define ENUM(name, NAME) PERFD_CMD_##NAME,
enum perfd_command { PERFD_COMMANDS(ENUM) PERFD_CMD_COUNT };
#undef ENUM

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
	uint32_t tree; /* snapshot: a pid and its descendants (0: none) */
	bool started;  /* live snapshot: a "started" line once it collects */
	/* ... when */
	enum perfd_when when;
	double duration_seconds;
	double since_seconds;
	double from_unix, to_unix; /* seconds since the epoch; to_unix 0: now */
	unsigned top;                   /* mem: how many sites */
	/* ... and how */
	int kind;                       /* enum profile_kind */
	const struct encoder *format;   /* a row of encode.h's table */
	bool lines; /* frames as "function (file:line)", inlined frames expanded */
	bool python_lines; /* Python frames with their line (default) */
	bool threads;      /* each stack rooted at its thread */
	/* top (with interval_seconds, pids[0] when n_pids, kind and all) */
	struct perfd_top_args {
		int view;            /* cmd_top.c's enum top_view */
		int sort;            /* an index in that view's sort keys */
		unsigned rows, offset, depth;
		char filter[PERFD_TOP_FILTER_BYTES];           /* "" for none */
		bool kernel_threads;
		char function[PERFD_TOP_MAX_FUNCTION_BYTES];   /* "" for none */
		int function_kind;   /* enum frame_kind, -1 for any */
	} top_args;
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

/* Helpers for the commands' parse functions (api/cmd_*.c).  Each returns 0
 * (or 1 where it says so), or -EINVAL with *e filled with a code and a
 * message fit to show a person. */
int request_fail(struct perfd_request_error *e, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Copies at most 32 bytes of s (len bytes) as printable ASCII into buf (at
 * least 132 bytes), for quoting a client's text back in a message. */
void request_quote(const char *s, size_t len, char *buf, size_t size);
#define REQUEST_QUOTE_SIZE 132
/* An optional integer field within [min, max]; absent leaves *ret alone
 * unless required. */
int request_get_int(struct json_object *req, const char *key, int64_t min, int64_t max,
		    bool required, int64_t *ret, struct perfd_request_error *e);
/* An optional boolean field; absent leaves *ret alone. */
int request_get_bool(struct json_object *req, const char *key, bool *ret,
		     struct perfd_request_error *e);
/* An optional number of seconds in (0, max]: 1 when present. */
int request_get_seconds(struct json_object *req, const char *key, double max, double *ret,
			struct perfd_request_error *e);
/* An optional string field that is one of the n names: *ret gets its
 * index; absent leaves *ret alone. */
int request_get_choice(struct json_object *req, const char *key, const char *const *names,
		       size_t n, int *ret, struct perfd_request_error *e);
/* An optional string of 1..size-1 bytes without control bytes; absent
 * leaves buf empty. */
int request_get_name(struct json_object *req, const char *key, char *buf, size_t size,
		     struct perfd_request_error *e);

#endif
