/* SPDX-License-Identifier: MIT */
/*
 * pp.h - preprocessor helpers for X-macro tables: pure macros, so BPF C
 * includes them as well as user space.
 *
 * PERFD_PP_JOIN(sep, last, a, b, c) is the string literal a sep b last c:
 * a list of a table's names written into a usage text or an error message
 * at compile time ("cpu|memory|offcpu", "cpu, memory or offcpu").  It takes
 * 1 to 8 names: a longer list fails to compile rather than lose a name.
 */
#ifndef PERFD_PP_H
#define PERFD_PP_H

#define PERFD_PP_CAT_(a, b) a##b
#define PERFD_PP_CAT(a, b) PERFD_PP_CAT_(a, b)
#define PERFD_PP_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, n, ...) n
#define PERFD_PP_COUNT(...) PERFD_PP_COUNT_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)

#define PERFD_PP_JOIN_1(s, l, a) a
#define PERFD_PP_JOIN_2(s, l, a, ...) a l __VA_ARGS__
#define PERFD_PP_JOIN_3(s, l, a, ...) a s PERFD_PP_JOIN_2(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN_4(s, l, a, ...) a s PERFD_PP_JOIN_3(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN_5(s, l, a, ...) a s PERFD_PP_JOIN_4(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN_6(s, l, a, ...) a s PERFD_PP_JOIN_5(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN_7(s, l, a, ...) a s PERFD_PP_JOIN_6(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN_8(s, l, a, ...) a s PERFD_PP_JOIN_7(s, l, __VA_ARGS__)
#define PERFD_PP_JOIN(s, l, ...) PERFD_PP_CAT(PERFD_PP_JOIN_, PERFD_PP_COUNT(__VA_ARGS__))(s, l, __VA_ARGS__)

/* m(...) with the arguments macro-expanded first, so that commas a table's
 * rows expand to (each row giving `, name`) separate arguments of m:
 * PERFD_PP_CALL(PERFD_PP_JOIN, "|", "|" ROWS(COMMA_NAME)). */
#define PERFD_PP_CALL(m, ...) m(__VA_ARGS__)

#endif
