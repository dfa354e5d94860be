/* SPDX-License-Identifier: MIT */
/* demangle.c - see demangle.h.  Only names that look mangled ("_Z" C++ and
 * Rust legacy, "_R" Rust v0) reach the demangler: most symbols are plain C
 * names, and the check costs two byte compares. */
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "symbols/demangle.h"

char *demangle(const char *name)
{
	if (name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}
