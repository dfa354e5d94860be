/* SPDX-License-Identifier: MIT */
/*
 * pthread_tsd.h - where glibc keeps a thread's pthread_getspecific() data,
 * read from the libc a process maps.
 */
#ifndef PERFD_PTHREAD_TSD_H
#define PERFD_PTHREAD_TSD_H

#include <stdint.h>

/* For key k, pthread_getspecific(k) in a thread whose struct pthread is at
 * tp (the fs base on x86_64) reads
 *     block = *(void **)(tp + specific + (k / 32) * 8)
 *     data  = *(void **)(block + (k % 32) * key_data_size + key_data_data)
 * (specific[0] points to the block inside struct pthread itself). */
struct pthread_tsd {
	uint32_t specific;
	uint32_t key_data_size;
	uint32_t key_data_data;
};

/* Reads the layout from the libthread_db descriptors glibc exports from
 * libc.so.6 (_thread_db_pthread_specific, _thread_db_pthread_key_data_data,
 * _thread_db_sizeof_pthread_key_data), which is what gdb relies on too, so
 * no glibc version has to be known here.  fd is the libc file.  Returns 0,
 * -ENOENT when the file has no such descriptors (not glibc, or a glibc
 * before 2.34 whose descriptors live in libpthread), -ENOEXEC for a file
 * that is not ELF, -EFBIG for a symbol table past ELF_LOOP_SECTION_MAX,
 * -EINVAL for values that make no sense. */
int pthread_tsd_read(int fd, struct pthread_tsd *ret);

#endif
