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

struct json_object;

#define ENUM(name, NAME) PERFD_CMD_##NAME,
enum perfd_command { PERFD_COMMANDS(ENUM) PERFD_CMD_COUNT };
#undef ENUM

/* Room for the largest command's arguments struct (api/cmd_*.h);
 * COMMAND_ARGS_SIZE checks each against it when the table is built. */
#define REQUEST_ARGS_MAX 1280

/* One request, parsed: its command, and that command's own arguments
 * struct (its row's args_size bytes: zeroed, then filled by its parse). */
struct perfd_request {
	enum perfd_command command;
	_Alignas(max_align_t) unsigned char args[REQUEST_ARGS_MAX];
};

/* r's arguments as type, the struct its command parses into. */
#define REQUEST_ARGS(r, type) ((const type *)(const void *)(r)->args)

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
