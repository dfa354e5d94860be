/* SPDX-License-Identifier: MIT */
/*
 * demangle.h - C++ and Rust (legacy and v0) symbol demangling through
 * libiberty's demangler, the one binutils and gdb use.
 */
#ifndef PERFD_DEMANGLE_H
#define PERFD_DEMANGLE_H

/* Returns the demangled form of name (malloc'ed; the caller frees), or NULL
 * when name is not mangled (or not understood). Rust names lose their hash
 * suffix; C++ names keep their parameter lists, as perf prints them. */
char *demangle(const char *name);

#endif
