/* SPDX-License-Identifier: MIT */
/*
 * cmd_snapshot.h - "snapshot"'s arguments, as cmd_snapshot.c parses them
 * (protocol.h says what each field of the request is): which processes,
 * when, and how the profile is written.
 */
#ifndef PERFD_CMD_SNAPSHOT_H
#define PERFD_CMD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/protocol.h"

struct encoder;

/* When a snapshot's samples were taken. */
enum snapshot_when {
	SNAPSHOT_DURATION, /* from now on, for duration_seconds */
	SNAPSHOT_SINCE,    /* the last since_seconds, from history */
	SNAPSHOT_RANGE,    /* [from_unix, to_unix], from history */
};

struct snapshot_args {
	/* which processes (at least one of these) */
	uint32_t pids[PERFD_SNAPSHOT_MAX_PIDS];
	size_t n_pids;
	char comm[16];
	char cgroup[256];
	char unit[256];
	bool all;
	uint32_t tree; /* a pid and its descendants (0: none) */
	bool started;  /* from now on: a "started" line once it collects */
	/* when */
	enum snapshot_when when;
	double duration_seconds;
	double since_seconds;
	double from_unix, to_unix; /* seconds since the epoch; to_unix 0: now */
	/* and how */
	int kind;                     /* enum profile_kind */
	const struct encoder *format; /* a row of encode.h's table */
	bool lines;        /* frames as "function (file:line)", inlined frames expanded */
	bool python_lines; /* Python frames with their line (default) */
	bool threads;      /* each stack rooted at its thread */
	bool frame;        /* a binary format's bytes as a frame, not base64 */
};

#endif
