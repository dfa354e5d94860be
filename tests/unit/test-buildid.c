/* SPDX-License-Identifier: MIT */
/*
 * test-buildid.c - the one reader of GNU build-id notes
 * (daemon/symbols/buildid.c): the walk over notes (a valid note, a
 * truncated one, other types and names, none, an over-long id, the 8-byte
 * layout), the hex form, and ELF files made in memory in both byte
 * orders, with and without section headers, and files that claim
 * gigabytes of notes or millions of sections.  Notes are built on the heap
 * at their exact size, so a read past the end shows under ASan.  The
 * callers' own cases stay in test-elfsym, test-debuginfo, test-ksyms and
 * test-symbolize.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "symbols/buildid.h"

#define HOST_BIG (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

/* Notes being built: big-endian words when big, name and descriptor
 * padded to align. */
struct notes {
	unsigned char buf[1024];
	size_t n;
	size_t align;
	bool big;
};

/* v as size bytes at p, big-endian when big. */
static void put(unsigned char *p, uint64_t v, int size, bool big)
{
	for (int i = 0; i < size; i++)
		p[i] = (unsigned char)(big ? v >> (8 * (size - 1 - i)) : v >> (8 * i));
}

static void pad(struct notes *b)
{
	while (b->n % b->align)
		b->buf[b->n++] = 0;
}

/* Appends a note of type, name (with its NUL) and descsz bytes of desc. */
static void note(struct notes *b, uint32_t type, const char *name, const void *desc,
		 uint32_t descsz)
{
	uint32_t namesz = (uint32_t)strlen(name) + 1;

	cr_assert_lt(b->n + 12 + namesz + descsz + 2 * b->align, sizeof(b->buf));
	put(b->buf + b->n, namesz, 4, b->big);
	put(b->buf + b->n + 4, descsz, 4, b->big);
	put(b->buf + b->n + 8, type, 4, b->big);
	b->n += 12;
	memcpy(b->buf + b->n, name, namesz);
	b->n += namesz;
	pad(b);
	memcpy(b->buf + b->n, desc, descsz);
	b->n += descsz;
	pad(b);
}

/* build_id_parse() of the first n bytes of b, copied to the heap at their
 * size; the id as hex into hex ("" when none). */
static int parse_hex(const struct notes *b, size_t n, size_t max, char *hex, size_t size)
{
	unsigned char *heap = malloc(n ? n : 1);
	const uint8_t *id;
	size_t len;
	int r;

	cr_assert_not_null(heap);
	memcpy(heap, b->buf, n);
	hex[0] = '\0';
	r = build_id_parse(heap, n, b->align, max, &id, &len);
	if (r == 0) {
		cr_assert(id >= heap && id + len <= heap + n, "the id is not in the notes");
		cr_assert_eq(build_id_hex(id, len, hex, size), 0);
	}
	free(heap);
	return r;
}

/* That the first n bytes of b give the id want in hex (NULL: none). */
static void expect_id(const struct notes *b, size_t n, size_t max, const char *want)
{
	char hex[2 * (BUILD_ID_MAX + 1) + 1];
	int r = parse_hex(b, n, max, hex, sizeof(hex));

	if (!want) {
		cr_assert_eq(r, -ENOENT, "%zu bytes: found %s", n, hex);
		return;
	}
	cr_assert_eq(r, 0, "%zu bytes: none", n);
	cr_assert_str_eq(hex, want);
}

static const unsigned char id7[] = { 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03 };

Test(buildid, a_valid_note)
{
	struct notes b = { .align = 4, .big = HOST_BIG };

	note(&b, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	expect_id(&b, b.n, BUILD_ID_MAX, "deadbeef010203");
}

/* Every cut of a note, the descriptor's padding included, hides it. */
Test(buildid, a_truncated_note_is_not_read)
{
	struct notes b = { .align = 4, .big = HOST_BIG };

	note(&b, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	for (size_t cut = 0; cut < b.n; cut++)
		expect_id(&b, cut, BUILD_ID_MAX, NULL);
	/* sizes that would wrap a 32-bit sum end the walk */
	put(b.buf + 4, UINT32_MAX - 1, 4, HOST_BIG);
	expect_id(&b, b.n, SIZE_MAX, NULL);
	put(b.buf, UINT32_MAX, 4, HOST_BIG);
	expect_id(&b, b.n, SIZE_MAX, NULL);
}

/* Another type, another name or an empty descriptor is stepped over; the
 * first build-id after them counts. */
Test(buildid, other_notes_are_stepped_over)
{
	struct notes b = { .align = 4, .big = HOST_BIG };

	note(&b, NT_GNU_ABI_TAG, "GNU", id7, sizeof(id7));
	note(&b, NT_GNU_BUILD_ID, "GNUX", id7, sizeof(id7));
	note(&b, NT_GNU_BUILD_ID, "Linux", id7, 5);
	note(&b, NT_GNU_BUILD_ID, "GNU", "", 0);
	expect_id(&b, b.n, BUILD_ID_MAX, NULL);
	note(&b, NT_GNU_BUILD_ID, "GNU", id7, 3);
	note(&b, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	expect_id(&b, b.n, BUILD_ID_MAX, "deadbe");
}

Test(buildid, no_note)
{
	struct notes b = { .align = 4, .big = HOST_BIG };

	expect_id(&b, 0, BUILD_ID_MAX, NULL);
	expect_id(&b, 11, BUILD_ID_MAX, NULL);
}

/* Past max, an id is passed over for the next; with no bound it is taken,
 * and hex that has no room for it says so and writes nothing. */
Test(buildid, an_over_long_id)
{
	struct notes b = { .align = 4, .big = HOST_BIG };
	unsigned char longid[BUILD_ID_MAX + 1];
	char hex[2 * (BUILD_ID_MAX + 1) + 1], small[2 * BUILD_ID_MAX + 1] = "untouched";
	const uint8_t *id;
	size_t len;

	memset(longid, 0xab, sizeof(longid));
	note(&b, NT_GNU_BUILD_ID, "GNU", longid, sizeof(longid));
	expect_id(&b, b.n, BUILD_ID_MAX, NULL);
	cr_assert_eq(parse_hex(&b, b.n, SIZE_MAX, hex, sizeof(hex)), 0);
	cr_assert_eq(strlen(hex), 2 * sizeof(longid)); /* all of it */
	cr_assert_eq(build_id_parse(b.buf, b.n, 4, SIZE_MAX, &id, &len), 0);
	cr_assert_eq(build_id_hex(id, len, small, sizeof(small)), -ENOBUFS);
	cr_assert_eq(build_id_hex(id, len, small, 0), -ENOBUFS);
	cr_assert_str_eq(small, "untouched");
	note(&b, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	expect_id(&b, b.n, BUILD_ID_MAX, "deadbeef010203");
}

/* Notes aligned to 8 (.note.gnu.property's segment) pad to 8: read with
 * 4 the second note would be missed. */
Test(buildid, notes_aligned_to_8)
{
	struct notes b = { .align = 8, .big = HOST_BIG };

	note(&b, 5 /* NT_GNU_PROPERTY_TYPE_0 */, "GNU", id7, 4);
	note(&b, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	expect_id(&b, b.n, BUILD_ID_MAX, "deadbeef010203");
	b.align = 4;
	expect_id(&b, b.n, BUILD_ID_MAX, NULL);
}

/* An ELF64 file of the byte order big: a header, one PT_NOTE segment of
 * seg (4-aligned) and, when sec, a section header table of a
 * null section and one SHT_NOTE section of sec. */
struct elf_image {
	unsigned char buf[2048];
	size_t n;
};

static void make_elf(struct elf_image *img, bool big, const struct notes *seg,
		     const struct notes *sec)
{
	unsigned char *e = img->buf;
	size_t seg_off = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
	size_t sec_off = seg_off + seg->n, sh_off = (sec_off + (sec ? sec->n : 0) + 7) & ~(size_t)7;

	memset(img, 0, sizeof(*img));
	memcpy(e, ELFMAG, SELFMAG);
	e[EI_CLASS] = ELFCLASS64;
	e[EI_DATA] = big ? ELFDATA2MSB : ELFDATA2LSB;
	e[EI_VERSION] = EV_CURRENT;
	put(e + offsetof(Elf64_Ehdr, e_type), ET_DYN, 2, big);
	put(e + offsetof(Elf64_Ehdr, e_machine), big ? EM_PPC64 : EM_X86_64, 2, big);
	put(e + offsetof(Elf64_Ehdr, e_version), EV_CURRENT, 4, big);
	put(e + offsetof(Elf64_Ehdr, e_phoff), sizeof(Elf64_Ehdr), 8, big);
	put(e + offsetof(Elf64_Ehdr, e_ehsize), sizeof(Elf64_Ehdr), 2, big);
	put(e + offsetof(Elf64_Ehdr, e_phentsize), sizeof(Elf64_Phdr), 2, big);
	put(e + offsetof(Elf64_Ehdr, e_phnum), 1, 2, big);

	e = img->buf + sizeof(Elf64_Ehdr);
	put(e + offsetof(Elf64_Phdr, p_type), PT_NOTE, 4, big);
	put(e + offsetof(Elf64_Phdr, p_offset), seg_off, 8, big);
	put(e + offsetof(Elf64_Phdr, p_filesz), seg->n, 8, big);
	put(e + offsetof(Elf64_Phdr, p_align), 4, 8, big);
	memcpy(img->buf + seg_off, seg->buf, seg->n);
	img->n = sec_off;
	if (!sec)
		return;

	memcpy(img->buf + sec_off, sec->buf, sec->n);
	put(img->buf + offsetof(Elf64_Ehdr, e_shoff), sh_off, 8, big);
	put(img->buf + offsetof(Elf64_Ehdr, e_shentsize), sizeof(Elf64_Shdr), 2, big);
	put(img->buf + offsetof(Elf64_Ehdr, e_shnum), 2, 2, big);
	e = img->buf + sh_off + sizeof(Elf64_Shdr); /* section 0 stays null */
	put(e + offsetof(Elf64_Shdr, sh_type), SHT_NOTE, 4, big);
	put(e + offsetof(Elf64_Shdr, sh_offset), sec_off, 8, big);
	put(e + offsetof(Elf64_Shdr, sh_size), sec->n, 8, big);
	put(e + offsetof(Elf64_Shdr, sh_addralign), 4, 8, big);
	img->n = sh_off + 2 * sizeof(Elf64_Shdr);
	cr_assert_leq(img->n, sizeof(img->buf));
}

/* The hex id of img read from, "" for -ENOENT. */
static void elf_hex(struct elf_image *img, enum build_id_source from, char *hex, size_t size)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	const uint8_t *id;
	size_t len;

	cr_assert_eq(elf_library_init(), 0);
	elf = elf_memory((char *)img->buf, img->n);
	cr_assert_not_null(elf, "%s", elf_errmsg(-1));
	hex[0] = '\0';
	if (build_id_from_elf(elf, from, BUILD_ID_MAX, &id, &len) == 0)
		cr_assert_eq(build_id_hex(id, len, hex, size), 0);
}

/* Without section headers (sstrip) the file's id is its segments'; with
 * them, the sections say it unless the segments alone are asked for. */
static void check_elf(bool big)
{
	struct notes seg = { .align = 4, .big = big }, sec = { .align = 4, .big = big };
	static const unsigned char other[] = { 0x11, 0x22, 0x33, 0x44 };
	struct elf_image img;
	char hex[2 * BUILD_ID_MAX + 1];

	note(&seg, NT_GNU_ABI_TAG, "GNU", other, sizeof(other));
	note(&seg, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	make_elf(&img, big, &seg, NULL);
	elf_hex(&img, BUILD_ID_FROM_FILE, hex, sizeof(hex));
	cr_assert_str_eq(hex, "deadbeef010203");
	elf_hex(&img, BUILD_ID_FROM_SEGMENTS, hex, sizeof(hex));
	cr_assert_str_eq(hex, "deadbeef010203");

	note(&sec, NT_GNU_BUILD_ID, "GNU", other, sizeof(other));
	make_elf(&img, big, &seg, &sec);
	elf_hex(&img, BUILD_ID_FROM_FILE, hex, sizeof(hex));
	cr_assert_str_eq(hex, "11223344");
	elf_hex(&img, BUILD_ID_FROM_SEGMENTS, hex, sizeof(hex));
	cr_assert_str_eq(hex, "deadbeef010203");

	/* sections without the note: not looked for in the segments */
	sec.n = 0;
	note(&sec, NT_GNU_ABI_TAG, "GNU", other, sizeof(other));
	make_elf(&img, big, &seg, &sec);
	elf_hex(&img, BUILD_ID_FROM_FILE, hex, sizeof(hex));
	cr_assert_str_eq(hex, "");
}

Test(buildid, elf_of_this_byte_order)
{
	check_elf(HOST_BIG);
}

Test(buildid, elf_of_the_other_byte_order)
{
	check_elf(!HOST_BIG);
}

/* An ELF file of the id id7 in one note segment and one note section (its
 * header is section 1's), of this host's byte order. */
static void id7_image(struct elf_image *img)
{
	struct notes seg = { .align = 4, .big = HOST_BIG }, sec = { .align = 4, .big = HOST_BIG };

	note(&seg, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	note(&sec, NT_GNU_BUILD_ID, "GNU", id7, sizeof(id7));
	make_elf(img, HOST_BIG, &seg, &sec);
}

/* img written to a new temporary file, whose descriptor it returns. */
static int image_file(const struct elf_image *img)
{
	char path[] = "/tmp/test-buildid-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(pwrite(fd, img->buf, img->n, 0), (ssize_t)img->n);
	return fd;
}

static long max_rss_kib(void)
{
	struct rusage ru;

	cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/* A note segment and section that say 4 GiB, in a sparse file that long
 * (so libelf's bound on the file's size lets them be read): the id, in
 * their first bytes, is found from a read of BUILD_ID_NOTES_MAX, not
 * of gigabytes (perfd reads a newly mapped file's build-id on its loop). */
Test(buildid, a_note_of_gigabytes_is_read_only_as_far_as_the_cap)
{
	const uint64_t huge = 4ULL << 30;
	char hex[2 * BUILD_ID_MAX + 1];
	struct elf_image img;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Shdr sh;
	long before;
	int fd;

	id7_image(&img);
	memcpy(&eh, img.buf, sizeof(eh));
	memcpy(&ph, img.buf + eh.e_phoff, sizeof(ph));
	memcpy(&sh, img.buf + eh.e_shoff + sizeof(sh), sizeof(sh));
	ph.p_filesz = huge;
	sh.sh_size = huge;
	memcpy(img.buf + eh.e_phoff, &ph, sizeof(ph));
	memcpy(img.buf + eh.e_shoff + sizeof(sh), &sh, sizeof(sh));
	fd = image_file(&img);
	cr_assert_eq(ftruncate(fd, (off_t)(huge + img.n)), 0);

	before = max_rss_kib();
	for (int from = BUILD_ID_FROM_FILE; from <= BUILD_ID_FROM_SEGMENTS; from++) {
		_cleanup_(elf_endp) Elf *elf = NULL;
		const uint8_t *id;
		size_t len;

		cr_assert_eq(elf_open_fd(fd, &elf), 0);
		cr_assert_eq(build_id_from_elf(elf, from, BUILD_ID_MAX, &id, &len), 0, "from %d", from);
		cr_assert_eq(build_id_hex(id, len, hex, sizeof(hex)), 0);
		cr_assert_str_eq(hex, "deadbeef010203");
	}
	cr_assert_lt(max_rss_kib() - before, 16 << 10, "reading the id took %ld KiB",
		     max_rss_kib() - before);
	close(fd);
}

/* Past 65,279 sections the count is in section 0's sh_size, past 65,534
 * program headers in its sh_info; libelf allocates a descriptor per
 * section as it opens the file and reads every program header at the
 * first gelf_getphdr(), so counts of millions in a sparse file are
 * refused before libelf sees them, and small counts there are followed. */
/* The file's descriptor, open under *elf, or elf_open_fd's error. */
static int open_with_counts(struct elf_image *img, uint64_t sections, uint32_t segments,
			    Elf **elf)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh0 = { 0 };
	int fd, r;

	memcpy(&eh, img->buf, sizeof(eh));
	eh.e_shnum = 0;
	eh.e_phnum = PN_XNUM;
	memcpy(img->buf, &eh, sizeof(eh));
	sh0.sh_size = sections;
	sh0.sh_info = segments;
	memcpy(img->buf + eh.e_shoff, &sh0, sizeof(sh0));
	fd = image_file(img);
	/* room for what the counts say, as libelf checks */
	cr_assert_eq(ftruncate(fd, (off_t)(eh.e_shoff + (sections + segments) * 64 + 4096)), 0);
	*elf = NULL;
	r = elf_open_fd(fd, elf);
	if (r == 0)
		return fd; /* libelf reads through it as it goes */
	close(fd);
	return r;
}

Test(buildid, extended_numbering_is_followed_and_capped)
{
	struct elf_image img;
	size_t n;
	long before;
	Elf *elf;
	int fd;

	id7_image(&img);
	fd = open_with_counts(&img, 2, 1, &elf);
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert_eq(elf_getshdrnum(elf, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(elf_getphdrnum(elf, &n), 0);
	cr_assert_eq(n, 1, "%zu program headers", n);
	elf_end(elf);
	close(fd);

	before = max_rss_kib();
	cr_assert_eq(open_with_counts(&img, 50u << 20, 1, &elf), -EFBIG);
	cr_assert_null(elf);
	cr_assert_eq(open_with_counts(&img, 2, 50u << 20, &elf), -EFBIG);
	cr_assert_null(elf);
	cr_assert_eq(open_with_counts(&img, ELF_MAX_SECTIONS + 1, 1, &elf), -EFBIG);
	cr_assert_eq(open_with_counts(&img, 2, ELF_MAX_SEGMENTS + 1, &elf), -EFBIG);
	cr_assert_lt(max_rss_kib() - before, 16 << 10, "refusing took %ld KiB",
		     max_rss_kib() - before);
}

/* A section flagged compressed is sized from its compression header
 * alone: libelf's own gelf_getchdr() reads a non-SHF_ALLOC section whole
 * first, here 4 GiB that a sparse file says it has. */
Test(buildid, a_compressed_section_is_sized_from_its_header_alone)
{
	const uint64_t huge = 4ULL << 30;
	Elf64_Chdr ch = { .ch_type = ELFCOMPRESS_ZLIB, .ch_size = 100, .ch_addralign = 1 };
	_cleanup_(elf_endp) Elf *elf = NULL;
	struct elf_image img;
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	GElf_Shdr gsh;
	long before;
	int fd;

	id7_image(&img);
	memcpy(&eh, img.buf, sizeof(eh));
	memcpy(&sh, img.buf + eh.e_shoff + sizeof(sh), sizeof(sh));
	cr_assert_geq(img.n - sh.sh_offset, sizeof(ch));
	memcpy(img.buf + sh.sh_offset, &ch, sizeof(ch));
	sh.sh_flags = SHF_COMPRESSED;
	sh.sh_size = huge;
	memcpy(img.buf + eh.e_shoff + sizeof(sh), &sh, sizeof(sh));
	fd = image_file(&img);
	cr_assert_eq(ftruncate(fd, (off_t)(sh.sh_offset + huge)), 0);

	before = max_rss_kib();
	cr_assert_eq(elf_open_fd(fd, &elf), 0);
	cr_assert(gelf_getshdr(elf_getscn(elf, 1), &gsh));
	cr_assert_eq(elf_section_bytes(elf, &gsh), 100);
	cr_assert_lt(max_rss_kib() - before, 16 << 10, "sizing it took %ld KiB",
		     max_rss_kib() - before);
	close(fd);
}
