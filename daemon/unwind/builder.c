/* SPDX-License-Identifier: MIT */
/* builder.c - see builder.h for the design and the ownership rules. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "perfd/macro.h"
#include "unwind/builder.h"

#define UPLOAD_CHUNK 8192

/* The two lanes (see builder.h): a job that takes ~100 ms or more is big.
 * A build's time goes with its call-frame information (unwind_table_cfi_bytes,
 * not the file's size: libpython 3.13 with its debug information is a
 * 30 MiB file around 351 KiB of .eh_frame), at 3-8 MiB a second here:
 * libLLVM's 4.8 MiB of .eh_frame in 1.5 s, libpython's in 45 ms, so 1 MiB
 * takes 130-300 ms.  An upload writes ~30 MiB of rows a second (libLLVM's
 * 12 MiB in 0.4 s): from 4 MiB, ~130 ms. */
#define BIG_BUILD_BYTES (1u << 20)
#define BIG_UPLOAD_BYTES (4u << 20)

/* Two lanes: one takes only small jobs. */
#define LANES 2
#define SMALL_LANES 1

struct builder {
	int rows_fd;
	uint64_t max_build_ns;
	struct offload *offload;
};

void build_job_free(struct build_job *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	unwind_table_free(j->table);
	free(j->segs);
	free(j);
}

static struct build_job *job_of(struct offload_job *o)
{
	return (struct build_job *)((char *)o - offsetof(struct build_job, job));
}

static void offload_job_free(struct offload_job *o)
{
	build_job_free(job_of(o));
}

static int read_segments(int fd, struct build_job *j)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	size_t n;
	int r;

	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOEXEC;
	j->segs = calloc(n ? n : 1, sizeof(*j->segs));
	if (!j->segs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		j->segs[j->n_segs++] = (struct unwind_segment){ ph.p_offset, ph.p_vaddr, ph.p_filesz,
								(ph.p_flags & PF_X) != 0 };
	}
	return 0;
}

int bpf_array_upload(int map_fd, uint32_t first, const void *values, size_t value_size, size_t n)
{
	_cleanup_free_ uint32_t *keys = malloc(MIN(n, (size_t)UPLOAD_CHUNK) * sizeof(uint32_t));

	if (!keys && n)
		return -ENOMEM;
	for (size_t done = 0; done < n;) {
		uint32_t count = MIN(n - done, (size_t)UPLOAD_CHUNK);
		const char *v = (const char *)values + done * value_size;

		for (uint32_t i = 0; i < count; i++)
			keys[i] = first + done + i;
		if (bpf_map_update_batch(map_fd, keys, v, &count, NULL) < 0) {
			for (uint32_t i = 0; i < count; i++)
				if (bpf_map_update_elem(map_fd, &keys[i], v + i * value_size, BPF_ANY) < 0)
					return negative_errno();
			count = MIN(n - done, (size_t)UPLOAD_CHUNK);
		}
		done += count;
	}
	return 0;
}

static void upload_rows(struct build_job *j)
{
	uint64_t t0 = now_monotonic_ns();

	j->r = bpf_array_upload(j->rows_fd, j->rows_first, j->table->rows, sizeof(*j->table->rows),
				j->table->n_rows);
	j->upload_ns = now_monotonic_ns() - t0;
}

static void build(struct build_job *j)
{
	uint64_t t0 = now_monotonic_ns();
	const struct unwind_table_limits limits = {
		.max_cfi_bytes = BUILDER_MAX_CFI_BYTES,
		.cpu_ns = j->max_build_ns,
		.cancel = j->job.cancel,
	};

	j->r = unwind_table_build(j->fd, &limits, &j->table);
	if (j->r == 0)
		j->r = read_segments(j->fd, j);
	if (j->r < 0) {
		j->table = unwind_table_free(j->table);
		free(j->segs);
		j->segs = NULL;
		j->n_segs = 0;
	}
	close(j->fd);
	j->fd = -1;
	j->build_ns = now_monotonic_ns() - t0;
}

static bool big(const struct build_job *j)
{
	return j->weight >= (j->stage == BUILD_STAGE_BUILD ? BIG_BUILD_BYTES : BIG_UPLOAD_BYTES);
}

/* On a lane's thread.  A build is weighed first, here (its section
 * headers are the file's, and a file system need not answer the loop):
 * a small one is built at once, on whichever lane took it; a big one goes
 * back to the loop to be queued for the lanes that take big jobs
 * (builder_take_done), even from one of them: a job does not know its
 * lane, and the round trip is one turn of the loop. */
static void run(struct offload_job *o)
{
	struct build_job *j = job_of(o);

	if (j->stage == BUILD_STAGE_UPLOAD) {
		upload_rows(j);
		return;
	}
	if (!j->weighed) {
		j->weight = unwind_table_cfi_bytes(j->fd);
		j->weighed = true;
		if (big(j))
			return;
	}
	build(j);
}

int builder_new(int rows_fd, uint64_t max_build_ns, struct builder **ret)
{
	struct builder *b = calloc(1, sizeof(*b));
	int r;

	if (!b)
		return -ENOMEM;
	b->rows_fd = rows_fd;
	b->max_build_ns = max_build_ns ? max_build_ns : BUILDER_MAX_BUILD_NS;
	r = offload_new(&(struct offload_opts){ .lanes = LANES, .small_lanes = SMALL_LANES,
						.background = true, .take_back = true,
						.name = "perfd-cfi" },
			&b->offload);
	if (r < 0) {
		free(b);
		return r;
	}
	*ret = b;
	return 0;
}

struct builder *builder_free(struct builder *b)
{
	if (!b)
		return NULL;
	offload_free(b->offload);
	free(b);
	return NULL;
}

/* Queues j first, weighed for its lane. */
static void queue(struct builder *b, struct build_job *j)
{
	j->job.key = j->key;
	j->job.big = big(j);
	j->job.run = run;
	j->job.free = offload_job_free;
	/* an unbounded pool refuses only after offload_finish, never called
	 * on this one (offload_free stops it) */
	(void)offload_submit(b->offload, &j->job);
}

void builder_bump(struct builder *b, uint64_t key)
{
	offload_bump(b->offload, key);
}

int builder_submit(struct builder *b, uint64_t key, int fd)
{
	struct build_job *j = calloc(1, sizeof(*j));

	if (!j) {
		close(fd);
		return -ENOMEM;
	}
	j->key = key;
	j->fd = fd;
	j->rows_fd = b->rows_fd;
	j->max_build_ns = b->max_build_ns;
	j->stage = BUILD_STAGE_BUILD;
	j->submitted_ns = now_monotonic_ns();
	queue(b, j); /* small until weighed, on a lane (run) */
	return 0;
}

void builder_submit_upload(struct builder *b, struct build_job *j, uint32_t rows_first)
{
	j->stage = BUILD_STAGE_UPLOAD;
	j->rows_first = rows_first;
	j->weight = (uint64_t)j->table->n_rows * sizeof(*j->table->rows);
	queue(b, j);
}

struct build_job *builder_take_done(struct builder *b)
{
	struct offload_job *o = offload_take_done(b->offload);
	struct build_job *list = NULL, **tail = &list;

	for (struct offload_job *next; o; o = next) {
		struct build_job *j = job_of(o);

		next = o->next;
		if (j->stage == BUILD_STAGE_BUILD && j->fd >= 0) {
			queue(b, j); /* weighed big: for a lane that takes it */
			continue;
		}
		*tail = j;
		tail = &j->next;
	}
	*tail = NULL;
	return list;
}

int builder_fd(const struct builder *b)
{
	return offload_fd(b->offload);
}
