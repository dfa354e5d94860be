/* SPDX-License-Identifier: MIT */
/*
 * command_list.h - the protocol's commands, one row each: the name a
 * request says and the suffix of its enum perfd_command.  Each command is
 * one file, api/cmd_NAME.c, defining `const struct command cmd_NAME`
 * (api/command.h): adding a command is that file plus one row here.
 */
#ifndef PERFD_COMMAND_LIST_H
#define PERFD_COMMAND_LIST_H

#define PERFD_COMMANDS(X)        \
	X(status, STATUS)        \
	X(ps, PS)                \
	X(snapshot, SNAPSHOT)    \
	X(mem, MEM)              \
	X(top, TOP)              \
	X(stop, STOP)

#endif
