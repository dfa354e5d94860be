/* SPDX-License-Identifier: MIT */
/* pyread.c - see pyread.h. */
#include "interp/python/pyread.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/python.h"

/* Whether an interpreter runs in the process: the runtime's list of
 * interpreters is not empty.  Memory that cannot be read (the process is
 * gone) says nothing against it: the runtime is what the files say. */
static bool interpreter_runs(const struct pyread *r)
{
	uint64_t head = 0;

	if (r->rt.runtime_addr == 0 || !r->rt.offsets)
		return true;
	if (pymem_read((pid_t)r->pid,
		       r->rt.runtime_addr + (uint64_t)r->rt.offsets->runtime_interpreters_head,
		       &head, sizeof(head)) < 0)
		return true;
	return head != 0;
}

void pyread_run(struct pyread *r)
{
	if (r->interpreter)
		r->interpreter_runs = interpreter_runs(r);
	if (r->trampolines)
		r->trampolines_r = pytrampoline_find((pid_t)r->pid, &r->candidates, r->rt.trampoline,
						     r->rt.trampoline_size, &r->arenas);
	for (size_t i = 0; i < r->n; i++) {
		struct pyread_code *c = &r->codes[i];

		c->r = pycode_read((pid_t)r->pid, &r->rt, c->addr, &c->code);
		if (c->r < 0) {
			c->code.linetable = NULL; /* undefined on failure */
			continue;
		}
		/* freed and reused since the sample: not what it saw */
		if (perfd_python_code_tag(c->code.firstlineno, c->code.filename_addr) != c->tag) {
			free(c->code.linetable);
			c->code.linetable = NULL;
			c->r = -ESTALE;
		}
	}
}

static void run(struct offload_job *j)
{
	pyread_run(pyread_of(j));
}

static void job_free(struct offload_job *j)
{
	pyread_free(pyread_of(j));
}

struct pyread *pyread_free(struct pyread *r)
{
	if (!r)
		return NULL;
	for (size_t i = 0; i < r->n; i++)
		free(r->codes[i].code.linetable);
	free(r->candidates.maps); /* their paths are "" */
	pytrampoline_arenas_done(&r->arenas);
	free(r);
	return NULL;
}

int pyread_new(uint32_t pid, uint64_t start_time_ns, const struct pyruntime *rt,
	       bool interpreter, size_t n, struct pyread **ret)
{
	struct pyread *r;

	if (n > PYREAD_MAX_CODES)
		return -EINVAL;
	r = calloc(1, sizeof(*r) + n * sizeof(r->codes[0]));
	if (!r)
		return -ENOMEM;
	r->job = (struct offload_job){ .key = pid, .run = run, .free = job_free };
	r->pid = pid;
	r->start_time_ns = start_time_ns;
	r->rt = *rt;
	r->interpreter = interpreter;
	r->n = n;
	*ret = r;
	return 0;
}
