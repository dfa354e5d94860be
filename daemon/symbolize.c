/* SPDX-License-Identifier: MIT */
/* symbolize.c - see symbolize.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "elfsym.h"
#include "frame.h"
#include "ksyms.h"
#include "perfd/macro.h"
#include "symbolize.h"
#include "u64map.h"

#define MODULES_MAX (FRAME_MODULE_LAST - FRAME_MODULE_FIRST + 1)

struct module {
	dev_t dev;
	uint64_t inode;
	char *path;           /* as the first process mapped it */
	const char *basename; /* into path */
	int fd;               /* -1 when it could not be opened */
	struct elf_symtab *symtab;
	int load_error; /* <0 once loading failed: not retried */
};

struct symbolizer {
	struct ksyms *ksyms;
	struct module *modules; /* index = id - FRAME_MODULE_FIRST */
	size_t n_modules, cap_modules;
	struct u64map by_file; /* hash(dev, inode) -> id; collisions scanned */
	size_t modules_loaded, modules_failed;
};

static uint64_t file_key(dev_t dev, uint64_t inode)
{
	return hash_u64(hash_u64(dev) ^ inode) & ~1ULL; /* never U64MAP_EMPTY */
}

struct symbolizer *symbolizer_new(const char *kallsyms_path, int *ret_kernel_error)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return NULL;
	u64map_init(&s->by_file);
	if (kallsyms_path)
		r = ksyms_load(kallsyms_path, &s->ksyms);
	if (ret_kernel_error)
		*ret_kernel_error = r;
	return s;
}

struct symbolizer *symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];

		free(m->path);
		closep(&m->fd);
		elf_symtab_free(m->symtab);
	}
	free(s->modules);
	u64map_done(&s->by_file);
	ksyms_free(s->ksyms);
	free(s);
	return NULL;
}

static int find_module(const struct symbolizer *s, dev_t dev, uint64_t inode)
{
	uint64_t *id = u64map_get(&s->by_file, file_key(dev, inode));

	if (!id)
		return -ENOENT;
	if (s->modules[*id - FRAME_MODULE_FIRST].dev == dev &&
	    s->modules[*id - FRAME_MODULE_FIRST].inode == inode)
		return (int)*id;
	/* two files with one key: rare enough for a scan */
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].dev == dev && s->modules[i].inode == inode)
			return (int)(i + FRAME_MODULE_FIRST);
	return -ENOENT;
}

/* Opens the mapped file the way that survives the most: map_files names the
 * very inode mapped (deleted or in another mount namespace); the path seen
 * from the process's root comes next.  Checks that it is the same inode. */
static int open_mapped_file(pid_t pid, const struct procmap *map, dev_t dev)
{
	char p[PATH_MAX + 64];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		 map->start, map->end);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && map->path[0] == '/') {
		snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, map->path);
		fd = open(p, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != map->inode) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid,
				  const struct procmap *map)
{
	dev_t dev = makedev(map->dev_major, map->dev_minor);
	struct module *m;
	uint64_t *slot;
	const char *slash;
	int id;

	if (map->inode == 0 || map->path[0] != '/')
		return -EINVAL;
	id = find_module(s, dev, map->inode);
	if (id >= 0)
		return id;
	if (s->n_modules >= MODULES_MAX)
		return -ENOSPC;
	if (s->n_modules == s->cap_modules) {
		size_t cap = s->cap_modules ? s->cap_modules * 2 : 64;
		struct module *mods = realloc(s->modules, cap * sizeof(*mods));

		if (!mods)
			return -ENOMEM;
		s->modules = mods;
		s->cap_modules = cap;
	}
	m = &s->modules[s->n_modules];
	*m = (struct module){ .dev = dev, .inode = map->inode };
	m->path = strdup(map->path);
	if (!m->path)
		return -ENOMEM;
	slash = strrchr(m->path, '/');
	m->basename = slash ? slash + 1 : m->path;
	m->fd = open_mapped_file(pid, map, dev);
	if (m->fd < 0) {
		m->load_error = m->fd;
		m->fd = -1;
		s->modules_failed++;
	}
	id = (int)(s->n_modules + FRAME_MODULE_FIRST);
	slot = u64map_upsert(&s->by_file, file_key(dev, map->inode), NULL);
	if (!slot) {
		free(m->path);
		closep(&m->fd);
		return -ENOMEM;
	}
	*slot = id;
	s->n_modules++;
	return id;
}

static struct elf_symtab *module_symtab(struct symbolizer *s, struct module *m)
{
	int r;

	if (m->symtab || m->load_error < 0)
		return m->symtab;
	r = elf_symtab_load_fd(m->fd, &m->symtab);
	if (r < 0) {
		m->load_error = r;
		s->modules_failed++;
		return NULL;
	}
	s->modules_loaded++;
	return m->symtab;
}

static const char *special_name(uint64_t what)
{
	switch (what) {
	case FRAME_SPECIAL_STACK_LIMIT:
		return "[dropped: stack table full]";
	case FRAME_SPECIAL_KSTACK_ERROR:
		return "[kernel stack unavailable]";
	case FRAME_SPECIAL_USTACK_ERROR:
		return "[user stack unavailable]";
	default:
		return "[unknown]";
	}
}

const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size)
{
	uint16_t module = frame_module(frame);
	uint64_t addr = frame_address(frame);
	const char *name = NULL;
	uint64_t off = 0;

	if (module == FRAME_MODULE_KERNEL) {
		if (s->ksyms)
			name = ksyms_lookup(s->ksyms, frame_kernel_address(frame),
					    NULL, &off);
		snprintf(buf, size, "%s", name ? name : "[unknown]");
	} else if (module == FRAME_MODULE_SPECIAL) {
		snprintf(buf, size, "%s", special_name(addr));
	} else if (module >= FRAME_MODULE_FIRST &&
		   (size_t)(module - FRAME_MODULE_FIRST) < s->n_modules) {
		struct module *m = &s->modules[module - FRAME_MODULE_FIRST];
		struct elf_symtab *t = module_symtab(s, m);
		uint64_t vaddr;

		if (t && elf_symtab_offset_to_vaddr(t, addr, &vaddr) == 0)
			name = elf_symtab_lookup(t, vaddr, &off);
		if (name)
			snprintf(buf, size, "%s", name);
		else
			snprintf(buf, size, "%s+0x%" PRIx64, m->basename, addr);
	} else {
		snprintf(buf, size, "[unknown]");
	}
	return buf;
}

int symbolizer_module_fd(const struct symbolizer *s, uint16_t module)
{
	if (module < FRAME_MODULE_FIRST || (size_t)(module - FRAME_MODULE_FIRST) >= s->n_modules)
		return -ENOENT;
	return s->modules[module - FRAME_MODULE_FIRST].fd >= 0 ?
		       s->modules[module - FRAME_MODULE_FIRST].fd : -EBADF;
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	size_t mem = sizeof(*s) + s->cap_modules * sizeof(struct module) +
		     u64map_memory(&s->by_file);

	for (size_t i = 0; i < s->n_modules; i++) {
		mem += strlen(s->modules[i].path) + 1;
		if (s->modules[i].symtab)
			mem += elf_symtab_memory(s->modules[i].symtab);
	}
	*ret = (struct symbolizer_stats){
		.modules = s->n_modules,
		.modules_loaded = s->modules_loaded,
		.modules_failed = s->modules_failed,
		.kernel_symbols = s->ksyms ? ksyms_count(s->ksyms) : 0,
		.memory_bytes = mem,
	};
}
