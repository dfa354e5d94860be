/* SPDX-License-Identifier: MIT */
/*
 * log.c - see log.h.  Kept deliberately small: one line per call, written
 * with a single write so concurrent writers never interleave mid-line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

static int max_level = LOG_INFO;
static int use_prefix;

void log_set_max_level(int level)
{
	max_level = level;
}

int log_get_max_level(void)
{
	return max_level;
}

void log_open(void)
{
	use_prefix = getenv("JOURNAL_STREAM") != NULL;
}

int log_full_errno(int level, int error, const char *fmt, ...)
{
	char line[2048];
	int saved = errno;
	size_t n = 0;
	va_list ap;

	if (error < 0)
		error = -error;
	if (level > max_level)
		return -error;

	if (use_prefix)
		n = snprintf(line, sizeof(line), "<%d>", level);
	else
		n = snprintf(line, sizeof(line), "perfd: ");
	va_start(ap, fmt);
	errno = error; /* so %m works */
	n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	while (n > 0 && line[n - 1] == '\n')
		n--;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
	errno = saved;
	return -error;
}
