/* SPDX-License-Identifier: MIT */
/*
 * profile_read.c - one reader per snapshot format, all feeding the same
 * stack list (profile_read.h).
 *
 * Design: each reader walks its input once and hands every stack, root
 * first, to the analysis model's builder (analysis/profile.h:
 * profile_stack_begin/push/end, which intern strings and frames), so the
 * three formats of one snapshot give the same list: the folded reader
 * drops the comm that roots each line and the [thread ...] frames, the json
 * reader turns every node with self time into the stack of its path, and
 * the pprof reader turns each sample's locations (leaf first) and their
 * lines (innermost first) around.
 *
 * The input is untrusted: the file is read whole up to
 * PROFILE_MAX_FILE_BYTES, a pprof message is gunzipped (zlib) up to
 * PROFILE_MAX_UNPACKED_BYTES and decoded by the code protoc-c generates
 * from the daemon's own proto/profile.proto; json-c's nesting limit is set
 * from PROFILE_MAX_DEPTH, so the tree walk's recursion is bounded too.
 * Every index is checked against its table, every number against its
 * range, and the first thing wrong stops the reader with a message saying
 * what and where.  The caps bound the reader's memory: the pool to
 * PROFILE_MAX_FRAME_REFS references (128 MiB), protobuf-c's structures to
 * a few times the unpacked size.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <json-c/json.h>

#include "base/array.h"
#include "base/kindtab.h"
#include "perfd/sample.h" /* PERFD_TASK_COMM_LEN */
#include "output.h" /* json_object_putp */
#include "profile.pb-c.h"
#include "profile_read.h"

typedef Perftools__Profiles__Profile pb_profile;

/* --- folded ----------------------------------------------------------------- */

/* Splits a folded frame into function, file and line: "name_[k]" is a kernel
 * function, "name (file:line)" and "name (file)" carry where it is (the
 * last " (" whose parenthesis closes the text and holds no other). */
static int folded_frame(struct profile *p, const char *s, size_t n, int64_t *ret)
{
	size_t fn_len = n, file_len = 0;
	const char *file = NULL;
	uint32_t line = 0;
	bool kernel = false;
	int64_t fn, fl;

	if (n >= 4 && memcmp(s + n - 4, "_[k]", 4) == 0) {
		kernel = true;
		fn_len = n - 4;
	} else if (n >= 4 && s[n - 1] == ')') {
		size_t open = n - 1;

		while (open > 0 && s[open - 1] != '(' && s[open - 1] != ')')
			open--;
		if (open >= 2 && s[open - 1] == '(' && s[open - 2] == ' ' && open < n - 1) {
			const char *colon = memrchr(s + open, ':', n - 1 - open);

			file = s + open;
			file_len = n - 1 - open;
			fn_len = open - 2;
			if (colon && colon + 1 < s + n - 1 &&
			    strspn(colon + 1, "0123456789") == (size_t)(s + n - 1 - colon - 1) &&
			    s + n - 1 - colon - 1 <= 9) {
				line = (uint32_t)strtoul(colon + 1, NULL, 10);
				file_len = (size_t)(colon - file);
			}
		}
	}
	if (fn_len == 0)
		return -EBADMSG;
	fn = profile_intern_string(p, s, fn_len);
	fl = file ? profile_intern_string(p, file, file_len) : 0;
	if (fn < 0 || fl < 0)
		return fn < 0 ? (int)fn : (int)fl;
	*ret = profile_intern_frame(p, (uint32_t)fn, (uint32_t)fl, line, kernel, 0);
	return *ret < 0 ? (int)*ret : 0;
}

/* "[thread TID COMM]", the frame --threads roots a stack at. */
static bool is_thread_frame(const char *s, size_t n)
{
	size_t digits;

	if (n < 11 || memcmp(s, "[thread ", 8) != 0 || s[n - 1] != ']')
		return false;
	digits = strspn(s + 8, "0123456789");
	return digits > 0 && 8 + digits < n - 1 && s[8 + digits] == ' ';
}

static int read_folded(struct profile *p, const char *data, size_t len, char *err)
{
	size_t lineno = 0;

	if (memchr(data, '\0', len))
		return profile_fail(err, -EBADMSG, "binary data, not a folded profile");
	for (const char *line = data, *end = data + len; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *stop = nl ? nl : end, *space, *frame;
		uint64_t count = 0;
		int r;

		lineno++;
		if (stop > line && stop[-1] == '\r')
			stop--;
		if (stop == line) {
			line = nl ? nl + 1 : end;
			continue;
		}
		space = memrchr(line, ' ', (size_t)(stop - line));
		if (!space || space == line || space + 1 == stop)
			return profile_fail(err, -EBADMSG, "line %zu: not \"comm;frames COUNT\"", lineno);
		for (const char *c = space + 1; c < stop; c++) {
			uint64_t digit = (uint64_t)(*c - '0');

			if (*c < '0' || *c > '9' || count > (UINT64_MAX - digit) / 10)
				return profile_fail(err, -EBADMSG, "line %zu: the count is not a number below 2^64",
					    lineno);
			count = count * 10 + digit;
		}

		/* the first element is the comm, not a frame */
		frame = memchr(line, ';', (size_t)(space - line));
		profile_stack_begin(p);
		while (frame) {
			const char *next = memchr(frame + 1, ';', (size_t)(space - frame - 1));
			const char *fend = next ? next : space;
			int64_t id = 0;

			frame++;
			if (fend == frame)
				return profile_fail(err, -EBADMSG, "line %zu: an empty frame", lineno);
			if (!is_thread_frame(frame, (size_t)(fend - frame))) {
				r = folded_frame(p, frame, (size_t)(fend - frame), &id);
				if (r == -EBADMSG)
					return profile_fail(err, r, "line %zu: a frame without a name", lineno);
				if (r < 0)
					return r;
				r = profile_stack_push(p, (uint32_t)id, err);
				if (r < 0)
					return r;
			}
			frame = next;
		}
		r = profile_stack_end(p, count, err);
		if (r < 0)
			return r;
		line = nl ? nl + 1 : end;
	}
	return 0;
}

/* --- json ------------------------------------------------------------------- */

/* The unsigned integer at key of o in [0, max]; absent is 0 when optional. */
static int json_uint(struct json_object *o, const char *key, uint64_t max, bool optional,
		     uint64_t *ret)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return optional ? (*ret = 0, 0) : -EBADMSG;
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
	    json_object_get_uint64(v) > max)
		return -EBADMSG;
	*ret = json_object_get_uint64(v);
	return 0;
}

/* The string at key of o, or NULL (absent, or not a string). */
static const char *json_string(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

struct json_walk {
	struct profile *p;
	const uint32_t *frame_ids; /* json frame index -> frame id */
	size_t n_frames;
	char *err;
	uint32_t path[PROFILE_MAX_DEPTH]; /* frame ids from the root to the node */
	size_t depth;
	bool threads; /* a thread node is the frame "[thread TID COMM]" */
};

/* The frame "[thread TID COMM]" of a thread node's "thread" object. */
static int thread_frame(struct json_walk *w, struct json_object *thread, uint32_t *ret)
{
	struct json_object *tid, *comm;
	char name[PERFD_TASK_COMM_LEN + 40];
	int64_t fn, id;

	if (!json_object_object_get_ex(thread, "tid", &tid) ||
	    !json_object_is_type(tid, json_type_int) || json_object_get_int64(tid) <= 0 ||
	    !json_object_object_get_ex(thread, "comm", &comm) ||
	    !json_object_is_type(comm, json_type_string) ||
	    json_object_get_string_len(comm) >= PERFD_TASK_COMM_LEN)
		return profile_fail(w->err, -EBADMSG, "a thread without a \"tid\" and a \"comm\"");
	(void)snprintf(name, sizeof(name), "[thread %" PRId64 " %s]", json_object_get_int64(tid),
		       json_object_get_string(comm));
	fn = profile_intern_cstring(w->p, name);
	if (fn < 0)
		return (int)fn;
	id = profile_intern_frame(w->p, (uint32_t)fn, 0, 0, false, 0);
	if (id < 0)
		return (int)id;
	*ret = (uint32_t)id;
	return 0;
}

/* Emits node's self as the stack of its path, then its children's.  The
 * recursion goes as deep as the tree, which json-c's nesting limit and the
 * path's size bound to PROFILE_MAX_DEPTH. */
static int walk_node(struct json_walk *w, struct json_object *node, bool root)
{
	struct profile *p = w->p;
	struct json_object *children, *v;
	uint64_t self, frame;
	bool pushed = false;
	int r;

	if (!json_object_is_type(node, json_type_object) ||
	    json_uint(node, "self", UINT64_MAX, false, &self) < 0)
		return profile_fail(w->err, -EBADMSG, "a tree node without a \"self\" count");
	if (!root && json_object_object_get_ex(node, "frame", &v)) {
		if (json_uint(node, "frame", UINT32_MAX, false, &frame) < 0 || frame >= w->n_frames)
			return profile_fail(w->err, -EBADMSG, "a tree node names frame %s of %zu",
				    json_object_get_string(v), w->n_frames);
		if (w->depth == PROFILE_MAX_DEPTH)
			return profile_fail(w->err, -E2BIG, "a stack deeper than %d frames", PROFILE_MAX_DEPTH);
		w->path[w->depth++] = w->frame_ids[frame];
		pushed = true;
	} else if (!root && !json_object_object_get_ex(node, "thread", &v)) {
		return profile_fail(w->err, -EBADMSG, "a tree node with neither \"frame\" nor \"thread\"");
	} else if (!root && w->threads) {
		if (w->depth == PROFILE_MAX_DEPTH)
			return profile_fail(w->err, -E2BIG, "a stack deeper than %d frames", PROFILE_MAX_DEPTH);
		r = thread_frame(w, v, &w->path[w->depth]);
		if (r < 0)
			return r;
		w->depth++;
		pushed = true;
	}

	if (self > 0) {
		profile_stack_begin(p);
		for (size_t i = 0; i < w->depth; i++) {
			r = profile_stack_push(p, w->path[i], w->err);
			if (r < 0)
				return r;
		}
		r = profile_stack_end(p, self, w->err);
		if (r < 0)
			return r;
	}

	if (json_object_object_get_ex(node, "children", &children)) {
		if (!json_object_is_type(children, json_type_array))
			return profile_fail(w->err, -EBADMSG, "a tree node's \"children\" is not an array");
		for (size_t i = 0; i < json_object_array_length(children); i++) {
			r = walk_node(w, json_object_array_get_idx(children, i), false);
			if (r < 0)
				return r;
		}
	}
	if (pushed)
		w->depth--;
	return 0;
}

static int read_json_doc(struct profile *p, struct json_object *doc, const char *kind,
			 bool threads, char *err)
{
	struct json_object *frames, *processes, *profile;
	_cleanup_free_ uint32_t *frame_ids = NULL;
	_cleanup_free_ struct json_walk *w = NULL;
	const char *doc_kind, *doc_unit;
	const struct kind_info *known; /* doc_kind, when perfd writes it */
	uint64_t period = 0;
	size_t n;
	int r;

	/* a whole `perfctl --json snapshot --format json` answer holds it */
	if (json_object_is_type(doc, json_type_object) &&
	    !json_object_object_get_ex(doc, "processes", NULL) &&
	    json_object_object_get_ex(doc, "profile", &profile))
		doc = profile;
	if (!json_object_is_type(doc, json_type_object) ||
	    !json_object_object_get_ex(doc, "frames", &frames) ||
	    !json_object_is_type(frames, json_type_array) ||
	    !json_object_object_get_ex(doc, "processes", &processes) ||
	    !json_object_is_type(processes, json_type_array))
		return profile_fail(err, -EBADMSG,
			    "not a perfd call tree: no \"frames\" and \"processes\" arrays");

	doc_kind = json_string(doc, "kind") ?: kind_infos[PERFD_VALUE_CPU].name;
	known = kind_by_name(doc_kind);
	doc_unit = json_string(doc, "unit");
	if (kind && strcmp(kind, doc_kind) != 0)
		return profile_fail(err, -ENOENT, "it holds a %s profile, not %s", doc_kind, kind);
	if (!doc_unit)
		doc_unit = known ? known->unit : "";
	if (json_uint(doc, "period_ns", UINT64_MAX, true, &period) < 0)
		return profile_fail(err, -EBADMSG, "\"period_ns\" is not a count");
	p->period_ns = known && known->period == PERFD_KIND_PERIOD_PERIODS ? period : 0;
	r = profile_set_kind(p, doc_kind, doc_unit);
	if (r < 0)
		return r;

	n = json_object_array_length(frames);
	frame_ids = calloc(n ? n : 1, sizeof(*frame_ids));
	if (!frame_ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct json_object *f = json_object_array_get_idx(frames, i);
		const char *name = json_string(f, "function"), *file = json_string(f, "file");
		const char *fkind = json_string(f, "kind"), *module = json_string(f, "module");
		uint64_t line;
		int64_t fn, fl, id, mod;

		if (!name || !*name)
			return profile_fail(err, -EBADMSG, "frame %zu has no \"function\"", i);
		if (json_uint(f, "line", UINT32_MAX, true, &line) < 0)
			return profile_fail(err, -EBADMSG, "frame %zu: \"line\" is not a line number", i);
		fn = profile_intern_cstring(p, name);
		fl = file ? profile_intern_cstring(p, file) : 0;
		if (fn < 0 || fl < 0)
			return fn < 0 ? (int)fn : (int)fl;
		id = profile_intern_frame(p, (uint32_t)fn, (uint32_t)fl, (uint32_t)line,
				  fkind && strcmp(fkind, "kernel") == 0, 0);
		if (id < 0)
			return (int)id;
		frame_ids[i] = (uint32_t)id;
		if (module && !p->frames[id].module) {
			mod = profile_intern_cstring(p, module);
			if (mod < 0)
				return (int)mod;
			p->frames[id].module = (uint32_t)mod;
		}
	}

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct json_walk){ .p = p, .frame_ids = frame_ids, .n_frames = n, .err = err,
				 .threads = threads };
	for (size_t i = 0; i < json_object_array_length(processes); i++) {
		struct json_object *tree;

		if (!json_object_object_get_ex(json_object_array_get_idx(processes, i), "tree", &tree))
			return profile_fail(err, -EBADMSG, "process %zu has no \"tree\"", i);
		r = walk_node(w, tree, true);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- pprof ------------------------------------------------------------------ */

/* Gunzips data into *ret (malloc'd) of at most PROFILE_MAX_UNPACKED_BYTES. */
static int gunzip(const char *data, size_t len, uint8_t **ret, size_t *ret_len, char *err)
{
	_cleanup_free_ uint8_t *out = NULL;
	size_t cap = 0, n = 0;
	z_stream z = { 0 };
	int zr;

	/* 15 + 32: the largest window, gzip or zlib header detected */
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)MIN(len, (size_t)UINT32_MAX);
	for (;;) {
		if (n == cap) {
			if (cap >= PROFILE_MAX_UNPACKED_BYTES) {
				(void)inflateEnd(&z);
				return profile_fail(err, -EFBIG, "it unpacks to more than %zu MiB",
					    PROFILE_MAX_UNPACKED_BYTES >> 20);
			}
			if (array_grow((void **)&out, &cap, MIN(MAX(cap * 2, len * 4), PROFILE_MAX_UNPACKED_BYTES), 1, 256) < 0) {
				(void)inflateEnd(&z);
				return -ENOMEM;
			}
			cap = MIN(cap, PROFILE_MAX_UNPACKED_BYTES);
		}
		z.next_out = out + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (zr == Z_STREAM_END)
			break;
		if (zr == Z_BUF_ERROR && z.avail_in == 0) {
			(void)inflateEnd(&z);
			return profile_fail(err, -EBADMSG, "the gzip data is cut short");
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			(void)inflateEnd(&z);
			return zr == Z_MEM_ERROR ? -ENOMEM :
						   profile_fail(err, -EBADMSG, "the gzip data is corrupt (%s)",
							z.msg ? z.msg : "zlib error");
		}
	}
	(void)inflateEnd(&z);
	*ret = TAKE_PTR(out);
	*ret_len = n;
	return 0;
}

static void pb_profile_freep(pb_profile **pr)
{
	if (*pr)
		perftools__profiles__profile__free_unpacked(*pr, NULL);
}

struct pprof_read {
	struct profile *p;
	const pb_profile *pr;
	uint32_t *strings; /* string table index -> id, UINT32_MAX: not yet */
	struct u64map functions, locations; /* pprof id -> index */
	uint64_t kernel_mapping; /* id of the "[kernel.kallsyms]" mapping, 0: none */
	char *err;
};

/* The id of string table entry i, or -EBADMSG when i is outside it. */
static int64_t pprof_string(struct pprof_read *r, int64_t i)
{
	int64_t id;

	if (i < 0 || (uint64_t)i >= r->pr->n_string_table)
		return profile_fail(r->err, -EBADMSG, "string index %" PRId64 " is outside the table of %zu",
			    i, r->pr->n_string_table);
	if (r->strings[i] != UINT32_MAX)
		return r->strings[i];
	id = profile_intern_cstring(r->p, r->pr->string_table[i] ? r->pr->string_table[i] : "");
	if (id >= 0)
		r->strings[i] = (uint32_t)id;
	return id;
}

/* Adds a table entry's id to m (pprof id -> index i in its table). */
static int pprof_add_id(struct pprof_read *r, struct u64map *m, uint64_t id, size_t i,
			const char *what)
{
	uint64_t *slot;
	bool fresh;

	if (id == 0 || id == U64MAP_EMPTY)
		return profile_fail(r->err, -EBADMSG, "a %s with id %" PRIu64, what, id);
	slot = u64map_upsert(m, id, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh)
		return profile_fail(r->err, -EBADMSG, "two %ss with id %" PRIu64, what, id);
	*slot = i;
	return 0;
}

/* The value index to read and the kind it is, from the sample types. */
static int pprof_kind(struct pprof_read *r, const char *kind, size_t *ret, bool *ret_cpu)
{
	const pb_profile *pr = r->pr;
	int want = kind ? kind_find(kind, strlen(kind)) : -1;

	if (pr->n_sample_type == 0)
		return profile_fail(r->err, -EBADMSG, "a pprof profile without sample types");
	for (size_t k = 0; k < PERFD_VALUE_KINDS; k++) {
		const struct kind_info *ki = &kind_infos[k];

		if (want >= 0 && (size_t)want != k)
			continue;
		for (size_t i = 0; i < pr->n_sample_type; i++) {
			int64_t t = pprof_string(r, pr->sample_type[i]->type);

			if (t < 0)
				return (int)t;
			if (strcmp(profile_string(r->p, (uint32_t)t), kind_pprof_first_type(ki)) == 0) {
				*ret = i;
				*ret_cpu = ki->period == PERFD_KIND_PERIOD_PERIODS;
				return profile_set_kind(r->p, ki->name, ki->unit);
			}
		}
	}
	if (kind)
		return profile_fail(r->err, -ENOENT, "it has no %s samples (sample type \"%s\")", kind,
			    want >= 0 ? kind_pprof_first_type(&kind_infos[want]) : kind);
	/* not perfd's: the first sample type, named as the file names it */
	{
		int64_t t = pprof_string(r, pr->sample_type[0]->type);
		int64_t u = pprof_string(r, pr->sample_type[0]->unit);

		if (t < 0 || u < 0)
			return t < 0 ? (int)t : (int)u;
		r->p->kind = (uint32_t)t;
		r->p->unit = (uint32_t)u;
		*ret = 0;
		*ret_cpu = false;
		return 0;
	}
}

/* Pushes a location's lines, outermost (the last) first. */
static int pprof_location(struct pprof_read *r, uint64_t location_id)
{
	const pb_profile *pr = r->pr;
	uint64_t *idx = u64map_get(&r->locations, location_id);
	const Perftools__Profiles__Location *loc;
	bool kernel;
	int k;

	if (!idx)
		return profile_fail(r->err, -EBADMSG, "a sample names location %" PRIu64 ", which is not there",
			    location_id);
	loc = pr->location[*idx];
	/* perfd's kernel frames have a kernel address and the kernel's
	 * mapping ("[kernel.kallsyms]", as perf names it; none in files of
	 * older perfds) */
	kernel = loc->address >= 0x8000000000000000ULL &&
		 (loc->mapping_id == 0 || loc->mapping_id == r->kernel_mapping);
	if (loc->n_line == 0) {
		char name[32];
		int64_t fn, id;

		(void)snprintf(name, sizeof(name), "0x%" PRIx64, loc->address);
		fn = profile_intern_cstring(r->p, name);
		if (fn < 0)
			return (int)fn;
		id = profile_intern_frame(r->p, (uint32_t)fn, 0, 0, kernel, 0);
		return id < 0 ? (int)id : profile_stack_push(r->p, (uint32_t)id, r->err);
	}
	for (size_t j = loc->n_line; j-- > 0;) {
		const Perftools__Profiles__Line *ln = loc->line[j];
		uint64_t *fi = u64map_get(&r->functions, ln->function_id);
		const Perftools__Profiles__Function *f;
		int64_t fn, fl, id;

		if (!fi)
			return profile_fail(r->err, -EBADMSG, "a line names function %" PRIu64 ", which is not there",
				    ln->function_id);
		f = pr->function[*fi];
		fn = pprof_string(r, f->name);
		fl = pprof_string(r, f->filename);
		if (fn < 0 || fl < 0)
			return fn < 0 ? (int)fn : (int)fl;
		if (fn == 0)
			return profile_fail(r->err, -EBADMSG, "function %" PRIu64 " has no name", f->id);
		id = profile_intern_frame(r->p, (uint32_t)fn, (uint32_t)fl,
				  ln->line > 0 && ln->line <= UINT32_MAX ? (uint32_t)ln->line : 0, kernel, 0);
		if (id < 0)
			return (int)id;
		k = profile_stack_push(r->p, (uint32_t)id, r->err);
		if (k < 0)
			return k;
	}
	return 0;
}

static int read_pprof(struct profile *p, const char *data, size_t len, const char *kind, char *err)
{
	_cleanup_free_ uint8_t *raw = NULL;
	_cleanup_(pb_profile_freep) pb_profile *pr = NULL;
	_cleanup_free_ uint32_t *strings = NULL;
	struct pprof_read r = { .p = p, .err = err };
	size_t raw_len = 0, vi = 0;
	bool is_cpu = false;
	int k;

	k = gunzip(data, len, &raw, &raw_len, err);
	if (k < 0)
		return k;
	pr = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	if (!pr)
		return profile_fail(err, -EBADMSG, "the gzip data is not a profile.proto message");
	if (pr->n_string_table == 0 || !pr->string_table[0] || pr->string_table[0][0])
		return profile_fail(err, -EBADMSG, "the string table does not start with \"\"");
	strings = malloc(pr->n_string_table * sizeof(*strings));
	if (!strings)
		return -ENOMEM;
	memset(strings, 0xff, pr->n_string_table * sizeof(*strings));
	r.pr = pr;
	r.strings = strings;
	u64map_init(&r.functions);
	u64map_init(&r.locations);

	k = pprof_kind(&r, kind, &vi, &is_cpu);
	if (k >= 0 && is_cpu && pr->period_type && pr->period > 0) {
		int64_t u = pprof_string(&r, pr->period_type->unit);

		if (u < 0)
			k = (int)u;
		else if (strcmp(profile_string(p, (uint32_t)u), "nanoseconds") == 0)
			p->period_ns = (uint64_t)pr->period;
	}
	for (size_t i = 0; k >= 0 && i < pr->n_function; i++)
		k = pprof_add_id(&r, &r.functions, pr->function[i]->id, i, "function");
	for (size_t i = 0; k >= 0 && i < pr->n_location; i++)
		k = pprof_add_id(&r, &r.locations, pr->location[i]->id, i, "location");
	for (size_t i = 0; k >= 0 && i < pr->n_mapping; i++) {
		int64_t f = pprof_string(&r, pr->mapping[i]->filename);

		if (f < 0)
			k = (int)f;
		else if (strcmp(profile_string(p, (uint32_t)f), "[kernel.kallsyms]") == 0)
			r.kernel_mapping = pr->mapping[i]->id;
	}

	for (size_t i = 0; k >= 0 && i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];

		if (s->n_value != pr->n_sample_type) {
			k = profile_fail(err, -EBADMSG, "sample %zu has %zu values for %zu sample types", i,
				 s->n_value, pr->n_sample_type);
			break;
		}
		if (s->value[vi] < 0) {
			k = profile_fail(err, -EBADMSG, "sample %zu has a negative value", i);
			break;
		}
		profile_stack_begin(p);
		for (size_t j = s->n_location_id; k >= 0 && j-- > 0;)
			k = pprof_location(&r, s->location_id[j]);
		if (k >= 0)
			k = profile_stack_end(p, (uint64_t)s->value[vi], err);
	}
	u64map_done(&r.functions);
	u64map_done(&r.locations);
	return k < 0 ? k : 0;
}

/* --- the entry points ------------------------------------------------------- */

static int read_json_text(struct profile *p, const char *data, size_t len, const char *kind,
			  char *err)
{
	_cleanup_(json_object_putp) struct json_object *doc = NULL;
	struct json_tokener *tok;
	size_t end;

	if (len > INT32_MAX)
		return profile_fail(err, -EFBIG, "too large for a json profile");
	/* a frame nests two levels: a node and its children array */
	tok = json_tokener_new_ex(2 * PROFILE_MAX_DEPTH + 16);
	if (!tok)
		return -ENOMEM;
	doc = json_tokener_parse_ex(tok, data, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!doc) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		json_tokener_free(tok);
		return profile_fail(err, -EBADMSG, "not JSON: %s at byte %zu",
			    e == json_tokener_continue ? "it ends too early" :
			    e == json_tokener_error_depth ? "nested too deeply" :
							     json_tokener_error_desc(e),
			    end);
	}
	json_tokener_free(tok);
	for (; end < len; end++)
		if (!strchr(" \t\r\n", data[end]) || data[end] == '\0')
			return profile_fail(err, -EBADMSG, "not JSON: bytes after the document at byte %zu",
				    end);
	return read_json_doc(p, doc, kind, false, err);
}

/* Runs one reader into a new profile; *ret only on success. */
static int read_into(enum profile_format format, const char *data, size_t len,
		     struct json_object *doc, const char *kind, bool threads, struct profile **ret,
		     char *err)
{
	_cleanup_(profile_freep) struct profile *p = NULL;
	const struct kind_info *k = kind ? kind_by_name(kind) : &kind_infos[PERFD_VALUE_CPU];
	int r = profile_new(format, &p);

	if (r < 0)
		return r;
	if (!k)
		return profile_fail(err, -EINVAL, "no such kind '%s'", kind);
	switch (format) {
	case PROFILE_FORMAT_PPROF:
		r = read_pprof(p, data, len, kind, err);
		break;
	case PROFILE_FORMAT_JSON:
		r = doc ? read_json_doc(p, doc, kind, threads, err) : read_json_text(p, data, len, kind, err);
		break;
	default:
		r = profile_set_kind(p, k->name, k->unit);
		if (r >= 0)
			r = read_folded(p, data, len, err);
		break;
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int profile_read(const char *data, size_t len, const char *kind, struct profile **ret,
		 char *err)
{
	size_t i = 0;

	if (len > PROFILE_MAX_FILE_BYTES)
		return profile_fail(err, -EFBIG, "larger than %zu MiB", PROFILE_MAX_FILE_BYTES >> 20);
	if (len >= 2 && (unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b)
		return read_into(PROFILE_FORMAT_PPROF, data, len, NULL, kind, false, ret, err);
	while (i < len && strchr(" \t\r\n", data[i]) && data[i])
		i++;
	if (i < len && data[i] == '{')
		return read_into(PROFILE_FORMAT_JSON, data, len, NULL, kind, false, ret, err);
	return read_into(PROFILE_FORMAT_FOLDED, data, len, NULL, kind, false, ret, err);
}

int profile_read_json(struct json_object *doc, const char *kind, bool threads,
		      struct profile **ret, char *err)
{
	return read_into(PROFILE_FORMAT_JSON, NULL, 0, doc, kind, threads, ret, err);
}

int profile_read_file(const char *path, const char *kind, struct profile **ret, char *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *data = NULL;
	size_t len = 0, cap = 0;
	struct stat st;

	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > PROFILE_MAX_FILE_BYTES)
		return profile_fail(err, -EFBIG, "larger than %zu MiB", PROFILE_MAX_FILE_BYTES >> 20);
	for (;;) {
		ssize_t n;

		/* one byte past the cap tells a pipe that is too long */
		if (len == cap &&
		    array_grow((void **)&data, &cap, MIN(MAX(cap * 2, (size_t)64 << 10),
						   PROFILE_MAX_FILE_BYTES + 1), 1, 256) < 0)
			return -ENOMEM;
		n = read(fd, data + len, MIN(cap, PROFILE_MAX_FILE_BYTES + 1) - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > PROFILE_MAX_FILE_BYTES)
			return profile_fail(err, -EFBIG, "larger than %zu MiB", PROFILE_MAX_FILE_BYTES >> 20);
	}
	return profile_read(data ? data : "", len, kind, ret, err);
}
