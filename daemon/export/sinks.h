/* SPDX-License-Identifier: MIT */
/*
 * sinks.h - the exporters' sinks, one file each, behind worker.h's ops:
 * files.c writes .pb.gz files, pyroscope.c pushes to Pyroscope's ingest
 * API, otlp.c to an OTLP/HTTP receiver (both through http.h).  Each target is built on the loop from the options (copying what
 * it needs) and then owned by its worker's thread.
 */
#ifndef PERFD_EXPORT_SINKS_H
#define PERFD_EXPORT_SINKS_H

#include "export/export_opts.h"
#include "export/worker.h"

extern const struct export_sink_ops files_sink_ops;
/* Returns 0 or -ENOMEM. */
int files_target_new(const struct export_opts *o, void **ret);

extern const struct export_sink_ops pyroscope_sink_ops;
/* Returns 0 or -errno (-ENOMEM, -EIO: libcurl could not start). */
int pyroscope_target_new(const struct export_opts *o, void **ret);

extern const struct export_sink_ops otlp_sink_ops;
/* Returns 0 or -errno (-ENOMEM, -EIO: libcurl could not start). */
int otlp_target_new(const struct export_opts *o, void **ret);

#endif
