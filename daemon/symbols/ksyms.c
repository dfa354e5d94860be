/* SPDX-License-Identifier: MIT */
/*
 * ksyms.c - kernel text symbols from /proc/kallsyms.
 *
 * kallsyms is read once into an array sorted by address so that each kernel
 * frame is one binary search.  Only text symbols (t, T, w, W) are kept: data
 * symbols would only shadow the function around a sampled address.  Names
 * and module names live in one growing string arena addressed by offsets
 * (so the arena can be realloc'ed while parsing); a module name is stored
 * once and shared by its symbols.  Aliases at one address collapse to one
 * name.  Memory is 16 bytes per symbol plus its name: a few MiB for a
 * distribution kernel with its modules.
 *
 * kallsyms carries no sizes, so a symbol is taken to extend to the next one;
 * a gap of more than 1 MiB after a symbol is treated as belonging to no
 * symbol, since no kernel function is that long and such gaps separate
 * vmlinux, the module area and the BPF/ftrace trampolines.
 *
 * Who may see kernel addresses in perfd's answers is decided here too, by
 * the rule that decides who sees them in /proc/kallsyms (see ksyms.h).
 *
 * The kernel's build-id is read from /sys/kernel/notes, as perf does: the
 * raw .notes section, not an ELF file, so the ELF build-id readers do not
 * apply.  Every size in it is checked against what was read before it is
 * used: a truncated or garbled note ends the search, it is never trusted.
 */
#include "symbols/ksyms.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/search.h"
#include "perfd/macro.h"
#include "symbols/buildid.h"

#define KSYM_MAX_DISTANCE (UINT64_C(1) << 20)

/* The arena is capped at 2 GiB so that a module offset and the local bit
 * share one word and an entry stays 16 bytes. */
#define ARENA_MAX ((size_t)INT32_MAX)

struct ksym {
	uint64_t addr;
	uint32_t name;        /* offset in the arena */
	uint32_t module : 31; /* offset in the arena of the module name, 0 for vmlinux */
	uint32_t local : 1;   /* t/w rather than T/W */
};

struct ksyms {
	struct ksym *syms;
	size_t n, allocated;
	char *arena; /* starts with one NUL, so offset 0 can mean "none" */
	size_t arena_size, arena_allocated;
	uint32_t last_module; /* interning cache: the module of the previous line */
};

struct ksyms *ksyms_free(struct ksyms *k)
{
	if (!k)
		return NULL;
	free(k->syms);
	free(k->arena);
	free(k);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct ksyms, ksyms_free);

/* Copies s[0..len) plus a NUL into the arena; stores its offset. */
static int arena_add(struct ksyms *k, const char *s, size_t len, uint32_t *ret_offset)
{
	if (len + 1 > ARENA_MAX - k->arena_size)
		return -EFBIG;
	if (k->arena_size + len + 1 > k->arena_allocated) {
		size_t n = MAX(k->arena_allocated * 2, k->arena_size + len + 1);
		char *grown;

		n = MIN(n, ARENA_MAX);
		grown = realloc(k->arena, n);
		if (!grown)
			return -ENOMEM;
		k->arena = grown;
		k->arena_allocated = n;
	}
	memcpy(k->arena + k->arena_size, s, len);
	k->arena[k->arena_size + len] = '\0';
	*ret_offset = (uint32_t)k->arena_size;
	k->arena_size += len + 1;
	return 0;
}

/* Module names come in runs (all of a module's symbols are consecutive), so
 * comparing with the previous line's module avoids storing a name per
 * symbol without a lookup table. */
static int intern_module(struct ksyms *k, const char *s, size_t len, uint32_t *ret_offset)
{
	int r;

	if (k->last_module != 0 && strlen(k->arena + k->last_module) == len &&
	    memcmp(k->arena + k->last_module, s, len) == 0) {
		*ret_offset = k->last_module;
		return 0;
	}
	r = arena_add(k, s, len, ret_offset);
	if (r < 0)
		return r;
	k->last_module = *ret_offset;
	return 0;
}

/* Parses the hexadecimal address at *p, advancing *p.  Rejects signs,
 * blanks, "0x" and overflow, which bare strtoull would accept. */
static int parse_addr(const char **p, uint64_t *ret)
{
	const char *s = *p;
	size_t ndigits = strspn(s, "0123456789abcdefABCDEF");
	unsigned long long v;
	char *end;

	if (ndigits == 0)
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 16);
	if (errno != 0 || end != s + ndigits)
		return -EINVAL;
	*p = end;
	*ret = v;
	return 0;
}

/* Parses one line (without '\n') and appends it when it is a text symbol.
 * Sets *ret_nonzero when its address is not 0. */
static int parse_line(struct ksyms *k, const char *line, bool *ret_nonzero)
{
	const char *p = line, *name, *module = NULL;
	size_t name_len, module_len = 0;
	struct ksym sym = {};
	uint32_t module_offset = 0;
	char type;
	int r;

	r = parse_addr(&p, &sym.addr);
	if (r < 0)
		return r;
	if (p[0] != ' ' || !isalpha((unsigned char)p[1]) || p[2] != ' ')
		return -EINVAL;
	type = p[1];
	p += 3;

	name = p;
	name_len = strcspn(p, " \t");
	if (name_len == 0)
		return -EINVAL;
	p += name_len;

	/* The kernel separates the module column with a tab. */
	p += strspn(p, " \t");
	if (*p == '[') {
		module = p + 1;
		module_len = strcspn(module, "]");
		if (module_len == 0 || module[module_len] != ']' || module[module_len + 1] != '\0')
			return -EINVAL;
	} else if (*p != '\0')
		return -EINVAL;

	if (sym.addr != 0)
		*ret_nonzero = true;
	if (!strchr("tTwW", type) || sym.addr == 0)
		return 0;
	sym.local = type == 't' || type == 'w';

	if (k->n == k->allocated) {
		size_t n = k->allocated ? k->allocated * 2 : 4096;
		struct ksym *grown = reallocarray(k->syms, n, sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		k->syms = grown;
		k->allocated = n;
	}
	if ((r = arena_add(k, name, name_len, &sym.name)) < 0 ||
	    (module && (r = intern_module(k, module, module_len, &module_offset)) < 0))
		return r;
	sym.module = module_offset;

	k->syms[k->n++] = sym;
	return 0;
}

/* By address; at one address the name to keep first: global before local,
 * fewer leading underscores, then alphabetical for a stable choice. */
static int ksym_cmp(const void *a, const void *b, void *userdata)
{
	const struct ksym *x = a, *y = b;
	const char *arena = userdata;
	const char *nx = arena + x->name, *ny = arena + y->name;
	size_t ux, uy;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->local != y->local)
		return x->local < y->local ? -1 : 1;
	ux = strspn(nx, "_");
	uy = strspn(ny, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	return strcmp(nx, ny);
}

int ksyms_parse(FILE *f, struct ksyms **ret)
{
	_cleanup_(ksyms_freep) struct ksyms *k = NULL;
	_cleanup_free_ char *line = NULL;
	size_t line_size = 0, n_lines = 0, n_unique = 0;
	bool any_nonzero = false;
	uint32_t empty;
	char *arena;
	ssize_t len;
	int r;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	r = arena_add(k, "", 0, &empty);
	if (r < 0)
		return r;

	while ((len = getline(&line, &line_size, f)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (strlen(line) != (size_t)len)
			return -EINVAL;
		r = parse_line(k, line, &any_nonzero);
		if (r < 0)
			return r;
		n_lines++;
	}
	if (ferror(f))
		return negative_errno();

	/* With kptr_restrict, or without CAP_SYSLOG, every address reads 0. */
	if (n_lines > 0 && !any_nonzero)
		return -EPERM;

	if (k->n > 0)
		qsort_r(k->syms, k->n, sizeof(*k->syms), ksym_cmp, k->arena);
	for (size_t i = 0; i < k->n; i++)
		if (n_unique == 0 || k->syms[n_unique - 1].addr != k->syms[i].addr)
			k->syms[n_unique++] = k->syms[i];
	k->n = n_unique;

	/* Growth left up to half of both arrays unused; give it back. */
	if (k->n > 0) {
		struct ksym *syms = reallocarray(k->syms, k->n, sizeof(*syms));

		if (syms) {
			k->syms = syms;
			k->allocated = k->n;
		}
	}
	arena = realloc(k->arena, k->arena_size);
	if (arena) {
		k->arena = arena;
		k->arena_allocated = k->arena_size;
	}

	*ret = TAKE_PTR(k);
	return 0;
}

bool ksyms_addresses_shown(int kptr_restrict, int perf_event_paranoid, bool cap_syslog)
{
	switch (kptr_restrict) {
	case 0:
		/* kallsyms_for_perf(): who may profile the kernel may read it */
		return (perf_event_paranoid >= -1 && perf_event_paranoid <= 1) || cap_syslog;
	case 1:
		return cap_syslog;
	default:
		return false;
	}
}

/* The integer in the sysctl file at path, or INT_MIN when it cannot be read. */
static int read_sysctl(const char *path)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	int v;

	return f && fscanf(f, "%d", &v) == 1 && v >= -1 ? v : INT_MIN;
}

bool ksyms_addresses_shown_now(bool cap_syslog)
{
	int restrict_ = read_sysctl("/proc/sys/kernel/kptr_restrict");

	/* not read unless it decides: kptr_restrict 0 */
	return ksyms_addresses_shown(restrict_,
				     restrict_ == 0 ? read_sysctl("/proc/sys/kernel/perf_event_paranoid")
						    : INT_MIN,
				     cap_syslog);
}

int ksyms_load(const char *path, struct ksyms **ret)
{
	_cleanup_fclose_ FILE *f = NULL;

	f = fopen(path, "re");
	if (!f)
		return negative_errno();
	return ksyms_parse(f, ret);
}

static uint64_t ksym_addr(const void *sym)
{
	return ((const struct ksym *)sym)->addr;
}

const char *ksyms_lookup(const struct ksyms *k, uint64_t addr, const char **ret_module,
			 uint64_t *ret_offset)
{
	const struct ksym *s;
	size_t lo;

	if (!k)
		return NULL;

	lo = search_upper_bound(k->syms, k->n, sizeof(*k->syms), addr, ksym_addr);
	if (lo == 0)
		return NULL;
	s = &k->syms[lo - 1];
	if (addr - s->addr > KSYM_MAX_DISTANCE)
		return NULL;

	if (ret_module)
		*ret_module = s->module ? k->arena + s->module : NULL;
	if (ret_offset)
		*ret_offset = addr - s->addr;
	return k->arena + s->name;
}

size_t ksyms_count(const struct ksyms *k)
{
	return k ? k->n : 0;
}

/* 4 is the kernel's note alignment (include/linux/elfnote.h), whatever the
 * word size; perf reads /sys/kernel/notes with it too.  Any length is
 * taken, and one that does not fit is -ENOBUFS, not passed over. */
int ksyms_parse_build_id(const void *notes, size_t n, char *ret, size_t size)
{
	const uint8_t *id;
	size_t len;
	int r;

	r = build_id_parse(notes, n, 4, SIZE_MAX, &id, &len);
	if (r < 0)
		return r;
	return build_id_hex(id, len, ret, size);
}

int ksyms_read_build_id(const char *path, char *ret, size_t size)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ unsigned char *buf = NULL;
	struct stat st;
	size_t n = 0;

	/* O_NONBLOCK: a FIFO put in the way would not hang the start */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	buf = malloc(KSYMS_NOTES_MAX);
	if (!buf)
		return -ENOMEM;
	while (n < KSYMS_NOTES_MAX) {
		ssize_t k = read(fd, buf + n, KSYMS_NOTES_MAX - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			break;
		n += (size_t)k;
	}
	return ksyms_parse_build_id(buf, n, ret, size);
}
