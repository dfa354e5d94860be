/* SPDX-License-Identifier: MIT */
/*
 * version.h - perfd's version, one string for both programs: `--version`,
 * status's daemon_version, the exporters' User-Agent and OTLP scope.
 * Defined in the build folder's gen/version.c, which the Makefile writes
 * from packaging/debian/changelog (and `git describe` in a checkout), so
 * only that one object is rebuilt when the version moves.
 */
#ifndef PERFD_VERSION_H
#define PERFD_VERSION_H

extern const char perfd_version[];    /* "0.1.0", or "0.1.0+g64df387-dirty" */
extern const char perfd_user_agent[]; /* "perfd/" perfd_version */

#endif
