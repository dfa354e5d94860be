/* SPDX-License-Identifier: MIT */
/* symload.c - see symload.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "symbols/debuginfo.h"
#include "symbols/elfsym.h"
#include "symbols/srcline.h"
#include "symbols/symload.h"

static void run(struct offload_job *j)
{
	symload_run(symload_of(j));
}

static void job_free(struct offload_job *j)
{
	symload_free(symload_of(j));
}

bool symload_is(const struct offload_job *j)
{
	return j->run == run;
}

struct symload *symload_free(struct symload *l)
{
	if (!l)
		return NULL;
	closep(&l->fd);
	closep(&l->debug_fd);
	closep(&l->found_debug_fd);
	elf_symtab_free(l->symtab);
	if (l->what != SYMLOAD_UNITS || l->owns_srcline)
		srcline_free(l->srcline);
	free(l->image);
	free(l->path);
	free(l->root);
	free(l->debug_dir);
	free(l);
	return NULL;
}

static struct symload *alloc_job(uint64_t key, enum symload_what what)
{
	struct symload *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	/* big: the symbolizer's first lane is kept for JIT maps (jitread.h) */
	l->job = (struct offload_job){ .key = key, .big = true, .run = run, .free = job_free };
	l->what = what;
	l->error = -EAGAIN;
	l->merge_error = 1;
	l->memory_limit = SIZE_MAX;
	l->fd = l->debug_fd = l->found_debug_fd = -1;
	return l;
}

int symload_new_units(uint64_t key, struct srcline *s, struct symload **ret)
{
	struct symload *l = alloc_job(key, SYMLOAD_UNITS);

	if (!l)
		return -ENOMEM;
	l->srcline = s;
	*ret = l;
	return 0;
}

int symload_new(uint64_t key, enum symload_what what, int fd, int debug_fd,
		struct symload **ret)
{
	struct symload *l = alloc_job(key, what);
	int r;

	if (!l)
		return -ENOMEM;
	l->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (l->fd >= 0 && debug_fd >= 0)
		l->debug_fd = fcntl(debug_fd, F_DUPFD_CLOEXEC, 3);
	if (l->fd < 0 || (debug_fd >= 0 && l->debug_fd < 0)) {
		r = negative_errno();
		symload_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

int symload_set_search(struct symload *l, const char *path, const char *root,
		       const char *debug_dir)
{
	l->path = strdup(path);
	l->root = strdup(root);
	l->debug_dir = strdup(debug_dir);
	if (!l->path || !l->root || !l->debug_dir)
		return -ENOMEM;
	l->by_build_id = true;
	return 0;
}

/* The by_build_id lookup: found_debug_fd, or -errno. */
static int look_up(struct symload *l)
{
	int fd = debuginfo_find(l->fd, l->path, l->root, l->debug_dir, DEBUGINFO_BY_BUILD_ID,
				NULL, &l->refused);

	l->looked_up = true;
	l->found_debug_fd = fd >= 0 ? fd : -1;
	return fd;
}

/* A stripped binary's table gets the symbols of its debug file (given, or
 * found by build-id) or of its MiniDebugInfo. */
static void merge_debug(struct symload *l)
{
	void *image;
	size_t size;
	int r = -ENOENT;

	if (l->debug_fd < 0 && !l->by_build_id && !l->image && !l->mini)
		return; /* nothing asked: merge_error stays 1 */
	if (l->debug_fd < 0 && l->by_build_id) {
		if (look_up(l) >= 0)
			r = elf_symtab_add_from_fd(l->symtab, l->found_debug_fd);
	} else if (l->debug_fd >= 0) {
		r = elf_symtab_add_from_fd(l->symtab, l->debug_fd);
	} else if (l->image) {
		r = elf_symtab_add_from_memory(l->symtab, l->image, l->image_size);
	} else if (l->mini && debuginfo_minidebuginfo(l->fd, &image, &size) == 0) {
		r = elf_symtab_add_from_memory(l->symtab, image, size);
		free(image);
	}
	l->merge_error = r < 0 ? r : 0;
}

void symload_run(struct symload *l)
{
	int r;

	if (l->what == SYMLOAD_UNITS) {
		r = srcline_index_wanted(l->srcline, l->job.cancel);
		l->error = r < 0 ? r : 0;
		l->units_refused = r > 0 ? (size_t)r : 0;
		return;
	}
	if (l->what == SYMLOAD_LINES) {
		l->error = srcline_open(l->fd, &l->srcline);
		if (l->error == -ENODATA && l->debug_fd < 0 && l->by_build_id && look_up(l) >= 0)
			l->error = srcline_open(l->found_debug_fd, &l->srcline);
		else if (l->error == -ENODATA && l->debug_fd >= 0)
			l->error = srcline_open(l->debug_fd, &l->srcline);
		/* the loop's lookups then only search (past the cap, a
		 * unit is indexed by a SYMLOAD_UNITS job when asked for) */
		if (l->error < 0)
			return;
		srcline_set_memory_limit(l->srcline, l->memory_limit);
		r = srcline_index_all(l->srcline);
		l->units_refused = r > 0 ? (size_t)r : 0;
		return;
	}
	l->error = elf_symtab_load_fd(l->fd, &l->symtab);
	if (l->error >= 0 && elf_symtab_memory(l->symtab) > l->memory_limit) {
		l->symtab = elf_symtab_free(l->symtab);
		l->error = -EFBIG;
	}
	if (l->error < 0 || elf_symtab_has_symtab(l->symtab))
		return;
	if (l->memory_limit != SIZE_MAX)
		elf_symtab_set_memory_limit(l->symtab, l->memory_limit);
	merge_debug(l);
}
