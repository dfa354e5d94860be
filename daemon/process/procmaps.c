/* SPDX-License-Identifier: MIT */
/*
 * procmaps.c - parser for /proc/PID/maps.
 *
 * The whole file is read into one sorted array of mappings so that the
 * symbolizer can resolve every user frame of a sample with a binary search
 * (O(log n)) instead of re-reading the file per address.  The cost is one
 * allocation per path; a process rarely has more than a few thousand
 * mappings, and the array is rebuilt, not patched, when the process changes.
 *
 * A line is "START-END PERMS PGOFF MAJOR:MINOR INODE [PATH]".  Everything
 * after the inode and its padding is the path, verbatim: it may contain
 * spaces and keeps a " (deleted)" suffix; a path that itself begins with a
 * space cannot be told apart from the padding and loses that space.
 *
 * The paths in it are another process's to choose, so it is read with
 * bounds: lines of at most PROCMAPS_LINE_MAX bytes (a path is < PATH_MAX)
 * into one fixed buffer, and at most PROCMAPS_MAX_LINES of them.  The
 * daemon reads a process's maps through its checked /proc/PID directory
 * (procfs.h), so a reused pid is never read as the process it replaced.
 */
#include "process/procmaps.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/lineread.h"
#include "base/search.h"
#include "perfd/macro.h"
#include "process/procfs.h"

static void procmap_array_free(struct procmap *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

struct procmaps *procmaps_free(struct procmaps *m)
{
	if (!m)
		return NULL;
	procmap_array_free(m->maps, m->n);
	free(m);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct procmaps, procmaps_free);

/* Parses an unsigned number at *p in the given base (10 or 16) and advances
 * *p past it.  Unlike bare strtoull, rejects an empty field, a sign, leading
 * blanks, a "0x" prefix and overflow.  Returns 0 or -EINVAL. */
static int parse_u64(const char **p, int base, uint64_t *ret)
{
	const char *s = *p;
	size_t ndigits = 0;
	char *end;
	unsigned long long v;

	while (base == 16 ? isxdigit((unsigned char)s[ndigits]) :
			    isdigit((unsigned char)s[ndigits]))
		ndigits++;
	if (ndigits == 0)
		return -EINVAL;

	errno = 0;
	v = strtoull(s, &end, base);
	if (errno != 0 || end != s + ndigits)
		return -EINVAL;

	*p = end;
	*ret = v;
	return 0;
}

static int expect_char(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

static int parse_perms(const char **p, struct procmap *m)
{
	const char *s = *p;

	if ((s[0] != 'r' && s[0] != '-') || (s[1] != 'w' && s[1] != '-') ||
	    (s[2] != 'x' && s[2] != '-') || (s[3] != 's' && s[3] != 'p'))
		return -EINVAL;
	m->readable = s[0] == 'r';
	m->writable = s[1] == 'w';
	m->executable = s[2] == 'x';
	m->shared = s[3] == 's';
	*p = s + 4;
	return 0;
}

/* Parses one line (without its '\n') into *ret, allocating ret->path.
 * Returns 0 or -EINVAL/-ENOMEM; *ret is untouched on failure. */
static int parse_line(const char *line, struct procmap *ret)
{
	struct procmap m = {};
	uint64_t major, minor;
	const char *p = line;
	int r;

	if ((r = parse_u64(&p, 16, &m.start)) < 0 || (r = expect_char(&p, '-')) < 0 ||
	    (r = parse_u64(&p, 16, &m.end)) < 0 || (r = expect_char(&p, ' ')) < 0 ||
	    (r = parse_perms(&p, &m)) < 0 || (r = expect_char(&p, ' ')) < 0 ||
	    (r = parse_u64(&p, 16, &m.pgoff)) < 0 || (r = expect_char(&p, ' ')) < 0 ||
	    (r = parse_u64(&p, 16, &major)) < 0 || (r = expect_char(&p, ':')) < 0 ||
	    (r = parse_u64(&p, 16, &minor)) < 0 || (r = expect_char(&p, ' ')) < 0 ||
	    (r = parse_u64(&p, 10, &m.inode)) < 0)
		return r;

	if (m.start >= m.end || major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	m.dev_major = (uint32_t)major;
	m.dev_minor = (uint32_t)minor;

	/* The kernel pads to a column before the path, and anonymous
	 * mappings may end in a lone blank. */
	if (*p != '\0' && *p != ' ')
		return -EINVAL;
	while (*p == ' ')
		p++;

	m.path = strdup(p);
	if (!m.path)
		return -ENOMEM;

	*ret = m;
	return 0;
}

static int procmap_cmp(const void *a, const void *b)
{
	const struct procmap *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int procmaps_parse(FILE *f, bool exec_only, struct procmaps **ret)
{
	_cleanup_(procmaps_freep) struct procmaps *m = NULL;
	_cleanup_free_ char *line = malloc(PROCMAPS_LINE_MAX + 1);
	size_t allocated = 0, lines = 0;
	bool sorted = true;
	ssize_t len;

	m = calloc(1, sizeof(*m));
	if (!m || !line)
		return -ENOMEM;

	while ((len = line_read(f, line, PROCMAPS_LINE_MAX + 1, NULL)) != 0) {
		struct procmap pm;
		int r;

		if (len == -E2BIG)
			return -EINVAL; /* no line the kernel writes is that long */
		if (len < 0)
			return (int)len;
		if (++lines > PROCMAPS_MAX_LINES)
			return -EFBIG;
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		/* A NUL inside the line would silently cut the path short. */
		if (strlen(line) != (size_t)len)
			return -EINVAL;

		r = parse_line(line, &pm);
		if (r < 0)
			return r;
		if (exec_only && !pm.executable) {
			free(pm.path);
			continue;
		}

		if (m->n == allocated) {
			size_t n = allocated ? allocated * 2 : 64;
			struct procmap *grown = reallocarray(m->maps, n, sizeof(*grown));

			if (!grown) {
				free(pm.path);
				return -ENOMEM;
			}
			m->maps = grown;
			allocated = n;
		}
		if (m->n > 0 && m->maps[m->n - 1].start > pm.start)
			sorted = false;
		m->maps[m->n++] = pm;
	}

	/* The kernel emits ascending addresses; input from elsewhere is sorted
	 * here, and overlaps are refused because procmaps_find relies on at
	 * most one mapping containing an address. */
	if (!sorted)
		qsort_safe(m->maps, m->n, sizeof(*m->maps), procmap_cmp);
	for (size_t i = 1; i < m->n; i++)
		if (m->maps[i].start < m->maps[i - 1].end)
			return -EINVAL;

	*ret = TAKE_PTR(m);
	return 0;
}

int procmaps_read_dirfd(int dirfd, bool exec_only, struct procmaps **ret)
{
	_cleanup_fclose_ FILE *f = NULL;
	int fd = procfs_open_file(dirfd, "maps");

	if (fd < 0)
		return fd;
	f = fdopen(fd, "re");
	if (!f) {
		(void)close(fd);
		return negative_errno();
	}
	/* A process that exits after the open fails the read with ESRCH,
	 * which procmaps_parse passes on as is. */
	return procmaps_parse(f, exec_only, ret);
}

int procmaps_read_process(pid_t pid, uint64_t start_time_ns, bool exec_only,
			  struct procmaps **ret)
{
	_cleanup_close_ int dirfd = -1;
	int r = procfs_open_pid(pid, start_time_ns, &dirfd);

	return r < 0 ? r : procmaps_read_dirfd(dirfd, exec_only, ret);
}

int procmaps_read_pid(pid_t pid, bool exec_only, struct procmaps **ret)
{
	return procmaps_read_process(pid, PROCFS_START_ANY, exec_only, ret);
}

static uint64_t procmap_start(const void *map)
{
	return ((const struct procmap *)map)->start;
}

const struct procmap *procmaps_find(const struct procmaps *m, uint64_t addr)
{
	size_t lo;

	if (!m)
		return NULL;

	/* the last mapping starting at or below addr is the only candidate */
	lo = search_upper_bound(m->maps, m->n, sizeof(*m->maps), addr, procmap_start);
	if (lo == 0 || addr >= m->maps[lo - 1].end)
		return NULL;
	return &m->maps[lo - 1];
}
