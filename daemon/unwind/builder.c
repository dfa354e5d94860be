/* SPDX-License-Identifier: MIT */
/* builder.c - see builder.h for the design and the ownership rules. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
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

enum { LANE_SMALL, LANE_ANY, LANES };

struct builder;

struct lane {
	struct builder *b;
	pthread_t thread;
	bool started;
};

struct builder {
	int rows_fd;
	struct lane lanes[LANES];
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct build_job *todo;              /* newest first */
	struct build_job *done, **done_tail; /* FIFO */
	bool stop;
	int event_fd;
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

static void free_list(struct build_job *j)
{
	while (j) {
		struct build_job *next = j->next;

		build_job_free(j);
		j = next;
	}
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

static void upload_rows(struct builder *b, struct build_job *j)
{
	uint64_t t0 = now_monotonic_ns();

	j->r = bpf_array_upload(b->rows_fd, j->rows_first, j->table->rows, sizeof(*j->table->rows),
				j->table->n_rows);
	j->upload_ns = now_monotonic_ns() - t0;
}

static void build(struct build_job *j)
{
	uint64_t t0 = now_monotonic_ns();

	j->r = unwind_table_build(j->fd, &j->table);
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

/* The job a lane serves next (the newest; the small lane skips big ones),
 * unlinked from the queue, or NULL. */
static struct build_job *take(struct builder *b, bool small_only)
{
	struct build_job **at = &b->todo, *j;

	while (*at && small_only && big(*at))
		at = &(*at)->next;
	j = *at;
	if (j)
		*at = j->next;
	return j;
}

static void *run(void *arg)
{
	struct lane *lane = arg;
	struct builder *b = lane->b;
	bool small_only = lane == &b->lanes[LANE_SMALL];
	const uint64_t one = 1;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct build_job *j = NULL;

		while (!b->stop && !(j = take(b, small_only)))
			pthread_cond_wait(&b->wake, &b->lock);
		if (b->stop) {
			if (j) { /* back where it was, for builder_free */
				j->next = b->todo;
				b->todo = j;
			}
			break;
		}
		pthread_mutex_unlock(&b->lock);

		if (j->stage == BUILD_STAGE_UPLOAD)
			upload_rows(b, j);
		else
			build(j);

		pthread_mutex_lock(&b->lock);
		j->next = NULL;
		*b->done_tail = j;
		b->done_tail = &j->next;
		/* a full counter (2^64 - 2 wake-ups unread) cannot happen */
		(void)!write(b->event_fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

int builder_new(int rows_fd, struct builder **ret)
{
	struct builder *b = calloc(1, sizeof(*b));
	int r;

	if (!b)
		return -ENOMEM;
	b->rows_fd = rows_fd;
	b->done_tail = &b->done;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->wake, NULL);
	b->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->event_fd < 0) {
		r = negative_errno();
		builder_free(b);
		return r;
	}
	for (int i = 0; i < LANES; i++) {
		b->lanes[i].b = b;
		r = -pthread_create(&b->lanes[i].thread, NULL, run, &b->lanes[i]);
		if (r < 0) {
			builder_free(b);
			return r;
		}
		b->lanes[i].started = true;
	}
	*ret = b;
	return 0;
}

struct builder *builder_free(struct builder *b)
{
	if (!b)
		return NULL;
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_broadcast(&b->wake);
	pthread_mutex_unlock(&b->lock);
	for (int i = 0; i < LANES; i++)
		if (b->lanes[i].started)
			pthread_join(b->lanes[i].thread, NULL);
	free_list(b->todo);
	free_list(b->done);
	if (b->event_fd >= 0)
		close(b->event_fd);
	pthread_cond_destroy(&b->wake);
	pthread_mutex_destroy(&b->lock);
	free(b);
	return NULL;
}

/* Queues j first, and wakes the lanes. */
static void queue(struct builder *b, struct build_job *j)
{
	pthread_mutex_lock(&b->lock);
	j->next = b->todo;
	b->todo = j;
	pthread_cond_broadcast(&b->wake);
	pthread_mutex_unlock(&b->lock);
}

void builder_bump(struct builder *b, uint64_t key)
{
	pthread_mutex_lock(&b->lock);
	for (struct build_job **at = &b->todo; *at; at = &(*at)->next) {
		struct build_job *j = *at;

		if (j->key != key)
			continue;
		*at = j->next;
		j->next = b->todo;
		b->todo = j;
		break;
	}
	pthread_mutex_unlock(&b->lock);
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
	j->stage = BUILD_STAGE_BUILD;
	j->submitted_ns = now_monotonic_ns();
	j->weight = unwind_table_cfi_bytes(fd);
	queue(b, j);
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
	struct build_job *list;
	uint64_t n;

	(void)!read(b->event_fd, &n, sizeof(n));
	pthread_mutex_lock(&b->lock);
	list = b->done;
	b->done = NULL;
	b->done_tail = &b->done;
	pthread_mutex_unlock(&b->lock);
	return list;
}

int builder_fd(const struct builder *b)
{
	return b->event_fd;
}
