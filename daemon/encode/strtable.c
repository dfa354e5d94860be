/* SPDX-License-Identifier: MIT */
/* strtable.c - see strtable.h: a protobuf profile's string table. */
#include <errno.h>
#include <stdlib.h>

#include "encode/strtable.h"
#include "perfd/macro.h"

int strtable_init(struct strtable *t, const struct model *m)
{
	*t = (struct strtable){ .m = m };
	u64map_init(&t->by_model);
	if (strtable_add(t, "") < 0) {
		strtable_done(t);
		return -ENOMEM;
	}
	return 0;
}

int64_t strtable_add(struct strtable *t, const char *s)
{
	if (t->n == t->cap) {
		size_t cap = MAX(2 * t->cap, (size_t)256);
		char **q = realloc(t->strings, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		t->strings = q;
		t->cap = cap;
	}
	/* protobuf-c wants char **; packing only reads the texts */
	t->strings[t->n] = (char *)s;
	return (int64_t)t->n++;
}

int64_t strtable_model(struct strtable *t, uint32_t id)
{
	uint64_t *slot;
	bool fresh;
	int64_t i;

	if (id == 0)
		return 0;
	slot = u64map_upsert(&t->by_model, id, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh)
		return (int64_t)*slot;
	i = strtable_add(t, model_string(t->m, id));
	if (i < 0) {
		u64map_remove(&t->by_model, id);
		return i;
	}
	*slot = (uint64_t)i;
	return i;
}

void strtable_done(struct strtable *t)
{
	free(t->strings);
	u64map_done(&t->by_model);
	*t = (struct strtable){ 0 };
}
