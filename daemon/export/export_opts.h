/* SPDX-License-Identifier: MIT */
/*
 * export_opts.h - what the exporters are told: where files go and how
 * long they stay, where profiles are pushed (Pyroscope, OTLP) and how, the labels every
 * exported profile carries.  Filled by config.c (flags and the
 * configuration file), handed to exporter_configure() at start and at
 * every SIGHUP; the exporter copies what its threads need, so the caller
 * may free these strings once exporter_configure() returned.
 */
#ifndef PERFD_EXPORT_OPTS_H
#define PERFD_EXPORT_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT_MAX_LABELS 32
#define EXPORT_LABEL_KEY_MAX 64
#define EXPORT_LABEL_VALUE_MAX 256

struct export_label {
	char key[EXPORT_LABEL_KEY_MAX + 1];
	char value[EXPORT_LABEL_VALUE_MAX + 1];
};

/* Where and how an HTTP exporter posts (Pyroscope's push, OTLP). */
struct export_http {
	char *url;              /* the backend's base URL; NULL: this exporter is off */
	char *tenant;           /* X-Scope-OrgID; NULL: none */
	char *bearer_token;     /* Authorization: Bearer; NULL: none */
	char *basic_auth;       /* "user:password"; NULL: none */
	char *ca_file;          /* CA bundle for https; NULL: the system's */
	bool insecure;          /* do not verify the server's certificate */
	uint64_t timeout_s;     /* one request, connection included */
};

struct export_opts {
	uint64_t interval_s;        /* one profile per process and kind per interval */
	char *output_dir;           /* NULL: no files */
	uint64_t output_max_age_s;  /* files older are removed; 0: kept */
	uint64_t output_max_bytes;  /* the oldest go past this total; 0: no limit */
	struct export_http push;    /* Pyroscope */
	struct export_http otlp;    /* an OTLP/HTTP receiver (an OpenTelemetry Collector) */
	uint64_t queue_max_bytes;   /* of encoded profiles waiting, per exporter */
	struct export_label labels[EXPORT_MAX_LABELS];
	size_t n_labels;
};

#endif
