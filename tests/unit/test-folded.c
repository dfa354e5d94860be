/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/folded.c: the folded-stack encoder, fed with
 * synthetic stacks and a namer that needs no binaries. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "encode/folded.h"
#include "profile/frame.h"

static const char *namer(void *ctx, uint64_t frame, char *buf, size_t size)
{
	const char **names = ctx;

	if (names)
		return names[frame_address(frame)];
	snprintf(buf, size, "f%llu", (unsigned long long)frame_address(frame));
	return buf;
}

struct fixture {
	struct stacktab *stacks;
	struct u64map counts;
};

static void add(struct fixture *fx, const uint64_t *frames, uint16_t depth,
		uint16_t kernel_depth, uint64_t count)
{
	uint32_t id;

	cr_assert_eq(stacktab_intern(fx->stacks, frames, depth, kernel_depth, &id), 0);
	*u64map_upsert(&fx->counts, id, NULL) += count;
}

static char *encode(struct fixture *fx, const char *comm, const char **names)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(folded_write(f, comm, &fx->counts, fx->stacks, namer, names), 0);
	fclose(f);
	return text;
}

static void setup(struct fixture *fx)
{
	struct stacktab_limits l = { 1000, 100000 };

	fx->stacks = stacktab_new(&l);
	u64map_init(&fx->counts);
}

static void teardown(struct fixture *fx)
{
	u64map_done(&fx->counts);
	stacktab_free(fx->stacks);
}

Test(folded, root_first_with_kernel_suffix_most_samples_first)
{
	struct fixture fx;
	/* leaf first: kernel k2 <- k1, then user 3 <- 2 <- 1 (root) */
	uint64_t a[] = { frame_make(FRAME_MODULE_KERNEL, 11), frame_make(FRAME_MODULE_KERNEL, 10),
			 frame_make(1, 3), frame_make(1, 2), frame_make(1, 1) };
	uint64_t b[] = { frame_make(1, 4), frame_make(1, 1) };
	char *out;

	setup(&fx);
	add(&fx, a, 5, 2, 3);
	add(&fx, b, 2, 0, 7);
	out = encode(&fx, "app", NULL);
	cr_assert_str_eq(out, "app;f1;f4 7\n"
			      "app;f1;f2;f3;f10_[k];f11_[k] 3\n");
	free(out);
	teardown(&fx);
}

Test(folded, stacks_naming_alike_are_merged)
{
	struct fixture fx;
	const char *names[] = { "x", "main", "hot", "hot" };
	uint64_t a[] = { frame_make(1, 2), frame_make(1, 1) };
	uint64_t b[] = { frame_make(1, 3), frame_make(1, 1) };
	char *out;

	setup(&fx);
	add(&fx, a, 2, 0, 2);
	add(&fx, b, 2, 0, 5);
	out = encode(&fx, "app", names);
	cr_assert_str_eq(out, "app;main;hot 7\n");
	free(out);
	teardown(&fx);
}

Test(folded, separators_and_control_bytes_in_names_are_replaced)
{
	struct fixture fx;
	const char *names[] = { "x", "a;b", "new\nline" };
	uint64_t a[] = { frame_make(1, 2), frame_make(1, 1) };
	char *out;

	setup(&fx);
	add(&fx, a, 2, 0, 1);
	out = encode(&fx, "we;ird\t", names);
	cr_assert_str_eq(out, "we_ird_;a_b;new_line 1\n");
	free(out);
	teardown(&fx);
}

Test(folded, empty_profile_is_empty_output)
{
	struct fixture fx;
	char *out;

	setup(&fx);
	out = encode(&fx, "app", NULL);
	cr_assert_str_eq(out, "");
	free(out);
	teardown(&fx);
}

Test(folded, json_string_decodes_to_the_plain_text)
{
	struct fixture fx;
	const char *names[] = { "x", "operator\"\"_q", "back\\slash", "plain" };
	uint64_t a[] = { frame_make(1, 2), frame_make(1, 1) };
	uint64_t b[] = { frame_make(1, 3), frame_make(1, 1) };
	struct folded *fd;
	char *plain, *body, *quoted;
	json_object *o;
	size_t n;

	setup(&fx);
	add(&fx, a, 2, 0, 4);
	add(&fx, b, 2, 0, 9);
	plain = encode(&fx, "app", names);
	cr_assert_eq(folded_build("app", &fx.counts, fx.stacks, namer, names, &fd), 0);
	n = folded_json_string(fd, NULL);
	body = malloc(n + 1);
	cr_assert_eq(folded_json_string(fd, body), n);
	body[n] = 0;
	cr_assert_eq(asprintf(&quoted, "\"%s\"", body), (int)n + 2);
	o = json_tokener_parse(quoted);
	cr_assert_not_null(o, "not a JSON string: %s", quoted);
	cr_assert_str_eq(json_object_get_string(o), plain);
	json_object_put(o);
	free(quoted);
	free(body);
	free(plain);
	folded_free(fd);
	teardown(&fx);
}

/* Ties come in an order fixed by the text alone: the same stacks, interned
 * and named in the opposite order, encode to the same bytes. */
Test(folded, tie_order_depends_on_text_only)
{
	const char *names[] = { "x", "main", "a", "b", "c", "d", "e", "f", "g", "h" };
	char *out[2];

	for (int order = 0; order < 2; order++) {
		struct fixture fx;

		setup(&fx);
		for (int k = 0; k < 8; k++) {
			int i = order ? 7 - k : k;
			uint64_t st[] = { frame_make(1, 2 + (uint64_t)i), frame_make(1, 1) };

			add(&fx, st, 2, 0, 4);
		}
		out[order] = encode(&fx, "app", names);
		teardown(&fx);
	}
	cr_assert_str_eq(out[0], out[1]);
	free(out[0]);
	free(out[1]);
}
