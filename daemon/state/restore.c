/* SPDX-License-Identifier: MIT */
/* restore.c - every segment of this boot read back into the store at
 * start (persist.h, persist_internal.h); nothing in the directory trusted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/kindtab.h"
#include "base/log.h"
#include "base/u64map.h"
#include "perfd/macro.h"
#include "profile/stacktab.h"
#include "state/statefile.h"
#include "state/writer.h"
#include "state/persist_internal.h"

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
	if (array_grow((void **)&rd->strings, &rd->cap_strings, rd->n_strings + 1, sizeof(*rd->strings), 64) < 0 ||
	    stored_intern(&rd->ps->stored, buf, &off) < 0)
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
	if (array_grow((void **)&st->lines, &st->cap_lines, st->n_lines + n, sizeof(*st->lines), 64) < 0)
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
		if (kind_in_periods((int)kind) && rd->file_period_ns && rd->file_period_ns != rd->period_ns)
			value = profile_scale_value(value, rd->file_period_ns, rd->period_ns, &rd->rng);
		if (kind_counts_samples((int)kind))
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
		if (n == MAX_SEGMENTS || array_grow((void **)&seqs, &cap, n + 1, sizeof(*seqs), 64) < 0)
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
	rd.seg = persist_segment_add(ps, seq, len);
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
			persist_move_aside(ps, name, "unreadable", r == -EFBIG ? "is bigger than --state-max-bytes" :
							   "could not be read as a file of perfd's");
			continue;
		}
		r = persist_read_segment(ps, a, seqs[i], data, len, period_ns, now_ns, &good);
		if (r == -EPROTONOSUPPORT) {
			persist_move_aside(ps, name, "unsupported", "is of another version of perfd");
		} else if (r == -EBADMSG) {
			persist_move_aside(ps, name, "corrupt", "is not a perfd state file, or its header is damaged");
		} else if (r == -ESTALE) {
			persist_move_aside(ps, name, "previous-boot",
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
				persist_move_aside(ps, name, "corrupt", "is damaged; what came before the damage was read");
				ps->n_segments--;
			}
		}
	}
	/* inside the store's memory limit, which the restore is made to fit */
	ps->stored_refs = stacktab_stored_frames(aggregator_stacks(a));
	aggregator_set_restored_table_bytes(a, stored_memory(&ps->stored));
	aggregator_restored(a, now_ns);
	stored_trim(ps, a);
	ps->stats.restore_ms = (now_monotonic_ns() - started) / 1000000;
	if (ps->stats.windows_restored)
		log_info("Restored %" PRIu64 " windows of %" PRIu64 " processes from %s in %" PRIu64 " ms.",
			 ps->stats.windows_restored, ps->stats.processes_restored, ps->dir,
			 ps->stats.restore_ms);
}
