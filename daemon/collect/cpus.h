/* SPDX-License-Identifier: MIT */
/*
 * cpus.h - which CPUs are online, from the kernel's cpu-list format
 * ("0-3,5,7-8") as in /sys/devices/system/cpu/online.
 */
#ifndef PERFD_CPUS_H
#define PERFD_CPUS_H

#include <stdbool.h>
#include <stddef.h>

/* Parses a cpu list into a bitmap of n entries (ret_online[i] true when cpu
 * i is listed).  Returns the number of CPUs listed, or -EINVAL for a
 * malformed list or a CPU >= n. */
int cpus_parse_list(const char *list, bool *ret_online, size_t n);
/* Reads /sys/devices/system/cpu/online the same way. */
int cpus_read_online(bool *ret_online, size_t n);

#endif
