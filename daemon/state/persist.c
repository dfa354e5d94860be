/* SPDX-License-Identifier: MIT */
/* persist.c - see persist.h for the design and the records. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "perfd/macro.h"
#include "profile/stacktab.h"
#include "state/persist.h"
#include "state/statefile.h"
#include "state/writer.h"

enum record_type {
	REC_SEGMENT = 1,
	REC_STRING,
	REC_FRAME,
	REC_STACK,
	REC_PROCESS,
	REC_WINDOW,
};

#define MAX_NAME 4096            /* a function or file name read back */
#define MAX_PATH_READ PATH_MAX
#define MAX_WINDOW_ENTRIES (1u << 20)
#define MAX_SEGMENTS 4096

/* One segment on disk. */
struct segment {
	uint64_t seq;
	uint64_t bytes;
	uint64_t newest_end_s; /* of the windows in it */
};

/* ---- restored frames: what FRAME_MODULE_STORED frames resolve to ---- */

struct stored_line {
	uint8_t kind;
	uint32_t function, file; /* offsets in the pool; file 0: none */
	uint32_t line, start_line;
	uint16_t module;
	uint64_t offset, symbol_offset;
};

struct stored_frame {
	uint32_t first, n; /* in lines */
	uint64_t hash;
};

struct stored_module {
	uint32_t path, build_id; /* pool offsets */
};

struct stored {
	char *pool; /* NUL-terminated strings; offset 0 is "" */
	size_t pool_len, pool_cap;
	struct u64map pool_index; /* hash_text -> offset + 1 */
	struct stored_line *lines;
	size_t n_lines, cap_lines;
	struct stored_frame *frames;
	size_t n_frames, cap_frames;
	struct u64map frame_index; /* content hash -> id + 1 */
	struct stored_module *modules;
	size_t n_modules;
};

struct persist {
	char dir[PATH_MAX];
	int dirfd, lockfd;
	uint64_t max_bytes, retention_s;
	uint8_t boot_id[16];
	struct state_writer *writer;
	struct segment *segments; /* oldest first; the last may be current */
	size_t n_segments;
	/* the segment being written: 0 before its first record */
	uint64_t seq, next_seq;
	uint64_t seq_started_s;
	uint64_t next_flush_s;
	struct u64map frames_written;  /* frame word -> 1 in this segment */
	/* modules given back since the last flush: their frames in
	 * frames_written go before the next one writes */
	uint64_t forgotten[(FRAME_MODULE_LAST + 1 + 63) / 64];
	bool any_forgotten;
	struct u64map strings_written; /* hash_text -> string id + 1 */
	uint64_t n_strings;
	/* what each owner's windows wrote to this segment, definitions
	 * included: owner uid -> bytes (persist.h, "a share per owner") */
	struct u64map owner_bytes;
	uint64_t segment_budget;
	struct stored stored;
	/* stacktab_stored_frames when stored was last made to fit */
	size_t stored_refs;
	struct persist_stats stats;
};

/* ---- the stored table ---- */

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n;
	void *q;

	if (need <= *cap)
		return 0;
	n = MAX(need, *cap ? *cap * 2 : 64);
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* The pool offset of s, added once. */
static int pool_intern(struct stored *st, const char *s, uint32_t *ret)
{
	size_t len = strlen(s);
	uint64_t h = hash_text(s, len);
	uint64_t *slot = u64map_get(&st->pool_index, h);
	bool added;

	if (slot && strcmp(st->pool + *slot - 1, s) == 0) {
		*ret = (uint32_t)(*slot - 1);
		return 0;
	}
	if (!st->pool_len) {
		if (grow((void **)&st->pool, &st->pool_cap, 1, 1) < 0)
			return -ENOMEM;
		st->pool[st->pool_len++] = 0;
	}
	if (!len) {
		*ret = 0;
		return 0;
	}
	if (st->pool_len + len + 1 > UINT32_MAX ||
	    grow((void **)&st->pool, &st->pool_cap, st->pool_len + len + 1, 1) < 0)
		return -ENOMEM;
	memcpy(st->pool + st->pool_len, s, len + 1);
	*ret = (uint32_t)st->pool_len;
	st->pool_len += len + 1;
	if (!slot) {
		slot = u64map_upsert(&st->pool_index, h, &added);
		if (slot)
			*slot = *ret + 1ULL;
	}
	return 0;
}

/* The restored module of (path, build-id), FRAME_MODULE_NONE when the
 * range is full. */
static uint16_t stored_module(struct stored *st, uint32_t path, uint32_t build_id)
{
	size_t cap = FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1;
	struct stored_module *m;

	for (size_t i = 0; i < st->n_modules; i++)
		if (st->modules[i].path == path && st->modules[i].build_id == build_id)
			return (uint16_t)(FRAME_MODULE_RESTORED_FIRST + i);
	if (st->n_modules == cap)
		return FRAME_MODULE_NONE;
	if (!st->modules && !(st->modules = calloc(cap, sizeof(*st->modules))))
		return FRAME_MODULE_NONE;
	m = &st->modules[st->n_modules++];
	m->path = path;
	m->build_id = build_id;
	return (uint16_t)(FRAME_MODULE_RESTORED_FIRST + st->n_modules - 1);
}

static uint64_t lines_hash(const struct stored_line *l, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++) {
		h = hash_u64(h ^ l[i].kind ^ (uint64_t)l[i].function << 8 ^ (uint64_t)l[i].file << 36);
		h = hash_u64(h ^ l[i].line ^ (uint64_t)l[i].start_line << 32);
		h = hash_u64(h ^ l[i].module ^ l[i].offset ^ l[i].symbol_offset << 17);
	}
	return h;
}

/* Field by field: a struct's padding is no part of what it says. */
static bool lines_equal(const struct stored_line *a, const struct stored_line *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].kind != b[i].kind || a[i].function != b[i].function || a[i].file != b[i].file ||
		    a[i].line != b[i].line || a[i].start_line != b[i].start_line ||
		    a[i].module != b[i].module || a[i].offset != b[i].offset ||
		    a[i].symbol_offset != b[i].symbol_offset)
			return false;
	return true;
}

/* The stored frame of n lines (the pending ones at lines[n_lines]),
 * shared with an equal one already stored. */
static int stored_frame(struct stored *st, size_t n, uint32_t *ret)
{
	struct stored_line *l = st->lines + st->n_lines;
	uint64_t h = lines_hash(l, n);
	uint64_t *slot = u64map_get(&st->frame_index, h);
	struct stored_frame *f;
	bool added;

	if (slot) {
		f = &st->frames[*slot - 1];
		if (f->n == n && lines_equal(st->lines + f->first, l, n)) {
			*ret = (uint32_t)(*slot - 1);
			return 0;
		}
	}
	if (st->n_frames >= FRAME_ADDRESS_MASK ||
	    grow((void **)&st->frames, &st->cap_frames, st->n_frames + 1, sizeof(*st->frames)) < 0)
		return -ENOMEM;
	f = &st->frames[st->n_frames];
	*f = (struct stored_frame){ .first = (uint32_t)st->n_lines, .n = (uint32_t)n, .hash = h };
	st->n_lines += n;
	*ret = (uint32_t)st->n_frames++;
	if (!slot && (slot = u64map_upsert(&st->frame_index, h, &added)))
		*slot = *ret + 1ULL;
	return 0;
}

static void stored_done(struct stored *st)
{
	free(st->pool);
	u64map_done(&st->pool_index);
	free(st->lines);
	free(st->frames);
	u64map_done(&st->frame_index);
	free(st->modules);
	*st = (struct stored){ 0 };
}

static size_t stored_memory(const struct stored *st)
{
	return st->pool_cap + u64map_memory(&st->pool_index) + st->cap_lines * sizeof(*st->lines) +
	       st->cap_frames * sizeof(*st->frames) + u64map_memory(&st->frame_index) +
	       (st->modules ? (FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1) *
				      sizeof(*st->modules) : 0);
}

/* A copy of what st holds for the frames whose bit is set in used, under
 * the same ids (the stacks name them by id); the others keep their id and
 * resolve to nothing, no stack naming them.  Without the indexes, which
 * only reading segments needs.  Returns 0 or -ENOMEM (st untouched). */
static int stored_compact(struct stored *st, const uint64_t *used)
{
	size_t cap = FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1;
	_cleanup_(stored_done) struct stored nt = { 0 };

	if (st->n_modules && !(nt.modules = calloc(cap, sizeof(*nt.modules))))
		return -ENOMEM;
	for (size_t i = 0; i < st->n_modules; i++)
		if (pool_intern(&nt, st->pool + st->modules[i].path, &nt.modules[i].path) < 0 ||
		    pool_intern(&nt, st->pool + st->modules[i].build_id, &nt.modules[i].build_id) < 0)
			return -ENOMEM;
	nt.n_modules = st->n_modules;
	if (st->n_frames && !(nt.frames = calloc(st->n_frames, sizeof(*nt.frames))))
		return -ENOMEM;
	nt.n_frames = nt.cap_frames = st->n_frames;
	for (size_t id = 0; id < st->n_frames; id++) {
		const struct stored_frame *f = &st->frames[id];

		if (!(used[id / 64] >> (id % 64) & 1))
			continue;
		if (grow((void **)&nt.lines, &nt.cap_lines, nt.n_lines + f->n, sizeof(*nt.lines)) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < f->n; i++) {
			const struct stored_line *l = &st->lines[f->first + i];
			struct stored_line *to = &nt.lines[nt.n_lines + i];

			*to = *l;
			if (pool_intern(&nt, st->pool + l->function, &to->function) < 0 ||
			    (l->file && pool_intern(&nt, st->pool + l->file, &to->file) < 0))
				return -ENOMEM;
		}
		nt.frames[id] = (struct stored_frame){ .first = (uint32_t)nt.n_lines, .n = f->n,
						       .hash = f->hash };
		nt.n_lines += f->n;
	}
	u64map_done(&nt.pool_index);
	stored_done(st);
	*st = nt;
	nt = (struct stored){ 0 };
	return 0;
}

size_t persist_resolve(const struct persist *ps, uint64_t frame, bool lines,
		       struct frame_record *out, size_t cap)
{
	const struct stored *st = &ps->stored;
	uint64_t id = frame_address(frame);
	const struct stored_frame *f;
	size_t n;

	if (cap < 1)
		return 0;
	if (id >= st->n_frames || !st->frames[id].n) {
		out[0] = (struct frame_record){ .kind = FRAME_KIND_SPECIAL, .function = "[unknown]" };
		return 1;
	}
	f = &st->frames[id];
	n = MIN((size_t)f->n, cap);
	for (size_t i = 0; i < n; i++) {
		const struct stored_line *l = &st->lines[f->first + i];

		out[i] = (struct frame_record){
			.kind = (enum frame_kind)l->kind,
			.function = st->pool + l->function,
			.file = l->file ? st->pool + l->file : NULL,
			.line = l->line,
			.start_line = l->start_line,
			.module = l->module,
			.offset = l->offset,
			.symbol_offset = l->symbol_offset,
		};
	}
	/* Without lines a native frame is what its symbol table names: the
	 * outermost record, as the symbolizer gives it. */
	if (!lines && out[0].kind == FRAME_KIND_NATIVE) {
		out[0].file = NULL;
		out[0].line = out[0].start_line = 0;
		return 1;
	}
	return n;
}

bool persist_describe_module(const struct persist *ps, uint16_t module, const char **ret_path,
			     const char **ret_build_id)
{
	const struct stored *st = &ps->stored;
	size_t i = (size_t)module - FRAME_MODULE_RESTORED_FIRST;

	if (module < FRAME_MODULE_RESTORED_FIRST || i >= st->n_modules)
		return false;
	*ret_path = st->pool + st->modules[i].path;
	*ret_build_id = st->pool + st->modules[i].build_id;
	return true;
}

/* Frees what the restored frames' table holds for frames no stack names
 * any more (their windows expired or were evicted): all of it when none
 * is named, else a compacted copy once the frames named fell to half of
 * what they were at the last fit, so that the stacks are visited
 * O(log n) times while the history drains.  Tells a what is left. */
static void trim_stored(struct persist *ps, struct aggregator *a)
{
	struct stacktab *stacks = aggregator_stacks(a);
	size_t refs = stacktab_stored_frames(stacks);
	_cleanup_free_ uint64_t *used = NULL;

	if (!ps->stored.n_frames || refs > ps->stored_refs / 2)
		return;
	if (!refs) {
		stored_done(&ps->stored);
		ps->stats.restored_table_freed++;
	} else if ((used = calloc((ps->stored.n_frames + 63) / 64, sizeof(*used)))) {
		stacktab_mark_stored(stacks, used, ps->stored.n_frames);
		if (stored_compact(&ps->stored, used) == 0)
			ps->stats.restored_table_compacted++;
	}
	ps->stored_refs = refs;
	aggregator_set_restored_table_bytes(a, stored_memory(&ps->stored));
}

/* ---- the directory ---- */

int persist_open(const struct persist_opts *o, struct persist **ret)
{
	_cleanup_free_ struct persist *ps = calloc(1, sizeof(*ps));
	struct stat st;
	int r;

	if (!ps)
		return -ENOMEM;
	ps->dirfd = ps->lockfd = -1;
	snprintf(ps->dir, sizeof(ps->dir), "%s", o->dir);
	ps->max_bytes = o->max_bytes ? o->max_bytes : PERSIST_DEFAULT_MAX_BYTES;
	ps->retention_s = o->retention_s;
	/* the segments that can hold windows within the retention, the one
	 * being written included, fit in max_bytes together */
	ps->segment_budget = ps->max_bytes / (MAX(ps->retention_s / PERSIST_SEGMENT_S, 1) + 1);
	r = statefile_boot_id(ps->boot_id);
	if (r < 0)
		return r;
	if (mkdir(o->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	ps->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ps->dirfd < 0)
		return -errno;
	r = -EPERM;
	if (fstat(ps->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022))
		goto fail;
	ps->lockfd = openat(ps->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ps->lockfd < 0) {
		r = -errno;
		goto fail;
	}
	if (flock(ps->lockfd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	r = o->read_only ? 0 : state_writer_new(ps->dirfd, PERSIST_MAX_QUEUED_BYTES, &ps->writer);
	if (r < 0)
		goto fail;
	ps->next_seq = 1;
	*ret = ps;
	ps = NULL;
	return 0;
fail:
	if (ps->lockfd >= 0)
		close(ps->lockfd);
	close(ps->dirfd);
	return r;
}

struct persist *persist_free(struct persist *ps)
{
	if (!ps)
		return NULL;
	state_writer_free(ps->writer);
	u64map_done(&ps->frames_written);
	u64map_done(&ps->strings_written);
	u64map_done(&ps->owner_bytes);
	stored_done(&ps->stored);
	free(ps->segments);
	close(ps->lockfd);
	close(ps->dirfd);
	free(ps);
	return NULL;
}

const char *persist_dir(const struct persist *ps)
{
	return ps->dir;
}

static struct segment *segment_add(struct persist *ps, uint64_t seq, uint64_t bytes)
{
	struct segment *s;

	s = realloc(ps->segments, (ps->n_segments + 1) * sizeof(*s));
	if (!s)
		return NULL;
	ps->segments = s;
	s = &ps->segments[ps->n_segments++];
	*s = (struct segment){ .seq = seq, .bytes = bytes };
	return s;
}

/* Renames name aside as name.why, so that it is not read again; kept for
 * a look by hand. */
static void move_aside(struct persist *ps, const char *name, const char *why, const char *what)
{
	char to[NAME_MAX + 1];

	snprintf(to, sizeof(to), "%s.%s", name, why);
	if (renameat(ps->dirfd, name, ps->dirfd, to) < 0)
		(void)unlinkat(ps->dirfd, name, 0);
	ps->stats.files_moved_aside++;
	log_warning("State file %s/%s %s; moved aside to %s/%s.", ps->dir, name, what, ps->dir, to);
}

/* ---- restore ---- */

/* What one segment's records refer to while it is read. */
struct reading {
	struct persist *ps;
	struct aggregator *a;
	struct stacktab *stacks;
	uint64_t period_ns, now_s, file_period_ns;
	uint64_t rng;
	uint32_t *strings; /* string id -> pool offset */
	size_t n_strings, cap_strings;
	struct u64map frames;    /* file frame word -> restored frame word */
	struct u64map stacks_by; /* file stack id -> stack id (a reference) */
	struct u64map processes; /* pid ^ hash(start) -> struct process * */
	struct segment *seg;
	uint64_t *keys, *values;
	size_t cap_entries;
};

static bool string_of(struct reading *rd, uint64_t id, uint32_t *ret)
{
	if (id >= rd->n_strings)
		return false;
	*ret = rd->strings[id];
	return true;
}

static int read_string(struct reading *rd, struct scur *c)
{
	char buf[MAX_NAME + 1];
	uint32_t off;

	scur_str(c, buf, MAX_NAME);
	if (!scur_done(c))
		return -EBADMSG;
	if (grow((void **)&rd->strings, &rd->cap_strings, rd->n_strings + 1, sizeof(*rd->strings)) < 0 ||
	    pool_intern(&rd->ps->stored, buf, &off) < 0)
		return -ENOMEM;
	rd->strings[rd->n_strings++] = off;
	return 0;
}

static int read_frame(struct reading *rd, struct scur *c)
{
	struct stored *st = &rd->ps->stored;
	uint64_t word = scur_varint(c), n = scur_varint(c);
	uint32_t id;
	bool added;
	uint64_t *slot;

	if (c->bad || n < 1 || n > FRAME_MAX_INLINE)
		return -EBADMSG;
	if (grow((void **)&st->lines, &st->cap_lines, st->n_lines + n, sizeof(*st->lines)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct stored_line *l = &st->lines[st->n_lines + i];
		uint64_t kind = scur_varint(c), fn = scur_varint(c), file = scur_varint(c);
		uint64_t module_kind;
		uint32_t path, build_id;

		*l = (struct stored_line){ 0 };
		l->line = (uint32_t)scur_varint(c);
		l->start_line = (uint32_t)scur_varint(c);
		module_kind = scur_varint(c);
		l->offset = scur_varint(c);
		l->symbol_offset = scur_varint(c);
		if (c->bad || kind >= FRAME_KINDS || !string_of(rd, fn, &l->function) ||
		    (file && !string_of(rd, file - 1, &l->file)))
			return -EBADMSG;
		l->kind = (uint8_t)kind;
		if (module_kind == 1) {
			l->module = FRAME_MODULE_KERNEL;
		} else if (module_kind == 2) {
			if (!string_of(rd, scur_varint(c), &path) ||
			    !string_of(rd, scur_varint(c), &build_id))
				return -EBADMSG;
			l->module = stored_module(st, path, build_id);
		} else if (module_kind != 0) {
			return -EBADMSG;
		}
	}
	if (!scur_done(c))
		return -EBADMSG;
	if (stored_frame(st, n, &id) < 0)
		return -ENOMEM;
	slot = u64map_upsert(&rd->frames, word, &added);
	if (!slot)
		return -ENOMEM;
	*slot = frame_make(FRAME_MODULE_STORED, id);
	return 0;
}

/* A frame word of a STACK record, as this daemon's: raw, or a FRAME's. */
static bool frame_of(struct reading *rd, uint64_t word, uint64_t *ret)
{
	uint16_t module = frame_module(word);
	uint64_t *slot;

	if (module == FRAME_MODULE_NONE || module == FRAME_MODULE_SPECIAL) {
		*ret = word;
		return true;
	}
	slot = u64map_get(&rd->frames, word);
	if (!slot)
		return false;
	*ret = *slot;
	return true;
}

static int read_stack(struct reading *rd, struct scur *c)
{
	uint64_t frames[4 * PERFD_MAX_STACK_DEPTH];
	uint64_t file_id = scur_varint(c), depth = scur_varint(c), kdepth = scur_varint(c);
	uint64_t *slot;
	uint32_t id;
	bool added;
	int r;

	if (c->bad || depth < 1 || depth > ELEMENTSOF(frames) || kdepth > depth || file_id > UINT32_MAX)
		return -EBADMSG;
	for (size_t i = 0; i < depth; i++)
		if (!frame_of(rd, scur_varint(c), &frames[i]))
			c->bad = true;
	if (!scur_done(c))
		return -EBADMSG;
	r = stacktab_intern(rd->stacks, frames, (uint16_t)depth, (uint16_t)kdepth, &id);
	if (r < 0)
		return r;
	slot = u64map_upsert(&rd->stacks_by, file_id, &added);
	if (!slot) {
		stacktab_unref(rd->stacks, id);
		return -ENOMEM;
	}
	if (!added)
		stacktab_unref(rd->stacks, (uint32_t)*slot);
	*slot = id;
	return 0;
}

static uint64_t process_key(uint64_t pid, uint64_t start_ns)
{
	return pid ^ hash_u64(start_ns) << 22;
}

static int read_process(struct reading *rd, struct scur *c)
{
	char comm[PERFD_TASK_COMM_LEN], cgroup[MAX_PATH_READ + 1], runtime[80];
	struct process_restored r = { 0 };
	struct process *p;
	uint64_t *slot;
	bool added;

	r.pid = (uint32_t)scur_varint(c);
	r.start_time_ns = scur_varint(c);
	r.owner_uid = (uint32_t)scur_varint(c);
	r.ns_pid = (uint32_t)scur_varint(c);
	scur_str(c, comm, sizeof(comm) - 1);
	scur_str(c, cgroup, MAX_PATH_READ);
	scur_str(c, runtime, sizeof(runtime) - 1);
	r.kthread = scur_varint(c) != 0;
	r.exec_ns = scur_varint(c);
	r.first_sample_ns = scur_varint(c);
	r.last_sample_ns = scur_varint(c);
	r.total_samples = scur_varint(c);
	r.page_size = scur_varint(c);
	r.peak_rss_bytes = scur_varint(c);
	r.peak_rss_ns = scur_varint(c);
	r.hiwater_rss_bytes = scur_varint(c);
	r.memory_sampled_bytes = scur_varint(c);
	/* a field appended since the first version: where it is missing,
	 * every sample counts as the last owner's */
	r.owner_samples = c->p < c->end ? scur_varint(c) : r.total_samples;
	if (!scur_done(c) || !r.pid || r.pid > PROFILE_TID_MAX)
		return -EBADMSG;
	memcpy(r.comm, comm, sizeof(r.comm));
	r.cgroup = cgroup[0] ? cgroup : NULL;
	r.runtime = runtime;
	p = aggregator_restore_process(rd->a, &r);
	if (!p)
		return -ENOSPC;
	slot = u64map_upsert(&rd->processes, process_key(r.pid, r.start_time_ns), &added);
	if (!slot)
		return -ENOMEM;
	*slot = (uintptr_t)p;
	if (added)
		rd->ps->stats.processes_restored++;
	return 0;
}

static int read_window(struct reading *rd, struct scur *c)
{
	struct history_restored w = { 0 };
	uint64_t pid = scur_varint(c), start_ns = scur_varint(c), n;
	uint64_t *slot;
	struct process *p;
	uint64_t samples = 0;
	int r;

	w.start_s = scur_varint(c);
	w.span_s = (uint32_t)scur_varint(c);
	w.owner = (uint32_t)scur_varint(c);
	w.rss.page_size = (uint32_t)scur_varint(c);
	if (w.rss.page_size) {
		for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
			w.rss.last_pages[i] = scur_varint(c);
		w.rss.max_pages = scur_varint(c);
	}
	n = scur_varint(c);
	if (c->bad || n > MAX_WINDOW_ENTRIES || n > (uint64_t)(c->end - c->p) / 4 ||
	    !w.span_s || w.span_s > 3600)
		return -EBADMSG;
	slot = u64map_get(&rd->processes, process_key(pid, start_ns));
	p = slot ? (struct process *)(uintptr_t)*slot : NULL;
	if (!p || p->pid != pid || p->start_time_ns != start_ns)
		return -EBADMSG;
	if (n > rd->cap_entries) {
		uint64_t *k = realloc(rd->keys, n * sizeof(*k)), *v;

		if (!k)
			return -ENOMEM;
		rd->keys = k;
		v = realloc(rd->values, n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		rd->values = v;
		rd->cap_entries = n;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t stack = scur_varint(c), tid = scur_varint(c), kind = scur_varint(c);
		uint64_t value = scur_varint(c);
		uint64_t *id = u64map_get(&rd->stacks_by, stack);

		if (c->bad || !id || tid > PROFILE_TID_MAX || kind >= PROFILE_KINDS)
			return -EBADMSG;
		if (kind == PROFILE_KIND_CPU && rd->file_period_ns && rd->file_period_ns != rd->period_ns)
			value = profile_scale_value(value, rd->file_period_ns, rd->period_ns, &rd->rng);
		if (kind == PROFILE_KIND_CPU)
			samples += value;
		rd->keys[i] = profile_key((uint32_t)*id, (uint32_t)tid, (enum profile_kind)kind);
		rd->values[i] = value;
	}
	if (!scur_done(c))
		return -EBADMSG;
	rd->seg->newest_end_s = MAX(rd->seg->newest_end_s, w.start_s + w.span_s);
	if (w.start_s + w.span_s + rd->ps->retention_s <= rd->now_s) {
		rd->ps->stats.windows_skipped++;
		return 0;
	}
	w.keys = rd->keys;
	w.values = rd->values;
	w.n = n;
	r = aggregator_restore_window(rd->a, p, &w);
	if (r == -EINVAL) {
		rd->ps->stats.windows_skipped++;
		return 0;
	}
	if (r < 0)
		return r;
	rd->ps->stats.windows_restored++;
	rd->ps->stats.samples_restored += samples;
	return 0;
}

static int read_segment_record(struct reading *rd, struct scur *c)
{
	uint64_t unix_ns = scur_varint(c), mono_ns = scur_varint(c);

	(void)unix_ns;
	(void)mono_ns;
	rd->file_period_ns = scur_varint(c);
	return scur_done(c) ? 0 : -EBADMSG;
}

/* Reads one segment's records.  Returns 0, or -EBADMSG at a damaged
 * record (r->good: what was whole). */
static int read_records(struct reading *rd, struct statefile_reader *sr)
{
	for (;;) {
		struct scur c;
		uint8_t type;
		int r = statefile_next(sr, &type, &c);

		if (r <= 0)
			return r;
		switch (type) {
		case REC_SEGMENT:
			r = read_segment_record(rd, &c);
			break;
		case REC_STRING:
			r = read_string(rd, &c);
			break;
		case REC_FRAME:
			r = read_frame(rd, &c);
			break;
		case REC_STACK:
			r = read_stack(rd, &c);
			break;
		case REC_PROCESS:
			r = read_process(rd, &c);
			break;
		case REC_WINDOW:
			r = read_window(rd, &c);
			break;
		default:
			r = 0; /* a newer perfd's: skipped */
			break;
		}
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			rd->ps->stats.records_rejected++;
	}
}

static void reading_done(struct reading *rd)
{
	U64MAP_FOREACH(slot, &rd->stacks_by)
		stacktab_unref(rd->stacks, (uint32_t)slot->value);
	u64map_done(&rd->stacks_by);
	u64map_done(&rd->frames);
	u64map_done(&rd->processes);
	free(rd->strings);
	free(rd->keys);
	free(rd->values);
}

/* Reads a whole state file, at most max bytes. */
static int slurp(int dirfd, const char *name, uint64_t max, uint8_t **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	uint8_t *buf;
	size_t done = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		return -ENOMEM;
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* shrank since: what was read */
		done += (size_t)n;
	}
	*ret = buf;
	*ret_len = done;
	return 0;
}

static int seq_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* The segments in the directory, in order. */
static int list_segments(struct persist *ps, uint64_t **ret, size_t *ret_n)
{
	int fd = fcntl(ps->dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	uint64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		uint64_t seq;
		char tail;

		if (sscanf(e->d_name, "segment-%16" SCNx64 ".perfd%c", &seq, &tail) != 1 ||
		    strlen(e->d_name) != strlen("segment-0000000000000000.perfd") || !seq)
			continue;
		if (n == MAX_SEGMENTS || grow((void **)&seqs, &cap, n + 1, sizeof(*seqs)) < 0)
			break;
		seqs[n++] = seq;
	}
	closedir(d);
	qsort_safe(seqs, n, sizeof(*seqs), seq_cmp);
	*ret = seqs;
	*ret_n = n;
	return 0;
}

/* Cuts name back to its good part. */
static int truncate_tail(struct persist *ps, const char *name, size_t good)
{
	_cleanup_close_ int fd = openat(ps->dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)good) < 0)
		return -errno;
	return 0;
}

int persist_read_segment(struct persist *ps, struct aggregator *a, uint64_t seq,
			 const uint8_t *data, size_t len, uint64_t period_ns, uint64_t now_ns,
			 size_t *ret_good)
{
	struct reading rd = { .ps = ps, .a = a, .stacks = aggregator_stacks(a),
			      .period_ns = period_ns, .now_s = now_ns / NSEC_PER_SEC,
			      .rng = 0x9e3779b97f4a7c15ULL ^ seq };
	struct statefile_reader sr;
	uint8_t boot[16];
	int r;

	*ret_good = 0;
	r = statefile_open(&sr, data, len, boot);
	if (r < 0)
		return r;
	if (memcmp(boot, ps->boot_id, sizeof(boot)) != 0)
		return -ESTALE;
	rd.seg = segment_add(ps, seq, len);
	if (!rd.seg)
		return -ENOMEM;
	r = read_records(&rd, &sr);
	reading_done(&rd);
	*ret_good = sr.good;
	if (r == -EBADMSG) {
		rd.seg->bytes = sr.good;
		return -EILSEQ;
	}
	return r;
}

void persist_restore(struct persist *ps, struct aggregator *a, uint64_t period_ns, uint64_t now_ns)
{
	uint64_t started = now_monotonic_ns();
	_cleanup_free_ uint64_t *seqs = NULL;
	size_t n = 0;

	if (list_segments(ps, &seqs, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ uint8_t *data = NULL;
		char name[64];
		size_t len = 0, good;
		int r;

		ps->next_seq = seqs[i] + 1;
		state_segment_name(seqs[i], name, sizeof(name));
		r = slurp(ps->dirfd, name, ps->max_bytes, &data, &len);
		if (r < 0) {
			move_aside(ps, name, "unreadable", r == -EFBIG ? "is bigger than --state-max-bytes" :
							   "could not be read as a file of perfd's");
			continue;
		}
		r = persist_read_segment(ps, a, seqs[i], data, len, period_ns, now_ns, &good);
		if (r == -EPROTONOSUPPORT) {
			move_aside(ps, name, "unsupported", "is of another version of perfd");
		} else if (r == -EBADMSG) {
			move_aside(ps, name, "corrupt", "is not a perfd state file, or its header is damaged");
		} else if (r == -ESTALE) {
			move_aside(ps, name, "previous-boot",
				   "is from an earlier boot (its times do not apply to this one)");
		} else if (r == -ENOMEM) {
			log_warning("Out of memory reading the state directory %s; what is left of it is not read.",
				    ps->dir);
			break;
		} else if (r == -EILSEQ) {
			ps->stats.torn_bytes += len - good;
			if (i + 1 == n) {
				/* the tail a crash tore, in the last segment written */
				log_info("State file %s/%s ends in a partly written record; its %zu bytes are dropped.",
					 ps->dir, name, len - good);
				(void)truncate_tail(ps, name, good);
			} else {
				move_aside(ps, name, "corrupt", "is damaged; what came before the damage was read");
				ps->n_segments--;
			}
		}
	}
	/* inside the store's memory limit, which the restore is made to fit */
	ps->stored_refs = stacktab_stored_frames(aggregator_stacks(a));
	aggregator_set_restored_table_bytes(a, stored_memory(&ps->stored));
	aggregator_restored(a, now_ns);
	trim_stored(ps, a);
	ps->stats.restore_ms = (now_monotonic_ns() - started) / 1000000;
	if (ps->stats.windows_restored)
		log_info("Restored %" PRIu64 " windows of %" PRIu64 " processes from %s in %" PRIu64 " ms.",
			 ps->stats.windows_restored, ps->stats.processes_restored, ps->dir,
			 ps->stats.restore_ms);
}

/* ---- flush ---- */

/* What one flush writes, in order, into one buffer. */
struct writing {
	struct persist *ps;
	struct aggregator *a;
	struct stacktab *stacks;
	const struct persist_names *names;
	uint64_t period_ns, now_ns;
	struct sbuf buf;
	bool final;
	/* a window's entries, gathered before its record */
	uint64_t *keys, *values;
	size_t n, cap;
	uint64_t windows_in_buf; /* what a refusal of buf loses */
	bool process_written;    /* of the process flush_process is at */
	uint64_t until_ns;       /* PERSIST_FLUSH_SLICE_NS: then the rest waits */
	bool wrote, cut;
	int error;
};

/* Starts a new segment (the next record goes to a new file). */
static void segment_start(struct writing *wr)
{
	struct persist *ps = wr->ps;
	size_t at;

	ps->seq = ps->next_seq++;
	ps->seq_started_s = wr->now_ns / NSEC_PER_SEC;
	u64map_done(&ps->frames_written);
	u64map_done(&ps->strings_written);
	ps->n_strings = 0;
	u64map_done(&ps->owner_bytes);
	if (!segment_add(ps, ps->seq, 0)) {
		wr->error = -ENOMEM;
		return;
	}
	statefile_put_header(&wr->buf, ps->boot_id);
	at = statefile_begin_record(&wr->buf, REC_SEGMENT);
	sbuf_put_varint(&wr->buf, (uint64_t)time(NULL) * NSEC_PER_SEC);
	sbuf_put_varint(&wr->buf, wr->now_ns);
	sbuf_put_varint(&wr->buf, wr->period_ns);
	statefile_end_record(&wr->buf, at);
}

static struct segment *current(struct persist *ps)
{
	return ps->n_segments && ps->segments[ps->n_segments - 1].seq == ps->seq ?
		       &ps->segments[ps->n_segments - 1] : NULL;
}

/* The id of s in this segment, writing its STRING record first. */
static uint64_t string_id(struct writing *wr, const char *s)
{
	struct persist *ps = wr->ps;
	size_t len = s ? strlen(s) : 0;
	uint64_t h = hash_text(s ? s : "", len);
	bool added;
	uint64_t *slot = u64map_upsert(&ps->strings_written, h, &added);
	size_t at;

	if (!slot) {
		wr->error = -ENOMEM;
		return 0;
	}
	if (!added)
		return *slot - 1;
	*slot = ++ps->n_strings;
	at = statefile_begin_record(&wr->buf, REC_STRING);
	sbuf_put_str(&wr->buf, len > MAX_NAME ? "[name too long]" : s);
	statefile_end_record(&wr->buf, at);
	return *slot - 1;
}

/* Writes frame's FRAME record unless this segment has it. */
static void write_frame(struct writing *wr, uint64_t frame)
{
	struct persist *ps = wr->ps;
	struct frame_record rec[FRAME_MAX_INLINE];
	uint64_t fn[FRAME_MAX_INLINE], file[FRAME_MAX_INLINE];
	uint64_t path[FRAME_MAX_INLINE], build_id[FRAME_MAX_INLINE];
	uint8_t module_kind[FRAME_MAX_INLINE];
	char scratch[PATH_MAX + 64];
	uint16_t module = frame_module(frame);
	bool added;
	uint64_t *slot;
	size_t n, at;

	if (module == FRAME_MODULE_NONE || module == FRAME_MODULE_SPECIAL)
		return;
	slot = u64map_upsert(&ps->frames_written, frame, &added);
	if (!slot) {
		wr->error = -ENOMEM;
		return;
	}
	if (!added)
		return;
	*slot = 1;
	/* Without source lines: opening a binary's DWARF (decompressing it,
	 * indexing its line table) takes up to seconds, and the first flush
	 * meets every binary of every process sampled; symbol tables are the
	 * cheap part, the one every query reads anyway. */
	n = wr->names->resolve(wr->names->ctx, frame, false, rec, ELEMENTSOF(rec), scratch,
			       sizeof(scratch));
	n = MAX(MIN(n, ELEMENTSOF(rec)), (size_t)1);
	/* strings first: the resolver's are valid until its next call, and
	 * the describer's are the module's */
	for (size_t i = 0; i < n; i++) {
		const char *p, *b;

		fn[i] = string_id(wr, rec[i].function);
		file[i] = rec[i].file ? string_id(wr, rec[i].file) + 1 : 0;
		module_kind[i] = 0;
		if (rec[i].module == FRAME_MODULE_KERNEL) {
			module_kind[i] = 1;
		} else if (rec[i].module != FRAME_MODULE_NONE &&
			   wr->names->describe(wr->names->ctx, rec[i].module, &p, &b)) {
			module_kind[i] = 2;
			path[i] = string_id(wr, p);
			build_id[i] = string_id(wr, b);
		}
	}
	at = statefile_begin_record(&wr->buf, REC_FRAME);
	sbuf_put_varint(&wr->buf, frame);
	sbuf_put_varint(&wr->buf, n);
	for (size_t i = 0; i < n; i++) {
		sbuf_put_varint(&wr->buf, rec[i].kind);
		sbuf_put_varint(&wr->buf, fn[i]);
		sbuf_put_varint(&wr->buf, file[i]);
		sbuf_put_varint(&wr->buf, rec[i].line);
		sbuf_put_varint(&wr->buf, rec[i].start_line);
		sbuf_put_varint(&wr->buf, module_kind[i]);
		sbuf_put_varint(&wr->buf, rec[i].offset);
		sbuf_put_varint(&wr->buf, rec[i].symbol_offset);
		if (module_kind[i] == 2) {
			sbuf_put_varint(&wr->buf, path[i]);
			sbuf_put_varint(&wr->buf, build_id[i]);
		}
	}
	statefile_end_record(&wr->buf, at);
	ps->stats.frames_written++;
}

/* Writes the stack's STACK record (and its frames') unless this segment
 * has it. */
static void write_stack(struct writing *wr, uint32_t id)
{
	const struct stack *s = stacktab_get(wr->stacks, id);
	size_t at;

	if (!s || s->mark == (uint32_t)wr->ps->seq)
		return;
	for (size_t i = 0; i < s->depth; i++)
		write_frame(wr, s->frames[i]);
	at = statefile_begin_record(&wr->buf, REC_STACK);
	sbuf_put_varint(&wr->buf, id);
	sbuf_put_varint(&wr->buf, s->depth);
	sbuf_put_varint(&wr->buf, s->kernel_depth);
	for (size_t i = 0; i < s->depth; i++)
		sbuf_put_varint(&wr->buf, s->frames[i]);
	statefile_end_record(&wr->buf, at);
	stacktab_set_mark(wr->stacks, id, (uint32_t)wr->ps->seq);
	wr->ps->stats.stacks_written++;
}

static void write_process(struct writing *wr, struct process *p)
{
	size_t at = statefile_begin_record(&wr->buf, REC_PROCESS);
	struct sbuf *b = &wr->buf;

	sbuf_put_varint(b, p->pid);
	sbuf_put_varint(b, p->start_time_ns);
	sbuf_put_varint(b, p->owner_uid);
	sbuf_put_varint(b, p->ns_pid);
	sbuf_put_str(b, p->comm);
	sbuf_put_str(b, p->cgroup && strlen(p->cgroup) <= MAX_PATH_READ ? p->cgroup : "");
	sbuf_put_str(b, p->runtime);
	sbuf_put_varint(b, p->kthread);
	sbuf_put_varint(b, p->exec_ns);
	sbuf_put_varint(b, p->first_sample_ns);
	sbuf_put_varint(b, p->last_sample_ns);
	sbuf_put_varint(b, p->total_samples);
	sbuf_put_varint(b, p->page_size);
	sbuf_put_varint(b, p->peak_rss_bytes);
	sbuf_put_varint(b, p->peak_rss_ns);
	sbuf_put_varint(b, p->hiwater_rss_bytes);
	sbuf_put_varint(b, p->memory_sampled_bytes);
	sbuf_put_varint(b, p->owner_samples);
	statefile_end_record(b, at);
	p->persisted_segment = wr->ps->seq;
	wr->process_written = true;
	wr->ps->stats.processes_written++;
}

static int gather(void *userdata, uint64_t key, uint64_t value)
{
	struct writing *wr = userdata;

	if (wr->n == wr->cap) {
		size_t cap = wr->cap ? wr->cap * 2 : 256;
		uint64_t *k = realloc(wr->keys, cap * sizeof(*k)), *v;

		if (!k)
			return -ENOMEM;
		wr->keys = k;
		v = realloc(wr->values, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		wr->values = v;
		wr->cap = cap;
	}
	wr->keys[wr->n] = key;
	wr->values[wr->n++] = value;
	return 0;
}

/* Whether the owner of w may write it to this segment: while a quarter of
 * the segment's budget is free, any owner; past that only an owner that
 * has not yet written its share, the budget divided among the owners that
 * wrote to the segment (itself counted), so that the last quarter is left
 * to the owners that wrote little; none once the budget is spent.  A
 * refusal is counted by cause.  What is checked is what was written
 * before: one window's bytes are the most by which an owner or the
 * segment goes past. */
static bool owner_may_write(struct writing *wr, const struct history_window *w)
{
	struct persist *ps = wr->ps;
	uint64_t *mine = u64map_get(&ps->owner_bytes, w->owner);
	size_t owners = ps->owner_bytes.count + !mine;
	struct segment *seg = current(ps);
	uint64_t used = (seg ? seg->bytes : 0) + wr->buf.len;

	if (used >= ps->segment_budget) {
		ps->stats.windows_refused_segment_full++;
		return false;
	}
	if (used >= ps->segment_budget - ps->segment_budget / 4 && mine &&
	    *mine >= ps->segment_budget / owners) {
		ps->stats.windows_refused_owner_share++;
		return false;
	}
	return true;
}

/* Counts len bytes as w's owner's in this segment. */
static void owner_wrote(struct writing *wr, const struct history_window *w, size_t len)
{
	struct persist *ps = wr->ps;
	bool added;
	uint64_t *mine = u64map_upsert(&ps->owner_bytes, w->owner, &added);

	if (!mine)
		return; /* out of memory: that owner is not held back */
	*mine += len; /* an owner new to the segment starts at 0 */
}

static void write_window(struct writing *wr, struct process *p, const struct history_window *w)
{
	struct sbuf *b = &wr->buf;
	size_t at;

	wr->n = 0;
	if (history_window_foreach(w, gather, wr) < 0) {
		wr->error = -ENOMEM;
		return;
	}
	/* once a segment for its definition, and once a flush for its counts
	 * (the last record read back says them) */
	if (p->persisted_segment != wr->ps->seq || !wr->process_written)
		write_process(wr, p);
	for (size_t i = 0; i < wr->n; i++)
		write_stack(wr, profile_key_stack(wr->keys[i]));
	at = statefile_begin_record(b, REC_WINDOW);
	sbuf_put_varint(b, p->pid);
	sbuf_put_varint(b, p->start_time_ns);
	sbuf_put_varint(b, w->start_s);
	sbuf_put_varint(b, w->span_s);
	sbuf_put_varint(b, w->owner);
	sbuf_put_varint(b, w->rss.page_size);
	if (w->rss.page_size) {
		for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
			sbuf_put_varint(b, w->rss.last_pages[i]);
		sbuf_put_varint(b, w->rss.max_pages);
	}
	sbuf_put_varint(b, wr->n);
	for (size_t i = 0; i < wr->n; i++) {
		sbuf_put_varint(b, profile_key_stack(wr->keys[i]));
		sbuf_put_varint(b, profile_key_tid(wr->keys[i]));
		sbuf_put_varint(b, profile_key_kind(wr->keys[i]));
		sbuf_put_varint(b, wr->values[i]);
	}
	statefile_end_record(b, at);
	p->persisted_end_s = w->start_s + w->span_s;
	if (current(wr->ps))
		current(wr->ps)->newest_end_s = MAX(current(wr->ps)->newest_end_s, p->persisted_end_s);
	wr->ps->stats.windows_written++;
	wr->windows_in_buf++;
}

/* Hands the buffer to the writer; a refusal cuts the segment short (the
 * next flush starts another, with every definition again). */
static void hand_over(struct writing *wr)
{
	struct persist *ps = wr->ps;
	struct segment *seg = current(ps);
	size_t len = wr->buf.len;

	if (!len)
		return;
	if (wr->buf.failed || !state_writer_append(ps->writer, ps->seq, &wr->buf)) {
		sbuf_done(&wr->buf);
		ps->seq = 0;
		ps->stats.windows_unwritten += wr->windows_in_buf;
		ps->stats.windows_written -= wr->windows_in_buf;
		wr->windows_in_buf = 0;
		return;
	}
	wr->windows_in_buf = 0;
	if (seg)
		seg->bytes += len;
}

/* Whether a name that w's record would write to this segment (its frames
 * not written yet) waits for a table being built off the loop
 * (persist_names.pending, which starts building it): a frame goes to disk
 * named as it is then, for good.  Asks of every such frame, so that each
 * table is started at once. */
static bool names_pending(struct writing *wr, const struct history_window *w)
{
	struct persist *ps = wr->ps;
	bool pending = false;

	wr->n = 0;
	if (!wr->names->pending || history_window_foreach(w, gather, wr) < 0)
		return false;
	for (size_t i = 0; i < wr->n; i++) {
		const struct stack *s = stacktab_get(wr->stacks, profile_key_stack(wr->keys[i]));

		if (!s || s->mark == (uint32_t)ps->seq)
			continue;
		for (size_t k = 0; k < s->depth; k++) {
			uint16_t module = frame_module(s->frames[k]);

			if (module != FRAME_MODULE_NONE && module != FRAME_MODULE_SPECIAL &&
			    !u64map_get(&ps->frames_written, s->frames[k]) &&
			    wr->names->pending(wr->names->ctx, s->frames[k], false))
				pending = true;
		}
	}
	return pending;
}

static void flush_process(struct process *p, void *userdata)
{
	struct writing *wr = userdata;
	struct history_iter it;
	struct history_window w;
	size_t at;

	if (wr->error)
		return;
	if (!wr->final && p->history.log.end_s <= p->persisted_end_s)
		return;
	if (wr->cut || (!wr->final && wr->wrote && now_monotonic_ns() >= wr->until_ns)) {
		wr->cut = true; /* this one and the rest at the next flush */
		return;
	}
	wr->wrote = true;
	wr->process_written = false;
	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w) && !wr->error) {
		if (w.start_s < p->persisted_end_s)
			continue;
		if (!w.sealed && !wr->final)
			break;
		if (!wr->ps->seq)
			segment_start(wr);
		if (wr->error)
			break;
		/* it and the process's later windows wait for their names, a
		 * while at most; at the last flush nothing waits */
		if (!wr->final && wr->now_ns / NSEC_PER_SEC < w.start_s + w.span_s + PERSIST_NAMES_WAIT_S &&
		    names_pending(wr, &w)) {
			wr->ps->stats.windows_waited_for_names++;
			break;
		}
		if (!owner_may_write(wr, &w)) {
			/* dropped from the disk, kept in memory */
			p->persisted_end_s = w.start_s + w.span_s;
			continue;
		}
		at = wr->buf.len;
		write_window(wr, p, &w);
		owner_wrote(wr, &w, wr->buf.len - at);
	}
	/* no buffer of one flush grows without bound */
	if (wr->buf.len >= (4u << 20))
		hand_over(wr);
}

/* Deletes segments past the retention, and the oldest past max_bytes. */
static void prune(struct persist *ps, uint64_t now_s)
{
	uint64_t total = 0;
	size_t keep = 0;

	for (size_t i = 0; i < ps->n_segments; i++)
		total += ps->segments[i].bytes;
	for (size_t i = 0; i < ps->n_segments; i++) {
		struct segment *s = &ps->segments[i];
		bool is_current = s->seq == ps->seq;
		bool old = s->newest_end_s + ps->retention_s <= now_s;

		if (!is_current && (old || total > ps->max_bytes)) {
			state_writer_remove(ps->writer, s->seq);
			total -= s->bytes;
			ps->stats.segments_removed++;
			continue;
		}
		ps->segments[keep++] = *s;
	}
	ps->n_segments = keep;
}

void persist_forget_module(struct persist *ps, uint16_t module)
{
	if (module > FRAME_MODULE_LAST)
		return;
	ps->forgotten[module / 64] |= 1ULL << (module % 64);
	ps->any_forgotten = true;
}

/* Drops from frames_written the frames of the modules given back. */
static void forget_modules(struct persist *ps)
{
	struct u64map kept;
	bool added;

	if (!ps->any_forgotten)
		return;
	u64map_init(&kept);
	U64MAP_FOREACH(slot, &ps->frames_written) {
		uint16_t m = frame_module(slot->key);
		uint64_t *to;

		if (m <= FRAME_MODULE_LAST && (ps->forgotten[m / 64] >> (m % 64) & 1))
			continue;
		to = u64map_upsert(&kept, slot->key, &added);
		if (!to) {
			/* out of memory: a new segment writes every frame again */
			u64map_done(&kept);
			ps->seq = 0;
			break;
		}
		*to = 1;
	}
	if (ps->seq) {
		u64map_done(&ps->frames_written);
		ps->frames_written = kept;
	}
	memset(ps->forgotten, 0, sizeof(ps->forgotten));
	ps->any_forgotten = false;
}

void persist_flush(struct persist *ps, struct aggregator *a, const struct persist_names *names,
		   uint64_t period_ns, uint64_t now_ns, bool final)
{
	struct writing wr = { .ps = ps, .a = a, .stacks = aggregator_stacks(a), .names = names,
			      .period_ns = period_ns, .now_ns = now_ns, .final = final };

	uint64_t t0 = now_monotonic_ns();
	double ms;

	if (!ps->writer)
		return; /* read_only */
	wr.until_ns = t0 + PERSIST_FLUSH_SLICE_NS;

	/* every PERSIST_FLUSH_S, not at every call: each batch wakes the
	 * writer and syncs the disk, which a daemon at rest should not do
	 * every second */
	if (!final && now_ns / NSEC_PER_SEC < ps->next_flush_s)
		return;
	ps->next_flush_s = now_ns / NSEC_PER_SEC + PERSIST_FLUSH_S;
	ps->stats.flushes++;
	if (ps->seq && now_ns / NSEC_PER_SEC >= ps->seq_started_s + PERSIST_SEGMENT_S)
		ps->seq = 0; /* the next record starts a new segment */
	if (ps->seq)
		forget_modules(ps);
	memset(ps->forgotten, 0, sizeof(ps->forgotten));
	ps->any_forgotten = false;
	aggregator_foreach_process(a, flush_process, &wr);
	if (wr.error) {
		/* out of memory part way: the buffer may hold a record that
		 * names what it could not write; its windows are lost, counted,
		 * and the next flush starts a new segment */
		wr.buf.failed = true;
	}
	hand_over(&wr);
	free(wr.keys);
	free(wr.values);
	sbuf_done(&wr.buf);
	if (wr.cut) { /* the rest at the next maintenance */
		ps->next_flush_s = now_ns / NSEC_PER_SEC + 1;
		ps->stats.flushes_cut++;
	}
	prune(ps, now_ns / NSEC_PER_SEC);
	trim_stored(ps, a);
	ms = (now_monotonic_ns() - t0) / 1e6;
	ps->stats.longest_flush_ms = MAX(ps->stats.longest_flush_ms, ms);
	if (final)
		state_writer_sync(ps->writer);
}

void persist_get_stats(struct persist *ps, struct persist_stats *ret)
{
	struct state_writer_stats ws;

	*ret = ps->stats;
	ret->segments = ps->n_segments;
	ret->disk_bytes = 0;
	for (size_t i = 0; i < ps->n_segments; i++)
		ret->disk_bytes += ps->segments[i].bytes;
	ret->restored_frames = ps->stored.n_frames;
	ret->restored_bytes = stored_memory(&ps->stored);
	if (!ps->writer)
		return;
	state_writer_get_stats(ps->writer, &ws);
	ret->bytes_written = ws.bytes_written;
	ret->syncs = ws.syncs;
	ret->write_errors = ws.write_errors;
	ret->appends_refused = ws.refused;
	ret->last_write_error = ws.last_error;
}
