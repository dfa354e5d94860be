/* SPDX-License-Identifier: MIT */
/*
 * macro.h - small ownership helpers shared by the daemon, the CLI and the tests.
 *
 * Modelled on systemd's macro.h: a variable declared with a cleanup attribute
 * is released when it goes out of scope, and TAKE_PTR()/TAKE_FD() hand the
 * ownership on explicitly.  Every destructor used here accepts NULL/-1.
 */
#ifndef PERFD_MACRO_H
#define PERFD_MACRO_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

static inline void freep(void *p)
{
	free(*(void **)p);
}

/* Closes *fd and marks it closed, so a second call (a struct's field
 * closed early, then at cleanup) does nothing. */
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
		*fd = -1;
	}
}

static inline void fclosep(FILE **f)
{
	if (*f)
		(void)fclose(*f);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Declares "static inline void name##p(type **p)" calling name(*p). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                \
	static inline void func##p(type **p)                                   \
	{                                                                      \
		if (*p)                                                        \
			func(*p);                                              \
	}

#define TAKE_PTR(p)                                                            \
	({                                                                     \
		__typeof__(p) _took_ = (p);                                    \
		(p) = NULL;                                                    \
		_took_;                                                        \
	})

#define TAKE_FD(fd)                                                            \
	({                                                                     \
		int _took_fd_ = (fd);                                          \
		(fd) = -1;                                                     \
		_took_fd_;                                                     \
	})

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The struct of type holding member at ptr (a node kept inside its owner). */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* qsort() that accepts an empty (possibly NULL) array: qsort's base is
 * declared nonnull, so qsort(NULL, 0, ...) is undefined behaviour. */
static inline void qsort_safe(void *base, size_t n, size_t size,
			      int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* qsort_safe with a context for cmp instead of a global: an encoder sorts
 * on the loop and on the encode lanes (api/encode_lane.h) at once. */
static inline void qsort_r_safe(void *base, size_t n, size_t size,
				int (*cmp)(const void *, const void *, void *), void *ctx)
{
	if (n > 1)
		qsort_r(base, n, size, cmp, ctx);
}

/* Converts a libc failure into a negative errno, never 0. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif
