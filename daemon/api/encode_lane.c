/* SPDX-License-Identifier: MIT */
/* encode_lane.c - see encode_lane.h. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/command.h"
#include "api/encode_lane.h"
#include "api/server.h"
#include "base/base64.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/offload.h"
#include "perfd/macro.h"

struct encode_lane {
	struct offload *lanes;
	sd_event_source *done_io;
	struct encode_lane_stats stats;
};

struct encode_job {
	struct command_pending pending; /* first: the client's data */
	struct offload_job job;
	/* the lane's from offload_submit until it is done */
	answer_write_t write;
	const void *args;    /* write's: the copy at the end, or the caller's */
	struct model *model; /* freed by the lane once written */
	struct jsonw w;
	int r;
	uint64_t encode_ns;
	/* the loop's, never read by the lane */
	struct client *client; /* NULL once it went away */
	const char *what;    /* for the log */
	size_t n_processes, n_samples, n_locations;
	max_align_t args_copy[];
};

static struct encode_job *job_of(struct offload_job *j)
{
	return container_of(j, struct encode_job, job);
}

/* Frees what j holds (not j). */
static void job_release(struct encode_job *j)
{
	model_free(j->model);
	jsonw_done(&j->w);
}

static void job_free(struct offload_job *oj)
{
	struct encode_job *j = job_of(oj);

	job_release(j);
	free(j);
}

/* Writes the model's part and closes the answer: what took the loop
 * seconds.  Every format gives up early once the lanes are stopped
 * (cancel): pprof between deflate chunks, the others at their next write
 * (write_encoded). */
static void job_encode(struct encode_job *j, const atomic_bool *cancel)
{
	uint64_t t0 = now_monotonic_ns();

	j->r = j->write(j->model, j->args, cancel, &j->w);
	if (j->r == 0)
		jsonw_object_end(&j->w);
	j->model = model_free(j->model);
	j->encode_ns = now_monotonic_ns() - t0;
}

static void job_run(struct offload_job *oj)
{
	job_encode(job_of(oj), oj->cancel);
}

/* Sends j's answer to its client, if it is still there. */
static void job_reply(struct encode_job *j)
{
	if (!j->client)
		return;
	log_debug("Answer: %zu processes, %zu samples, %zu locations written as %s in %.1f ms.",
		  j->n_processes, j->n_samples, j->n_locations, j->what, j->encode_ns / 1e6);
	command_reply_writer(j->client, &j->w, j->r);
}

static void job_cancel(struct daemon *d, struct client *c)
{
	struct encode_job *j = client_get_data(c);

	j->client = NULL; /* the lane still has it: dropped when done */
}

/* No stop: the snapshot has ended, and a "stop" now waits its turn and
 * is answered on its own ("stopped": false), as one that came after the
 * answer. */
static const struct command encoding = { .name = "encoding", .cancel = job_cancel };

static int on_done(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct encode_lane *l = userdata;
	struct offload_job *done = offload_take_done(l->lanes), *next;

	for (; done; done = next) {
		struct encode_job *j = job_of(done);

		next = done->next;
		l->stats.writing--;
		l->stats.written++;
		l->stats.longest_write_ns = MAX(l->stats.longest_write_ns, j->encode_ns);
		if (j->client)
			client_set_data(j->client, NULL);
		job_reply(j);
		job_free(done);
	}
	return 0;
}

void encode_lane_write(struct encode_lane *l, struct client *c, answer_write_t write,
		       const void *args, size_t args_size, const char *what, struct model *m,
		       struct jsonw *w)
{
	/* with no memory for the job, one on the stack, written here */
	struct encode_job here, *j = malloc(sizeof(*j) + args_size), *job = j ? j : &here;

	*job = (struct encode_job){
		.pending.command = &encoding,
		.job = { .run = job_run, .free = job_free, .big = m->n_samples >= ENCODE_LANE_BIG_SAMPLES },
		.write = write,
		.args = args,
		.model = m,
		.w = *w,
		.client = c,
		.what = what,
		.n_processes = m->n_processes,
		.n_samples = m->n_samples,
		.n_locations = m->n_locations,
	};
	*w = (struct jsonw){ 0 };
	if (j) {
		memcpy(j->args_copy, args, args_size);
		j->args = j->args_copy;
	}
	if (j && l && offload_submit(l->lanes, &j->job) == 0) {
		l->stats.writing++;
		client_set_data(c, j);
		return;
	}
	/* no lane: the loop encodes it */
	job_encode(job, NULL);
	job_reply(job);
	job_release(job);
	free(j);
}

/* A snapshot's profile: its encoder, with the options the loop chose. */
struct encoded {
	const struct encoder *e;
	bool frame; /* a binary format's bytes as a frame, else base64 */
	struct encode_opts o;
};

/* A binary format's answer.  Its bytes are gathered first (once
 * compressed, a copy on the lane): with a frame (x->frame, protocol.h) the
 * line, closed, says how many follow it, then they do; else they are the
 * "profile" string in base64, as before frames existed, written in pieces
 * of BASE64_PIECE bytes (a multiple of three: the pieces' text joins into
 * the whole's, and needs no JSON escaping). */
#define BASE64_PIECE 3072
static int write_binary(const struct model *m, const struct encoded *x, struct jsonw *w)
{
	char text[BASE64_ENCODED_LEN(BASE64_PIECE)];
	struct encode_buffer b;
	int r;

	encode_buffer_init(&b);
	r = x->e->encode(m, &x->o, &b.sink);
	if (r == 0 && x->frame) {
		jsonw_kv_string(w, "encoding", "frame");
		jsonw_kv_u64(w, "profile_bytes", b.len);
		jsonw_object_end(w);
		jsonw_raw_append(w, "\n", 1);
		jsonw_raw_append(w, (const char *)b.data, b.len);
	} else if (r == 0) {
		jsonw_kv_string(w, "encoding", "base64");
		jsonw_key(w, "profile");
		(void)jsonw_reserve(w, BASE64_ENCODED_LEN(b.len) + 2);
		jsonw_string_begin(w);
		for (size_t at = 0; at < b.len; at += BASE64_PIECE) {
			size_t n = MIN(b.len - at, (size_t)BASE64_PIECE);

			jsonw_string_append_escaped(w, text, base64_encode(b.data + at, n, text));
		}
		jsonw_string_end(w);
	}
	encode_buffer_done(&b);
	if (r == 0)
		r = jsonw_error(w);
	return r < 0 ? r : x->frame ? COMMAND_FRAMED : 0;
}

/* The profile in e's form (formats.h): the "profile" string or value of
 * the answer, or its frame. */
static int write_encoded(const struct model *m, const void *args, const atomic_bool *cancel,
			 struct jsonw *w)
{
	const struct encoded *x = args;
	struct encoded y = *x;
	struct encode_cancel_sink c;
	struct encode_jsonw_sink s;
	int r;

	y.o.cancel = cancel;
	if (x->e->form == PERFD_FORM_BINARY)
		return write_binary(m, &y, w);
	jsonw_key(w, "profile");
	/* the text and JSON formats stop at their next write once the lanes
	 * are stopped (a JSON tree of 60k stacks takes a minute or more) */
	if (x->e->form == PERFD_FORM_JSON) {
		encode_jsonw_value_init(&s, w);
		encode_cancel_sink_init(&c, &s.sink, cancel);
		return x->e->encode(m, &y.o, &c.sink);
	}
	encode_jsonw_text_init(&s, w);
	encode_cancel_sink_init(&c, &s.sink, cancel);
	jsonw_string_begin(w);
	r = x->e->encode(m, &y.o, &c.sink);
	jsonw_string_end(w);
	return r < 0 ? r : jsonw_error(w);
}

void encode_lane_answer(struct encode_lane *l, struct client *c, const struct encoder *e, bool frame,
			struct model *m, const struct encode_opts *o, struct jsonw *w)
{
	struct encoded x = { .e = e, .frame = frame, .o = *o };

	x.o.labels = NULL;
	x.o.n_labels = 0;
	encode_lane_write(l, c, write_encoded, &x, sizeof(x), e->name, m, w);
}

struct encode_lane_stats encode_lane_get_stats(const struct encode_lane *l)
{
	return l ? l->stats : (struct encode_lane_stats){ 0 };
}

int encode_lane_new(sd_event *event, struct encode_lane **ret)
{
	_cleanup_free_ struct encode_lane *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	r = offload_new(&(struct offload_opts){ .lanes = 2, .small_lanes = 1, .background = true,
						.take_back = true, .name = "perfd-encode" },
			&l->lanes);
	if (r < 0)
		return r;
	r = sd_event_add_io(event, &l->done_io, offload_fd(l->lanes), EPOLLIN, on_done, l);
	if (r < 0) {
		offload_free(l->lanes);
		return r;
	}
	*ret = TAKE_PTR(l);
	return 0;
}

struct encode_lane *encode_lane_free(struct encode_lane *l)
{
	if (!l)
		return NULL;
	sd_event_source_disable_unref(l->done_io);
	offload_free(l->lanes);
	free(l);
	return NULL;
}
