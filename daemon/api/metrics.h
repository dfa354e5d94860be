/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - perfd's own health in the Prometheus text format (0.0.4),
 * served at /metrics when --metrics-address is set.
 *
 * Design: the figures are those of `perfctl status` (query.c builds that
 * answer), not a second set of counters that could drift from it.  One
 * table (metrics.c) names each metric, its type and help, and the path of
 * its figure in the status answer; a figure that is an object of numbers
 * becomes one series per member (the member's name a label: lost samples
 * by cause), an array of objects one series per element (exporters by
 * name, BPF programs by name), and a string an info series valued 1
 * (the version, the BPF tier).  A new status counter is exported by adding
 * one row.  What the status answer lacks (a figure it does not have) is
 * left out, never written as 0.
 *
 * The status answer used is the one a non-root user gets: no exporter
 * paths, queries or errors leave the host through a scrape.
 */
#ifndef PERFD_METRICS_H
#define PERFD_METRICS_H

#include <stddef.h>

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes the status answer (status_len bytes of JSON text, as query.c
 * wrote it) as the exposition text into *ret (malloc()ed, *len bytes,
 * NUL-terminated).  Returns 0, -ENOMEM, or -EINVAL when status_json is not
 * JSON. */
int metrics_render(const char *status_json, size_t status_len, char **ret, size_t *len);

#endif
