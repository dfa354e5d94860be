/* SPDX-License-Identifier: MIT */
/* symbolize.c - see symbolize.h for the design. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/offload.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "symbols/demangle.h"
#include "base/elfopen.h"
#include "symbols/elfsym.h"
#include "profile/frame.h"
#include "symbols/ksyms.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"
#include "symbols/srcline.h"
#include "symbols/symbolize.h"
#include "base/u64map.h"

#define MODULES_MAX (FRAME_MODULE_LAST - FRAME_MODULE_FIRST + 1)
#define BUILD_ID_MAX 64 /* bytes of a GNU build-id note we keep */
#define KERNEL_PATH "[kernel.kallsyms]" /* what perf and pprof users know */

enum module_kind {
	MODULE_FILE,
	MODULE_VDSO,
	MODULE_JIT,
};

struct module {
	enum module_kind kind;
	dev_t dev;
	uint64_t inode;
	char *path;           /* as the first process mapped it */
	const char *basename; /* into path */
	int fd;               /* -1 when it could not be opened */
	struct elf_symtab *symtab;
	int load_error; /* <0 once loading failed: not retried */
	char build_id[BUILD_ID_MAX * 2 + 1];
	int debug_fd;           /* separate debug file, -1 when none */
	/* Where a stripped binary's full symbols came from, once searched: a
	 * reload after eviction redoes only what worked. */
	enum {
		DEBUG_UNSEARCHED,
		DEBUG_SEARCHING, /* debuglink and MiniDebugInfo, on the lane */
		DEBUG_NONE,
		DEBUG_FILE,
		DEBUG_MINI,
	} debug_source;
	struct srcline *srcline; /* source lines, opened on first use */
	int srcline_error;
	/* name pointer (into symtab or srcline) -> demangled copy, or 0 when
	 * the name is not mangled; freed with them */
	struct u64map demangled;
	uint64_t last_used; /* LRU order of loaded symbol tables */
	/* the first process that mapped it (FILE), or whose JIT it is */
	pid_t pid;
	uint64_t start_time_ns;
	struct perfmap *perfmap;
	off_t perfmap_size; /* when last parsed */
	off_t perfmap_refused_size; /* when last refused; -1: never */
	uint32_t jit_owner_uid; /* who may own the perf map, besides root */
};

/* Files with one build-id (a library copied into two container images)
 * share one module: parsed once, one unwind table. */
struct file_ref {
	dev_t dev;
	uint64_t inode;
	uint64_t path_hash; /* of the path it was mapped at: an inode freed
			     * and reused by another file (a copy in a
			     * temporary directory) is another file */
	uint16_t module;
};

struct symbolizer {
	struct ksyms *ksyms;
	char kernel_build_id[BUILD_ID_MAX * 2 + 1]; /* "" when unknown */
	struct module *modules; /* index = id - FRAME_MODULE_FIRST */
	size_t n_modules, cap_modules;
	struct u64map by_file; /* hash(dev, inode) -> index in files; collisions scanned */
	struct file_ref *files; /* every file seen, and the module that reads it */
	size_t n_files, cap_files;
	struct u64map by_build_id; /* hash(build-id) -> module id; checked on hit */
	struct u64map jit_by_process; /* hash(pid, start) -> id; collisions scanned */
	int vdso_id;                  /* 0 until first asked for */
	bool demangle;
	size_t cache_limit;           /* bytes of loaded symbol tables */
	uint64_t clock;
	char *debug_dir;
	struct offload *lane; /* debug searches that read whole files (debugsearch.h) */
	struct symbolizer_stats stats;
};

static uint64_t file_key(dev_t dev, uint64_t inode)
{
	return hash_u64(hash_u64(dev) ^ inode) & ~1ULL; /* never U64MAP_EMPTY */
}

struct symbolizer *symbolizer_new(const struct symbolizer_opts *opts, int *ret_kernel_error)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return NULL;
	u64map_init(&s->by_file);
	u64map_init(&s->by_build_id);
	u64map_init(&s->jit_by_process);
	s->demangle = opts->demangle;
	s->cache_limit = opts->cache_bytes ? opts->cache_bytes : 256u << 20;
	s->debug_dir = strdup(opts->debug_dir ? opts->debug_dir : DEBUGINFO_DEFAULT_DIR);
	if (!s->debug_dir || offload_new(1, 0, &s->lane) < 0) {
		free(s->debug_dir);
		free(s);
		return NULL;
	}
	if (opts->kallsyms_path)
		r = ksyms_load(opts->kallsyms_path, &s->ksyms);
	/* without it the kernel's mapping only goes without a build-id */
	if (opts->kernel_notes_path)
		(void)ksyms_read_build_id(opts->kernel_notes_path, s->kernel_build_id,
					  sizeof(s->kernel_build_id));
	if (ret_kernel_error)
		*ret_kernel_error = r;
	return s;
}

/* Frees what was parsed from a module's files (symbols, lines, demangled
 * names, a JIT's map); its descriptors stay, so it can be parsed again. */
static void unload(struct module *m)
{
	m->perfmap = perfmap_free(m->perfmap);
	m->perfmap_size = 0;
	U64MAP_FOREACH(slot, &m->demangled)
		free((char *)(uintptr_t)slot->value);
	u64map_done(&m->demangled);
	m->symtab = elf_symtab_free(m->symtab);
	m->srcline = srcline_free(m->srcline);
	m->srcline_error = 0;
}

static size_t loaded_bytes(const struct module *m)
{
	struct srcline_stats st = { 0 };

	if (m->srcline)
		srcline_get_stats(m->srcline, &st);
	return (m->symtab ? elf_symtab_memory(m->symtab) : 0) + st.memory_bytes +
	       u64map_memory(&m->demangled) + (m->perfmap ? perfmap_memory(m->perfmap) : 0);
}

/* Keeps the parsed symbol tables within the cache limit by unloading the
 * least recently used ones, never keep. */
static void trim_cache(struct symbolizer *s, const struct module *keep)
{
	size_t total = 0;

	for (size_t i = 0; i < s->n_modules; i++)
		total += loaded_bytes(&s->modules[i]);
	while (total > s->cache_limit) {
		struct module *lru = NULL;

		for (size_t i = 0; i < s->n_modules; i++) {
			struct module *m = &s->modules[i];

			if (m != keep && (m->symtab || m->perfmap) &&
			    (!lru || m->last_used < lru->last_used))
				lru = m;
		}
		if (!lru)
			break;
		total -= loaded_bytes(lru);
		unload(lru);
		s->stats.cache_evictions++;
	}
}

struct symbolizer *symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return NULL;
	offload_free(s->lane); /* first: it may be reading */
	for (size_t i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];

		free(m->path);
		closep(&m->fd);
		closep(&m->debug_fd);
		unload(m);
	}
	free(s->debug_dir);
	free(s->modules);
	u64map_done(&s->by_file);
	u64map_done(&s->by_build_id);
	free(s->files);
	u64map_done(&s->jit_by_process);
	ksyms_free(s->ksyms);
	free(s);
	return NULL;
}

static bool file_is(const struct file_ref *f, dev_t dev, uint64_t inode, uint64_t path_hash)
{
	return f->dev == dev && f->inode == inode && f->path_hash == path_hash;
}

/* The module of the file mapped at path from (dev, inode).  The path is
 * part of the identity: a file mapped under another path (a hard link,
 * " (deleted)") is found again through its build-id, parsed once. */
static int find_module(const struct symbolizer *s, dev_t dev, uint64_t inode, const char *path)
{
	uint64_t *idx = u64map_get(&s->by_file, file_key(dev, inode));
	uint64_t path_hash = hash_text(path, strlen(path));

	if (!idx)
		return -ENOENT;
	if (file_is(&s->files[*idx], dev, inode, path_hash))
		return s->files[*idx].module;
	/* two files with one key: rare enough for a scan */
	for (size_t i = 0; i < s->n_files; i++)
		if (file_is(&s->files[i], dev, inode, path_hash))
			return s->files[i].module;
	return -ENOENT;
}

static int add_file(struct symbolizer *s, dev_t dev, uint64_t inode, const char *path, int module)
{
	uint64_t *slot;

	if (s->n_files == s->cap_files) {
		size_t cap = s->cap_files ? s->cap_files * 2 : 64;
		struct file_ref *f = realloc(s->files, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		s->files = f;
		s->cap_files = cap;
	}
	slot = u64map_upsert(&s->by_file, file_key(dev, inode), NULL);
	if (!slot)
		return -ENOMEM;
	s->files[s->n_files] = (struct file_ref){
		.dev = dev, .inode = inode, .path_hash = hash_text(path, strlen(path)),
		.module = (uint16_t)module,
	};
	*slot = s->n_files++;
	return 0;
}

/* Reads the GNU build-id note of the ELF file on fd as hex into out
 * (BUILD_ID_MAX * 2 + 1 bytes); "" when it has none. */
static void read_build_id(int fd, char *out)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	size_t n;

	out[0] = 0;
	if (fd < 0 || elf_open_fd(fd, &elf) < 0 || elf_getphdrnum(elf, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		size_t off = 0, next, name_off, desc_off;
		GElf_Phdr ph;
		GElf_Nhdr nh;
		Elf_Data *d;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_NOTE)
			continue;
		/* notes aligned to 8 (.note.gnu.property) have their own layout */
		d = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz,
					 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		while (d && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 &&
			    nh.n_descsz > 0 && nh.n_descsz <= BUILD_ID_MAX) {
				for (size_t k = 0; k < nh.n_descsz; k++)
					sprintf(out + 2 * k, "%02x",
						((unsigned char *)d->d_buf)[desc_off + k]);
				return;
			}
			off = next;
		}
	}
}

static uint64_t build_id_key(const char *hex)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const char *p = hex; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	return h & ~1ULL;
}

/* Opens the mapped file the way that survives the most: map_files names the
 * very inode mapped (deleted or in another mount namespace); the path seen
 * from the process's root comes next.  Either way only a regular file is
 * opened (procfs.h: a mapped device is refused unopened), of any size or
 * owner.  Checks that it is the same inode. */
static int open_mapped_file(pid_t pid, const struct procmap *map, dev_t dev)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	char p[96];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		 map->start, map->end);
	fd = procfs_open_link(AT_FDCWD, p, &binary);
	if (fd < 0 && map->path[0] == '/')
		fd = procfs_open_in_process(pid, PROCFS_START_ANY, map->path, &binary);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != map->inode) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* Appends a module with the given path; returns its id or -errno. */
static int add_module(struct symbolizer *s, enum module_kind kind, const char *path,
		      struct module **ret)
{
	struct module *m;
	const char *slash;

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
	*m = (struct module){ .kind = kind, .fd = -1, .debug_fd = -1 };
	m->path = strdup(path);
	if (!m->path)
		return -ENOMEM;
	slash = strrchr(m->path, '/');
	m->basename = slash ? slash + 1 : m->path;
	s->n_modules++;
	*ret = m;
	return (int)(s->n_modules - 1 + FRAME_MODULE_FIRST);
}

/* Gives a file module the descriptor its first process could not: that
 * process was gone before its file was opened (map_files is empty once a
 * process has exited, so a short-lived one read at its end leaves no way
 * to its files).  Without this the module would stay without symbols or
 * an unwind table for as long as the daemon runs.  Only that failure is
 * retried, with the process mapping the file now: another one (-ESTALE, a
 * file replaced since) tells about the file, not the process. */
static void reopen_module(struct symbolizer *s, int id, pid_t pid, const struct procmap *map,
			  dev_t dev)
{
	struct module *m = &s->modules[id - FRAME_MODULE_FIRST];
	uint64_t *slot;
	bool added;
	int fd;

	if (m->kind != MODULE_FILE || m->fd >= 0 ||
	    (m->load_error != -ENOENT && m->load_error != -ESRCH))
		return;
	fd = open_mapped_file(pid, map, dev);
	if (fd < 0)
		return;
	m->fd = fd;
	m->pid = pid;
	m->load_error = 0;
	s->stats.modules_failed--;
	read_build_id(fd, m->build_id);
	if (m->build_id[0]) {
		slot = u64map_upsert(&s->by_build_id, build_id_key(m->build_id), &added);
		if (slot && added)
			*slot = id;
	}
}

int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid,
				  const struct procmap *map)
{
	dev_t dev = makedev(map->dev_major, map->dev_minor);
	struct module *m;
	uint64_t *slot;
	int id;

	if (map->inode == 0 || map->path[0] != '/')
		return -EINVAL;
	char build_id[BUILD_ID_MAX * 2 + 1];
	int fd, r;

	id = find_module(s, dev, map->inode, map->path);
	if (id >= 0) {
		reopen_module(s, id, pid, map, dev);
		return id;
	}
	fd = open_mapped_file(pid, map, dev);
	read_build_id(fd, build_id);
	if (build_id[0]) {
		slot = u64map_get(&s->by_build_id, build_id_key(build_id));
		if (slot && strcmp(s->modules[*slot - FRAME_MODULE_FIRST].build_id, build_id) == 0) {
			/* the same binary under another inode: one module */
			closep(&fd);
			r = add_file(s, dev, map->inode, map->path, (int)*slot);
			return r < 0 ? r : (int)*slot;
		}
	}
	id = add_module(s, MODULE_FILE, map->path, &m);
	if (id >= 0 && (r = add_file(s, dev, map->inode, map->path, id)) < 0) {
		/* Not indexed, the module could never be found again: give its
		 * id back rather than use one up per attempt. */
		free(m->path);
		s->n_modules--;
		id = r;
	}
	if (id < 0) {
		closep(&fd);
		return id;
	}
	m->dev = dev;
	m->inode = map->inode;
	m->pid = pid;
	m->fd = fd;
	memcpy(m->build_id, build_id, sizeof(build_id));
	if (build_id[0]) {
		slot = u64map_upsert(&s->by_build_id, build_id_key(build_id), NULL);
		if (slot)
			*slot = id;
	}
	if (m->fd < 0) {
		m->load_error = m->fd;
		m->fd = -1;
		s->stats.modules_failed++;
	}
	return id;
}

int symbolizer_vdso_module(struct symbolizer *s)
{
	const Elf64_Ehdr *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct module *m;
	size_t size;
	int id, fd;

	if (s->vdso_id)
		return s->vdso_id;
	if (!eh)
		return -ENOENT;
	id = add_module(s, MODULE_VDSO, "[vdso]", &m);
	if (id < 0)
		return id;
	s->vdso_id = id;
	/* A copy in a memfd lets the ELF reader treat it like any file.  Its
	 * section headers come last in the image. */
	size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	fd = memfd_create("perfd-vdso", MFD_CLOEXEC);
	if (fd >= 0 && write(fd, eh, size) != (ssize_t)size) {
		close(fd);
		fd = -1;
	}
	m->fd = fd;
	if (fd < 0)
		m->load_error = -EIO;
	return id;
}

static uint64_t process_key(pid_t pid, uint64_t start_time_ns)
{
	return hash_u64(hash_u64((uint64_t)pid) ^ start_time_ns) & ~1ULL;
}

/* What a perf map must be, as perf requires it and more: a regular file
 * reached through no symlink (procfs_open_in_root), owned by the process's
 * user or root, not a hard link to someone else's file, and small enough
 * to parse. */
static struct procfs_file_rules jit_map_rules(uint32_t owner_uid)
{
	return (struct procfs_file_rules){
		.max_size = PERFMAP_MAX_BYTES,
		.check_owner = true,
		.owner_uid = owner_uid,
		.single_link = true,
	};
}

/* Whether r is a map refused for what it is, not absent or unreadable. */
static bool jit_map_refused(int r)
{
	return r == -EPERM || r == -ELOOP || r == -EFBIG || r == -EWOULDBLOCK;
}

int symbolizer_jit_module(struct symbolizer *s, pid_t pid, uint64_t start_time_ns,
			  const char *map_path, uint32_t owner_uid)
{
	uint64_t key = process_key(pid, start_time_ns), *slot = u64map_get(&s->jit_by_process, key);
	struct procfs_file_rules rules = jit_map_rules(owner_uid);
	struct module *m;
	int id, fd;

	if (slot) {
		m = &s->modules[*slot - FRAME_MODULE_FIRST];
		if (m->pid == pid && m->start_time_ns == start_time_ns)
			return (int)*slot;
	}
	fd = procfs_open_in_process(pid, start_time_ns, map_path, &rules);
	if (fd < 0) {
		if (jit_map_refused(fd))
			s->stats.jit_maps_refused++;
		return fd;
	}
	id = add_module(s, MODULE_JIT, map_path, &m);
	if (id < 0) {
		close(fd);
		return id;
	}
	m->fd = fd;
	m->pid = pid;
	m->start_time_ns = start_time_ns;
	m->jit_owner_uid = owner_uid;
	m->perfmap_refused_size = -1;
	slot = u64map_upsert(&s->jit_by_process, key, NULL);
	if (slot)
		*slot = id; /* without the index it is only found again by a new id */
	return id;
}

/* A stripped binary: its full symbol table may be in a separate debug
 * file (found the way gdb does, under the process's root) or in its
 * MiniDebugInfo.  The build-id lookup is cheap and done here; the rest
 * reads whole files and goes to the lane (debugsearch.h), the binary named
 * from .dynsym until symbolizer_complete() merges what it found. */
static void add_debug_symbols(struct symbolizer *s, struct module *m)
{
	_cleanup_free_ char *path = NULL;
	struct debugsearch *q;
	unsigned refused;
	char root[64];
	int r;
	void *image;
	size_t size;
	char *deleted;

	switch (m->debug_source) {
	case DEBUG_NONE:
	case DEBUG_SEARCHING:
		return;
	case DEBUG_FILE:
		(void)elf_symtab_add_from_fd(m->symtab, m->debug_fd);
		return;
	case DEBUG_MINI:
		if (debuginfo_minidebuginfo(m->fd, &image, &size) == 0) {
			(void)elf_symtab_add_from_memory(m->symtab, image, size);
			free(image);
		}
		return;
	case DEBUG_UNSEARCHED:
		break;
	}

	m->debug_source = DEBUG_NONE;
	path = strdup(m->path);
	if (!path)
		return;
	deleted = strstr(path, " (deleted)");
	if (deleted)
		*deleted = 0;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	m->debug_fd = debuginfo_find(m->fd, path, root, s->debug_dir, DEBUGINFO_BY_BUILD_ID, NULL,
				     &refused);
	s->stats.debug_files_refused += refused;
	if (m->debug_fd >= 0) {
		r = elf_symtab_add_from_fd(m->symtab, m->debug_fd);
		s->stats.debug_files += r >= 0;
		s->stats.tables_refused += r == -EFBIG;
		m->debug_source = DEBUG_FILE;
		return;
	}
	m->debug_fd = -1;
	if (debugsearch_new((uint64_t)(m - s->modules), m->fd, path, root, s->debug_dir, &q) < 0)
		return; /* out of memory or descriptors: named from .dynsym */
	offload_submit(s->lane, &q->job);
	m->debug_source = DEBUG_SEARCHING;
	s->stats.debug_searches_pending++;
}

/* Takes a finished search back: its debug file or MiniDebugInfo becomes
 * the module's, merged now if its symbols are loaded (else at the next
 * load, as after an eviction). */
static void debug_search_done(struct symbolizer *s, struct debugsearch *q)
{
	struct module *m = &s->modules[q->job.key];

	s->stats.debug_searches_pending--;
	s->stats.debug_files_refused += q->refused;
	m->debug_source = DEBUG_NONE;
	if (q->debug_fd >= 0) {
		int r = m->symtab ? elf_symtab_add_from_fd(m->symtab, q->debug_fd) : 0;

		m->debug_fd = TAKE_FD(q->debug_fd);
		m->debug_source = DEBUG_FILE;
		s->stats.debug_files += r >= 0;
		s->stats.tables_refused += r == -EFBIG;
	} else if (q->image) {
		m->debug_source = DEBUG_MINI;
		if (!m->symtab || elf_symtab_add_from_memory(m->symtab, q->image, q->image_size) >= 0)
			s->stats.minidebuginfo++;
	}
	if (m->symtab)
		trim_cache(s, m);
}

void symbolizer_complete(struct symbolizer *s)
{
	struct offload_job *j = offload_take_done(s->lane), *next;

	for (; j; j = next) {
		next = j->next;
		debug_search_done(s, debugsearch_of(j));
		debugsearch_free(debugsearch_of(j));
	}
}

int symbolizer_fd(const struct symbolizer *s)
{
	return offload_fd(s->lane);
}

static struct elf_symtab *module_symtab(struct symbolizer *s, struct module *m)
{
	int r;

	m->last_used = ++s->clock;
	if (m->symtab || m->load_error < 0) {
		s->stats.cache_hits += m->symtab != NULL;
		return m->symtab;
	}
	s->stats.cache_misses++;
	r = elf_symtab_load_fd(m->fd, &m->symtab);
	if (r < 0) {
		m->load_error = r;
		s->stats.modules_failed++;
		s->stats.tables_refused += r == -EFBIG;
		return NULL;
	}
	s->stats.modules_loaded++;
	if (m->kind == MODULE_FILE && !elf_symtab_has_symtab(m->symtab))
		add_debug_symbols(s, m);
	trim_cache(s, m);
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
	case FRAME_SPECIAL_UNWIND_PENDING:
		return "[unwind table pending]";
	case FRAME_SPECIAL_TRUNCATED:
		return "[truncated]";
	case FRAME_SPECIAL_CONTEXT_SWITCH:
		return "[context switch]";
	default:
		return "[unknown]";
	}
}

/* (Re)reads a JIT module's perf map or jitdump when it was never read or
 * has grown since: the JIT appends as it compiles.  Reads through the descriptor
 * opened while the process lived, so it works after the process is gone,
 * and only while the file still meets the rules it was opened under (a
 * map grown past the cap is refused once per size, its old names kept). */
static void refresh_perfmap(struct symbolizer *s, struct module *m)
{
	struct procfs_file_rules rules = jit_map_rules(m->jit_owner_uid);
	_cleanup_fclose_ FILE *f = NULL;
	struct perfmap *pm = NULL;
	uint8_t head[4];
	struct stat st;
	int fd, r;

	if (m->fd < 0 || fstat(m->fd, &st) < 0 || (m->perfmap && st.st_size == m->perfmap_size) ||
	    st.st_size == m->perfmap_refused_size)
		return;
	r = procfs_check_fd(m->fd, &rules);
	if (r < 0) {
		m->perfmap_refused_size = st.st_size;
		s->stats.jit_maps_refused++;
		return;
	}
	fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return;
	f = fdopen(fd, "re");
	if (!f) {
		close(fd);
		return;
	}
	if (fseeko(f, 0, SEEK_SET) < 0)
		return;
	/* told by its content: a jitdump starts with its magic */
	if (pread(m->fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
	    jitdump_is(head, sizeof(head)))
		r = jitdump_parse(f, &pm, NULL);
	else
		r = perfmap_parse(f, &pm, NULL);
	if (r == -EFBIG) {
		/* it grew past the cap while being read */
		m->perfmap_refused_size = st.st_size;
		s->stats.jit_maps_refused++;
	}
	if (r >= 0 && perfmap_memory(pm) > s->cache_limit) {
		/* it alone would not fit in the cache */
		pm = perfmap_free(pm);
		r = -EFBIG;
		m->perfmap_refused_size = st.st_size;
		s->stats.jit_maps_refused++;
	}
	if (r < 0)
		return;
	perfmap_free(m->perfmap);
	m->perfmap = pm;
	m->perfmap_size = st.st_size;
	s->stats.jit_maps++;
	trim_cache(s, m);
}

static const char *jit_name(struct symbolizer *s, struct module *m, uint64_t addr)
{
	const char *name = NULL;

	m->last_used = ++s->clock;
	if (m->perfmap)
		name = perfmap_lookup(m->perfmap, addr, NULL);
	if (!name) {
		refresh_perfmap(s, m);
		if (m->perfmap)
			name = perfmap_lookup(m->perfmap, addr, NULL);
	}
	return name;
}

/* The demangled form of a name owned by module m's symbol table or line
 * tables, cached by the name's address for as long as they are loaded. */
static const char *demangled(struct symbolizer *s, struct module *m, const char *name)
{
	uint64_t *slot;
	bool added;
	char *d;

	if (!s->demangle || name[0] != '_')
		return name;
	slot = u64map_upsert(&m->demangled, (uintptr_t)name, &added);
	if (!slot)
		return name;
	if (!added) {
		s->stats.demangle_cache_hits++;
		return *slot ? (const char *)(uintptr_t)*slot : name;
	}
	s->stats.demangle_cache_misses++;
	d = demangle(name);
	*slot = (uintptr_t)d;
	return d ? d : name;
}

/* The demangled name of the symbol at vaddr of file module m, or NULL. */
static const char *file_symbol(struct symbolizer *s, struct module *m, struct elf_symtab *t,
			       uint64_t vaddr)
{
	uint64_t off;
	const char *name = elf_symtab_lookup(t, vaddr, &off);

	return name ? demangled(s, m, name) : NULL;
}

/* Resolves a frame the symbol tables name (no lines): one record. */
static size_t resolve_symbol(struct symbolizer *s, uint64_t frame, struct frame_record *out,
			     char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	uint64_t addr = frame_address(frame);
	const char *name = NULL;
	uint64_t off = 0;

	s->stats.lookups++;
	*out = (struct frame_record){ .kind = FRAME_KIND_NATIVE, .offset = addr };
	if (module == FRAME_MODULE_KERNEL) {
		out->kind = FRAME_KIND_KERNEL;
		out->module = FRAME_MODULE_KERNEL;
		out->offset = frame_kernel_address(frame);
		if (s->ksyms)
			name = ksyms_lookup(s->ksyms, out->offset, NULL, &off);
		out->function = name ? name : "[unknown]";
		out->symbol_offset = name ? off : 0;
	} else if (module == FRAME_MODULE_SPECIAL) {
		out->kind = FRAME_KIND_SPECIAL;
		out->function = special_name(addr);
	} else if (module >= FRAME_MODULE_FIRST &&
		   (size_t)(module - FRAME_MODULE_FIRST) < s->n_modules) {
		struct module *m = &s->modules[module - FRAME_MODULE_FIRST];

		out->module = module;
		if (m->kind == MODULE_JIT) {
			out->kind = FRAME_KIND_JIT;
			name = jit_name(s, m, addr);
			if (!name) {
				snprintf(scratch, size, "[jit]+0x%" PRIx64, addr);
				name = scratch;
			}
		} else {
			struct elf_symtab *t = module_symtab(s, m);
			uint64_t vaddr;

			if (t && elf_symtab_offset_to_vaddr(t, addr, &vaddr) == 0)
				name = file_symbol(s, m, t, vaddr);
			if (!name) {
				snprintf(scratch, size, "%s+0x%" PRIx64, m->basename, addr);
				name = scratch;
			}
		}
		out->function = name;
	} else {
		out->function = "[unknown]";
	}
	return 1;
}

const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size)
{
	struct frame_record r;
	char scratch[PATH_MAX + 32];

	resolve_symbol(s, frame, &r, scratch, sizeof(scratch));
	snprintf(buf, size, "%s", r.function);
	return buf;
}

size_t symbolizer_resolve(struct symbolizer *s, uint64_t frame, bool lines,
			  struct frame_record *out, size_t cap, char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	struct srcline_frame chain[FRAME_MAX_INLINE];
	struct elf_symtab *t;
	struct module *m;
	uint64_t vaddr;
	size_t k = 0;
	int n;

	if (!lines || cap < 1 || module < FRAME_MODULE_FIRST ||
	    (size_t)(module - FRAME_MODULE_FIRST) >= s->n_modules)
		return resolve_symbol(s, frame, out, scratch, size);
	m = &s->modules[module - FRAME_MODULE_FIRST];
	t = m->kind == MODULE_FILE ? module_symtab(s, m) : NULL;
	if (!t || elf_symtab_offset_to_vaddr(t, frame_address(frame), &vaddr) < 0)
		return resolve_symbol(s, frame, out, scratch, size);
	if (!m->srcline && !m->srcline_error) {
		int r = srcline_open(m->fd, &m->srcline);

		if (r == -ENODATA && m->debug_fd >= 0)
			r = srcline_open(m->debug_fd, &m->srcline);
		s->stats.tables_refused += r == -EFBIG;
		if (r < 0)
			m->srcline_error = r;
		else
			trim_cache(s, m); /* line tables count against the cache too */
	}
	n = m->srcline ? srcline_lookup(m->srcline, vaddr, chain, ELEMENTSOF(chain)) : 0;
	if (n <= 0)
		return resolve_symbol(s, frame, out, scratch, size);

	/* chain[] is innermost first; records are outermost first, and the
	 * outermost is the function the symbol table names (its first line
	 * is DWARF's for the function around the address). */
	resolve_symbol(s, frame, &out[0], scratch, size);
	for (int i = n - 1; i >= 0 && k < cap; i--, k++) {
		const char *fn = chain[i].function;

		if (k > 0) {
			/* an inlined frame without a name is its caller's */
			out[k] = out[0];
			out[k].function = fn ? demangled(s, m, fn) : out[0].function;
		}
		out[k].file = chain[i].file;
		out[k].line = chain[i].line;
		out[k].start_line = chain[i].decl_line;
	}
	return k;
}

bool symbolizer_describe_module(const struct symbolizer *s, uint16_t module,
				const char **ret_path, const char **ret_build_id)
{
	const struct module *m;

	if (module == FRAME_MODULE_KERNEL) {
		*ret_path = KERNEL_PATH;
		*ret_build_id = s->kernel_build_id;
		return true;
	}
	if (module < FRAME_MODULE_FIRST || (size_t)(module - FRAME_MODULE_FIRST) >= s->n_modules)
		return false;
	m = &s->modules[module - FRAME_MODULE_FIRST];
	*ret_path = m->path;
	*ret_build_id = m->build_id;
	return true;
}

int symbolizer_module_fd(const struct symbolizer *s, uint16_t module)
{
	if (module < FRAME_MODULE_FIRST || (size_t)(module - FRAME_MODULE_FIRST) >= s->n_modules ||
	    s->modules[module - FRAME_MODULE_FIRST].kind == MODULE_JIT)
		return -ENOENT;
	return s->modules[module - FRAME_MODULE_FIRST].fd >= 0 ?
		       s->modules[module - FRAME_MODULE_FIRST].fd : -EBADF;
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	size_t mem = sizeof(*s) + s->cap_modules * sizeof(struct module) +
		     u64map_memory(&s->by_file) + u64map_memory(&s->jit_by_process);

	*ret = s->stats;
	for (size_t i = 0; i < s->n_modules; i++) {
		size_t loaded = loaded_bytes(&s->modules[i]);

		mem += strlen(s->modules[i].path) + 1 + loaded;
		ret->cache_bytes += loaded;
	}
	ret->modules = s->n_modules;
	ret->kernel_symbols = s->ksyms ? ksyms_count(s->ksyms) : 0;
	ret->cache_limit = s->cache_limit;
	ret->memory_bytes = mem;
}
