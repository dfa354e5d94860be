/* SPDX-License-Identifier: MIT */
/* cmd_mem.h - "mem"'s arguments, as cmd_mem.c parses them (protocol.h). */
#ifndef PERFD_CMD_MEM_H
#define PERFD_CMD_MEM_H

#include <stdint.h>

struct mem_args {
	uint32_t pid;
	unsigned top;         /* how many sites */
	double since_seconds; /* the history looked at */
};

#endif
