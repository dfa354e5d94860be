/* SPDX-License-Identifier: MIT */
/*
 * buildid.h - the GNU build-id note, read one way wherever it is: in an ELF
 * file (its note sections, or the note segments the loader maps) or in
 * bare notes such as /sys/kernel/notes.
 *
 * One walker steps through notes as libelf's gelf_getnote() does (a 12-byte
 * header, the name and the descriptor each padded to the notes' alignment,
 * 4, or 8 for GNU property notes; a note that runs past the end ends the
 * walk) and takes the first NT_GNU_BUILD_ID note named "GNU" with a
 * descriptor of 1 to max bytes.  It reads the file's raw bytes and turns
 * the header's byte order itself, so an ELF file and a buffer from sysfs
 * take the same path.  The id is returned in place (no copy): it lives as
 * long as the notes, or for an ELF file until elf_end().
 */
#ifndef PERFD_BUILDID_H
#define PERFD_BUILDID_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* SHA-1 build-ids are 20 bytes, the longest in use (--build-id=0x...) are
 * rarely past 32: the bound of the callers that keep one in a fixed
 * buffer, which pass it as max and so skip a longer note. */
#define BUILD_ID_MAX 64

/* The most of a file's notes read for it, all note sections or segments
 * together: the notes a linker writes take a few hundred bytes
 * (.note.gnu.build-id: 36), and a file's owner can say gigabytes, or
 * thousands of sections, which are read where the caller runs (the event
 * loop for a newly mapped file).  A longer one is read this far. */
#define BUILD_ID_NOTES_MAX (64u << 10)

/* Where in an ELF file build_id_from_elf() looks. */
enum build_id_source {
	/* SHT_NOTE sections, or PT_NOTE segments when the section headers
	 * are gone (sstrip): what the file says of itself */
	BUILD_ID_FROM_FILE,
	/* PT_NOTE segments only: what the loader maps, the same in every
	 * copy of the file whatever its sections */
	BUILD_ID_FROM_SEGMENTS,
};

/* The first GNU build-id note of 1 to max bytes in the n bytes of notes
 * at notes (host byte order, align 4 or 8): its descriptor in *ret_id and
 * *ret_len.  Returns 0, or -ENOENT when there is none before the end or
 * before a note that runs past it. */
int build_id_parse(const void *notes, size_t n, size_t align, size_t max, const uint8_t **ret_id,
		   size_t *ret_len);

/* The same from elf's notes (see enum build_id_source), in the file's byte
 * order; *ret_id is valid until elf_end(elf).  Returns 0 or -ENOENT
 * (also when a note's bytes cannot be read). */
int build_id_from_elf(Elf *elf, enum build_id_source from, size_t max, const uint8_t **ret_id,
		      size_t *ret_len);

/* The len bytes at id as lowercase hex into ret (size bytes, NUL-
 * terminated; written only on success).  Returns 0, or -ENOBUFS when size
 * cannot hold 2 * len + 1 bytes. */
int build_id_hex(const uint8_t *id, size_t len, char *ret, size_t size);

#endif
