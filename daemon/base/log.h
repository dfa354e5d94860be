/* SPDX-License-Identifier: MIT */
/*
 * log.h - the daemon's one logger.  Lines go to stderr with a syslog-style
 * "<N>" priority prefix when stderr is the journal (systemd sets
 * JOURNAL_STREAM), plain otherwise.  libbpf's messages are routed here too.
 */
#ifndef PERFD_LOG_H
#define PERFD_LOG_H

#include <syslog.h>
#include "perfd/macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
void log_open(void);
/* Always returns -abs(error) (or 0 when error is 0), so callers can write
 * "return log_error_errno(r, ...)". */
int log_full_errno(int level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#endif
