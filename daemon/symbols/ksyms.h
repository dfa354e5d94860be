/* SPDX-License-Identifier: MIT */
/*
 * ksyms.h - kernel symbols from /proc/kallsyms.
 */
#ifndef PERFD_KSYMS_H
#define PERFD_KSYMS_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

struct ksyms;

/* Parses the kallsyms format ("ADDR TYPE NAME [MODULE]"), keeping text
 * symbols (t/T/w/W), sorted by address.  Returns 0 or -errno; -EPERM when
 * every address reads as zero (kptr_restrict hides them). */
int ksyms_parse(FILE *f, struct ksyms **ret);
int ksyms_load(const char *path, struct ksyms **ret);

/* The symbol with the greatest address <= addr, or NULL if addr lies before
 * the first symbol or past the last one by more than 1 MiB.  *ret_module
 * (may be NULL) gets the module name or NULL for vmlinux. */
const char *ksyms_lookup(const struct ksyms *k, uint64_t addr,
			 const char **ret_module, uint64_t *ret_offset);
size_t ksyms_count(const struct ksyms *k);
struct ksyms *ksyms_free(struct ksyms *k);

#endif
