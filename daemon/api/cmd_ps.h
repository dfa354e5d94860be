/* SPDX-License-Identifier: MIT */
/* cmd_ps.h - "ps"'s arguments, as cmd_ps.c parses them (protocol.h). */
#ifndef PERFD_CMD_PS_H
#define PERFD_CMD_PS_H

#include <stdbool.h>

struct ps_args {
	unsigned interval_seconds; /* the window counted: the last whole seconds */
	bool all;                  /* every live process, not the active ones */
};

#endif
