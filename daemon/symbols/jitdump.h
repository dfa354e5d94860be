/* SPDX-License-Identifier: MIT */
/*
 * jitdump.h - JIT symbols from perf's jitdump files (/tmp/jit-PID.dump), as
 * written by CPython 3.13's `-X perf_jit`, the JVM's and V8's perf agents
 * and others: a header, then records, each a code load (address, size,
 * name, the code's bytes), a code move, or debug and unwind information
 * perfd does not need (tools/perf/Documentation/jitdump-specification.txt).
 */
#ifndef PERFD_JITDUMP_H
#define PERFD_JITDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbols/perfmap.h"

#define JITDUMP_MAGIC 0x4A695444u /* "JiTD", in the writer's byte order */
/* Bounds: a name longer than this is cut; more functions than this make
 * the file refused (-EFBIG), as a perf map larger than PERFMAP_MAX_BYTES. */
#define JITDUMP_NAME_MAX 4096
#define JITDUMP_MAX_FUNCTIONS PERFMAP_MAX_ENTRIES

/* Whether the first bytes of a file (n of them) are a jitdump's. */
bool jitdump_is(const void *head, size_t n);

/* Reads a whole jitdump into a map of its functions (perfmap.h's lookup).
 * Code loads add a function; a move adds the moved code under the name
 * its code index was loaded with; other records are skipped by their
 * size.  The file is the process's to write and may be being written: a
 * record cut short by the end of the file ends the read (what came before
 * is kept); a record whose size cannot hold its fields, or a name without
 * its NUL within the record, is skipped and counted in *ret_skipped (may
 * be NULL); a record too small to say where the next one starts ends the
 * read.  A load is taken once its name is in the file, its code need not
 * be.  Returns 0; -ENOEXEC when the file is not a jitdump,
 * -EPROTONOSUPPORT for one in the other byte order or of another version;
 * -EFBIG when a record would end past PERFMAP_MAX_BYTES or there are more
 * than JITDUMP_MAX_FUNCTIONS functions; or -errno.  f must be seekable. */
int jitdump_parse(FILE *f, struct perfmap **ret, size_t *ret_skipped);

#endif
