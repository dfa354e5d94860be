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

struct builder {
	int rows_fd;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct build_job *todo, **todo_tail; /* FIFO */
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

	r = elf_open_fd(fd, ELF_C_READ_MMAP, &elf);
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

static void *run(void *arg)
{
	struct builder *b = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct build_job *j;

		while (!b->stop && !b->todo)
			pthread_cond_wait(&b->wake, &b->lock);
		if (b->stop)
			break;
		j = b->todo;
		b->todo = j->next;
		if (!b->todo)
			b->todo_tail = &b->todo;
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
	b->todo_tail = &b->todo;
	b->done_tail = &b->done;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->wake, NULL);
	b->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->event_fd < 0) {
		r = negative_errno();
		builder_free(b);
		return r;
	}
	r = -pthread_create(&b->thread, NULL, run, b);
	if (r < 0) {
		builder_free(b);
		return r;
	}
	b->started = true;
	*ret = b;
	return 0;
}

struct builder *builder_free(struct builder *b)
{
	if (!b)
		return NULL;
	if (b->started) {
		pthread_mutex_lock(&b->lock);
		b->stop = true;
		pthread_cond_signal(&b->wake);
		pthread_mutex_unlock(&b->lock);
		pthread_join(b->thread, NULL);
	}
	free_list(b->todo);
	free_list(b->done);
	if (b->event_fd >= 0)
		close(b->event_fd);
	pthread_cond_destroy(&b->wake);
	pthread_mutex_destroy(&b->lock);
	free(b);
	return NULL;
}

static void queue(struct builder *b, struct build_job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&b->lock);
	*b->todo_tail = j;
	b->todo_tail = &j->next;
	pthread_cond_signal(&b->wake);
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
	queue(b, j);
	return 0;
}

void builder_submit_upload(struct builder *b, struct build_job *j, uint32_t rows_first)
{
	j->stage = BUILD_STAGE_UPLOAD;
	j->rows_first = rows_first;
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
