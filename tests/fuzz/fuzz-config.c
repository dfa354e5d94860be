/* SPDX-License-Identifier: MIT */
/*
 * fuzz-config.c - the configuration file parser (config.c), reached as the
 * daemon reaches it: `perfd --config PATH` through config_args_parse() and
 * config_load(), the file being the fuzzer's bytes in a memfd.
 */
#include <string.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char arg0[] = "perfd", arg1[] = "--config", path[64], err[CONFIG_ERROR_MAX];
	char *argv[] = { arg0, arg1, path, NULL };
	struct config_args *args = NULL;
	struct config *c = NULL;

	fuzz_fd_path(fuzz_memfd(data, size), path, sizeof(path));
	if (config_args_parse(3, argv, &args, err, sizeof(err)) != CONFIG_ARGS_RUN)
		abort(); /* the arguments are fixed: only the file varies */
	if (config_load(args, &c, err, sizeof(err)) == 0)
		config_free(c);
	else if (!memchr(err, '\0', sizeof(err)))
		abort(); /* an error must leave its message terminated */
	config_args_free(args);
	return 0;
}
