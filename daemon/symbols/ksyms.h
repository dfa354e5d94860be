/* SPDX-License-Identifier: MIT */
/*
 * ksyms.h - kernel symbols from /proc/kallsyms, and the kernel's build-id
 * from /sys/kernel/notes.
 */
#ifndef PERFD_KSYMS_H
#define PERFD_KSYMS_H

#include <stdbool.h>
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

/* Who may see kernel addresses: the kernel's own rule for /proc/kallsyms
 * (kallsyms_show_value()), so that perfd shows no one an address the
 * kernel would hide from them.  kptr_restrict 0 shows them to everyone when
 * perf_event_paranoid is at most 1, else only to CAP_SYSLOG; 1 only to
 * CAP_SYSLOG; 2 (or any other value) to no one, not even root.  A value
 * that cannot be read (INT_MIN here) counts as the strictest: the rule fails closed. */
bool ksyms_addresses_shown(int kptr_restrict, int perf_event_paranoid, bool cap_syslog);
/* The same with the sysctls as they are now (two small reads of
 * /proc/sys/kernel, cheap enough for every query: the sysctls can change at
 * any time and the answer must follow them). */
bool ksyms_addresses_shown_now(bool cap_syslog);

/* At most this many bytes of the notes file are read. */
#define KSYMS_NOTES_MAX 16384

/* The kernel's build-id from its ELF notes (the .notes section, which
 * /sys/kernel/notes holds: headers of three 32-bit words, name and
 * descriptor each padded to 4 bytes), n bytes at notes: the descriptor of
 * the first NT_GNU_BUILD_ID note named "GNU" (read by buildid.h's walker,
 * of any length), as lowercase hex into ret
 * (size bytes, NUL-terminated; written only on success).  Returns 0,
 * -ENOENT when there is no such note before the end or before a note that
 * runs past it, -ENOBUFS when size cannot hold it. */
int ksyms_parse_build_id(const void *notes, size_t n, char *ret, size_t size);
/* The same, from the first KSYMS_NOTES_MAX bytes of the file at path
 * (a regular file; /sys/kernel/notes).  -errno when it cannot be read. */
int ksyms_read_build_id(const char *path, char *ret, size_t size);

#endif
