/* SPDX-License-Identifier: MIT */
/*
 * pyruntime.c - finding the CPython runtime in a process, for the Python
 * frame walker, and the per-version struct offsets that walker reads with.
 *
 * Detection reads only files and /proc/PID/maps, never the process memory:
 * the interpreter is the mapped ELF that defines the data symbol
 * _PyRuntime (the binary itself in a static build such as Debian's
 * /usr/bin/python3.11, libpython3.X.so* in a shared build such as pyenv's).
 * Only files whose name looks like Python ("python*", "libpython*") and the
 * first mapped file (the executable, whatever it is called) are opened, so
 * a process costs a few symbol-table scans, not one per library.
 *
 * The version comes, in order of trust, from
 *   1. Py_Version (3.11+): a const int in .rodata, PY_VERSION_HEX, read
 *      from the file;
 *   2. the file name: "python3.X", "libpython3.X[abiflags].so*";
 *   3. the PY_VERSION string in .rodata, for the patch level (and for the
 *      minor of a renamed static binary before 3.11).  The linker merges
 *      string tails, so "3.8.18" is often only the end of a longer string
 *      such as a build path; a literal of its own wins, else the first
 *      string that ends in "3.X.Y" after a separator.  The patch is -1 when
 *      nothing matches.
 * Offsets were printed with offsetof() from each version's installed
 * headers and are checked against them by the unit test; they are x86_64
 * only (LP64, the struct layouts of a default, non-debug build).
 */
#include "interp/python/pyruntime.h"

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "interp/python/pyeval.h"
#include "perfd/macro.h"
#include "process/procfs.h"

#define MAX_LOADS 32

static const struct pyoffsets offsets_table[] = {
	{
		.major = 3, .minor = 8,
		.tstate_status = -1, .tstate_active_bit = -1,
		.runtime_gil = 1152, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 32, .runtime_tstate_current = 1368,
		.runtime_autotsskey = 1392, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 0, .interp_tstate_head = 8,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 176,
		.tstate_native_thread_id = -1, .tstate_frame = 24, .tstate_cframe = -1,
		.cframe_current_frame = -1, .tstate_current_frame = -1,
		.frame_code = 32, .frame_previous = 24, .frame_lasti = 104,
		.frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .frame_ident = 48,
		.code_name = 112, .code_qualname = -1, .code_filename = 104,
		.code_firstlineno = 40, .code_lnotab = 120, .code_linetable = -1,
		.code_code_adaptive = -1,
		.unicode_ascii_data = 48, .bytes_sval = 32, .var_size = 16,
	},
	{
		.major = 3, .minor = 9,
		.tstate_status = -1, .tstate_active_bit = -1,
		.runtime_gil = 352, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 32, .runtime_tstate_current = 568,
		.runtime_autotsskey = 584, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 0, .interp_tstate_head = 8,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 176,
		.tstate_native_thread_id = -1, .tstate_frame = 24, .tstate_cframe = -1,
		.cframe_current_frame = -1, .tstate_current_frame = -1,
		.frame_code = 32, .frame_previous = 24, .frame_lasti = 104,
		.frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .frame_ident = 48,
		.code_name = 112, .code_qualname = -1, .code_filename = 104,
		.code_firstlineno = 40, .code_lnotab = 120, .code_linetable = -1,
		.code_code_adaptive = -1,
		.unicode_ascii_data = 48, .bytes_sval = 32, .var_size = 16,
	},
	{
		/* f_lasti counts code units from 3.10, bytes before. */
		.major = 3, .minor = 10,
		.tstate_status = -1, .tstate_active_bit = -1,
		.runtime_gil = 352, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 32, .runtime_tstate_current = 568,
		.runtime_autotsskey = 584, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 0, .interp_tstate_head = 8,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 176,
		.tstate_native_thread_id = -1, .tstate_frame = 24, .tstate_cframe = -1,
		.cframe_current_frame = -1, .tstate_current_frame = -1,
		.frame_code = 32, .frame_previous = 24, .frame_lasti = 96,
		.frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .frame_ident = 48,
		.code_name = 112, .code_qualname = -1, .code_filename = 104,
		.code_firstlineno = 40, .code_lnotab = -1, .code_linetable = 120,
		.code_code_adaptive = -1,
		.unicode_ascii_data = 48, .bytes_sval = 32, .var_size = 16,
	},
	{
		.major = 3, .minor = 11,
		.tstate_status = -1, .tstate_active_bit = -1,
		.runtime_gil = 360, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 40, .runtime_tstate_current = 576,
		.runtime_autotsskey = 592, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 0, .interp_tstate_head = 16,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 152,
		.tstate_native_thread_id = 160, .tstate_frame = -1, .tstate_cframe = 56,
		.cframe_current_frame = 8, .tstate_current_frame = -1,
		.frame_code = 32, .frame_previous = 48, .frame_lasti = -1,
		.frame_instr = 56, .frame_owner = 69, .frame_is_entry = 68, .frame_ident = 0,
		.code_name = 120, .code_qualname = 128, .code_filename = 112,
		.code_firstlineno = 72, .code_lnotab = -1, .code_linetable = 136,
		.code_code_adaptive = 184,
		.unicode_ascii_data = 48, .bytes_sval = 32, .var_size = 16,
	},
	{
		/* The thread state moved to the thread-local _Py_tss_tstate. */
		.major = 3, .minor = 12,
		.tstate_status = 24, .tstate_active_bit = 4,
		.runtime_gil = 77432, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 40, .runtime_tstate_current = -1,
		.runtime_autotsskey = 1544, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 0, .interp_tstate_head = 72,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 136,
		.tstate_native_thread_id = 144, .tstate_frame = -1, .tstate_cframe = 56,
		.cframe_current_frame = 0, .tstate_current_frame = -1,
		.frame_code = 0, .frame_previous = 8, .frame_lasti = -1,
		.frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1, .frame_ident = 16,
		.code_name = 120, .code_qualname = 128, .code_filename = 112,
		.code_firstlineno = 68, .code_lnotab = -1, .code_linetable = 136,
		.code_code_adaptive = 192,
		.unicode_ascii_data = 40, .bytes_sval = 32, .var_size = 16,
	},
	{
		/* _PyRuntime opens with _Py_DebugOffsets ("xdebugpy"), which
		 * holds most of these offsets at run time. */
		.major = 3, .minor = 13,
		.tstate_status = 32, .tstate_active_bit = 4,
		.runtime_gil = 96104, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 632, .runtime_tstate_current = -1,
		.runtime_autotsskey = 2160, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 7264, .interp_tstate_head = 7344,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 152,
		.tstate_native_thread_id = 160, .tstate_frame = -1, .tstate_cframe = -1,
		.cframe_current_frame = -1, .tstate_current_frame = 72,
		.frame_code = 0, .frame_previous = 8, .frame_lasti = -1,
		.frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1, .frame_ident = 16,
		.code_name = 120, .code_qualname = 128, .code_filename = 112,
		.code_firstlineno = 68, .code_lnotab = -1, .code_linetable = 136,
		.code_code_adaptive = 200,
		.unicode_ascii_data = 40, .bytes_sval = 32, .var_size = 16,
	},
	{
		/* f_executable is a _PyStackRef: tag bits below the code
		 * object's address (bpf/python.bpf.h clears them); the entry
		 * frame's owner is FRAME_OWNED_BY_INTERPRETER (3), and 4 is
		 * FRAME_OWNED_BY_CSTACK. */
		.major = 3, .minor = 14,
		.tstate_status = 32, .tstate_active_bit = 4,
		.runtime_gil = 98536, .gil_last_holder = 8, .gil_locked = 16, .gil_size = 208,
		.runtime_interpreters_head = 808, .runtime_tstate_current = -1,
		.runtime_autotsskey = 2336, .tss_initialized = 0, .tss_key = 4,
		.interp_next = 7272, .interp_tstate_head = 7344,
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 152,
		.tstate_native_thread_id = 160, .tstate_frame = -1, .tstate_cframe = -1,
		.cframe_current_frame = -1, .tstate_current_frame = 72,
		.frame_code = 0, .frame_previous = 8, .frame_lasti = -1,
		.frame_instr = 56, .frame_owner = 74, .frame_is_entry = -1, .frame_ident = 16,
		.code_name = 120, .code_qualname = 128, .code_filename = 112,
		.code_firstlineno = 68, .code_lnotab = -1, .code_linetable = 136,
		.code_code_adaptive = 208,
		.unicode_ascii_data = 40, .bytes_sval = 32, .var_size = 16,
	},
};

const struct pyoffsets *pyoffsets_for(unsigned major, unsigned minor)
{
	for (size_t i = 0; i < ELEMENTSOF(offsets_table); i++)
		if (offsets_table[i].major == major && offsets_table[i].minor == minor)
			return &offsets_table[i];
	return NULL;
}

/* What one ELF file tells about a Python runtime in it. */
struct elf_facts {
	bool has_runtime, has_py_version, has_code_type;
	uint64_t runtime_vaddr, py_version_vaddr, code_type_vaddr;
	/* _Py_trampoline_func_start and _end (0: not in the file) */
	uint64_t trampoline_vaddr[2];
	uint8_t trampoline[PYRUNTIME_TRAMPOLINE_MAX];
	uint32_t trampoline_size;
	struct { uint64_t vaddr, size; } eval[PYRUNTIME_EVAL_RANGES];
	uint32_t py_version; /* PY_VERSION_HEX */
	GElf_Phdr loads[MAX_LOADS];
	size_t n_loads;
	int patch; /* from .rodata; -1 when not found or not looked for */
	unsigned rodata_minor; /* for a nameless file: minor from .rodata, 0 if none */
};

/* Parses digits at *p into *ret (at most 3), advancing *p.  Returns false
 * when there is none. */
static bool parse_small(const char **p, unsigned *ret)
{
	unsigned v = 0;
	int n = 0;

	while (isdigit((unsigned char)**p) && n < 3) {
		v = v * 10 + (unsigned)(**p - '0');
		(*p)++;
		n++;
	}
	if (n == 0 || isdigit((unsigned char)**p))
		return false;
	*ret = v;
	return true;
}

/* Classifies a file name: 1 and the version for "python3.11", "python3.6m",
 * "libpython3.13t.so.1.0"; 0 for a Python-like name without a minor
 * ("python3", "libpython3.so"); -1 for anything else.  *ret_other_abi says
 * whether the ABI flags name a build whose structures differ from the
 * default one: free-threaded ('t') or debug ('d'). */
static int parse_python_name(const char *base, unsigned *ret_major, unsigned *ret_minor,
			     bool *ret_other_abi)
{
	bool lib = strncmp(base, "libpython", 9) == 0;
	const char *p;
	unsigned major, minor;

	if (lib)
		p = base + 9;
	else if (strncmp(base, "python", 6) == 0)
		p = base + 6;
	else
		return -1;

	if (*p == '\0' || (lib && strncmp(p, ".so", 3) == 0))
		return 0;
	if (!parse_small(&p, &major))
		return -1;
	if (*p == '\0' || (lib && strncmp(p, ".so", 3) == 0))
		return 0;
	if (*p++ != '.' || !parse_small(&p, &minor))
		return -1;
	*ret_other_abi = false;
	while (*p >= 'a' && *p <= 'z') { /* ABI flags: m, d, u, t */
		if (*p == 't' || *p == 'd')
			*ret_other_abi = true;
		p++;
	}
	if (lib ? strncmp(p, ".so", 3) != 0 : *p != '\0')
		return -1;
	*ret_major = major;
	*ret_minor = minor;
	return 1;
}

/* Looks in buf for the PY_VERSION string "major.minor.P": a literal of its
 * own (after a NUL) wins, else the first string ending in it after a
 * separator.  A release tag ("rc1", "+") may follow P.  With exact_only,
 * tail-merged matches are ignored.  Returns P, or -1. */
static int scan_patch(const char *buf, size_t n, unsigned major, unsigned minor, bool exact_only)
{
	char prefix[16];
	int plen = snprintf(prefix, sizeof(prefix), "%u.%u.", major, minor);
	int first = -1;

	if (plen <= 0 || (size_t)plen >= sizeof(prefix))
		return -1;
	for (const char *s = buf, *end = buf + n; s < end;) {
		const char *m = memmem(s, (size_t)(end - s), prefix, (size_t)plen);
		const char *p;
		unsigned patch;
		char before;
		size_t tag = 0;

		if (!m)
			break;
		s = m + 1;
		before = m > buf ? m[-1] : '\0';
		if (isalnum((unsigned char)before) || before == '.')
			continue;
		p = m + plen;
		while (p < end && p - (m + plen) < 3 && isdigit((unsigned char)*p))
			p++;
		if (p == m + plen || p >= end || isdigit((unsigned char)*p))
			continue;
		while (p + tag < end && tag < 6 &&
		       (islower((unsigned char)p[tag]) || isdigit((unsigned char)p[tag]) ||
			p[tag] == '+'))
			tag++;
		if (p + tag >= end || p[tag] != '\0')
			continue;
		{
			const char *q = m + plen;

			if (!parse_small(&q, &patch))
				continue;
		}
		if (before == '\0')
			return (int)patch;
		if (first < 0 && !exact_only)
			first = (int)patch;
	}
	return first;
}

/* Reads the size bytes at vaddr from the file, through the PT_LOAD that
 * holds them all. */
static int read_at(int fd, const struct elf_facts *f, uint64_t vaddr, void *buf, size_t size)
{
	for (size_t i = 0; i < f->n_loads; i++) {
		const GElf_Phdr *ph = &f->loads[i];
		ssize_t n;

		if (vaddr < ph->p_vaddr || ph->p_filesz < size ||
		    vaddr - ph->p_vaddr > ph->p_filesz - size)
			continue;
		n = pread(fd, buf, size, (off_t)(ph->p_offset + (vaddr - ph->p_vaddr)));
		if (n < 0)
			return negative_errno();
		if ((size_t)n != size)
			return -EINVAL;
		return 0;
	}
	return -ENOENT;
}

/* Reads the 4-byte little-endian value at vaddr from the file. */
static int read_u32_at(int fd, const struct elf_facts *f, uint64_t vaddr, uint32_t *ret)
{
	unsigned char b[4];
	int r = read_at(fd, f, vaddr, b, sizeof(b));

	if (r < 0)
		return r;
	*ret = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

/* The perf trampoline template: the code between its two symbols, when
 * both are there and it is short (an x86_64 template is 11 to 15 bytes). */
static void read_trampoline(int fd, struct elf_facts *f)
{
	uint64_t start = f->trampoline_vaddr[0], end = f->trampoline_vaddr[1];

	if (start == 0 || end <= start || end - start > PYRUNTIME_TRAMPOLINE_MAX ||
	    read_at(fd, f, start, f->trampoline, end - start) < 0)
		return;
	f->trampoline_size = (uint32_t)(end - start);
}

struct file_reader {
	int fd;
	const struct elf_facts *f;
};

static int read_file_at(void *ctx, uint64_t vaddr, void *buf, size_t size)
{
	const struct file_reader *r = ctx;

	return read_at(r->fd, r->f, vaddr, buf, size);
}

/* Whether [start, end) overlaps one of elf's PLT sections. */
static bool in_plt(Elf *elf, uint64_t start, uint64_t end)
{
	static const char *const plts[] = { ".plt", ".plt.sec", ".plt.got" };

	for (size_t i = 0; i < ELEMENTSOF(plts); i++) {
		GElf_Shdr sh;

		if (elf_find_section(elf, plts[i], &sh) && start < sh.sh_addr + sh.sh_size &&
		    sh.sh_addr < end)
			return true;
	}
	return false;
}

/* The end of the executable PT_LOAD's bytes in the file that hold vaddr,
 * or 0 if none does. */
static uint64_t code_end(const struct elf_facts *f, uint64_t vaddr)
{
	for (size_t i = 0; i < f->n_loads; i++) {
		const GElf_Phdr *ph = &f->loads[i];

		if ((ph->p_flags & PF_X) && vaddr >= ph->p_vaddr && vaddr - ph->p_vaddr < ph->p_filesz)
			return ph->p_vaddr + ph->p_filesz;
	}
	return 0;
}

/* The part of the loop with no symbol (pyeval.c) as eval[1], in a file
 * with no .symtab to name it (a stripped build); eh is PT_GNU_EH_FRAME
 * (p_filesz 0: none).  Not in the PLT, and no further than the code. */
static void find_split_part(int fd, Elf *elf, struct elf_facts *f, const GElf_Phdr *eh)
{
	_cleanup_free_ uint8_t *func = NULL, *hdr = NULL;
	struct file_reader reader = { .fd = fd, .f = f };
	uint64_t start, end, limit;

	if (!f->eval[0].size || f->eval[1].size || f->eval[0].size > PYEVAL_FUNC_MAX ||
	    !eh->p_filesz || eh->p_filesz > PYEVAL_HDR_MAX)
		return;
	func = malloc(f->eval[0].size);
	hdr = malloc(eh->p_filesz);
	if (!func || !hdr || read_at(fd, f, f->eval[0].vaddr, func, f->eval[0].size) < 0 ||
	    read_at(fd, f, eh->p_vaddr, hdr, eh->p_filesz) < 0 ||
	    pyeval_split_part(func, f->eval[0].size, f->eval[0].vaddr, hdr, eh->p_filesz,
			      eh->p_vaddr, read_file_at, &reader, &start, &end) < 0)
		return;
	limit = code_end(f, start);
	if (!limit || in_plt(elf, start, end))
		return;
	f->eval[1].vaddr = start;
	f->eval[1].size = MIN(end, limit) - start;
}

/* Scans one symbol table for the symbols detection cares about. */
static void scan_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct elf_facts *f)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || sh->sh_entsize == 0)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_OBJECT && type != STT_FUNC && type != STT_NOTYPE)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || name[0] == '\0')
			continue;
		/* labels of an assembly file: no type, no size */
		if (strcmp(name, "_Py_trampoline_func_start") == 0)
			f->trampoline_vaddr[0] = sym.st_value;
		else if (strcmp(name, "_Py_trampoline_func_end") == 0)
			f->trampoline_vaddr[1] = sym.st_value;
		if (type == STT_NOTYPE)
			continue;
		if (type == STT_FUNC) {
			/* The interpreter loop, and the part of it the compiler
			 * moved out of line (only in .symtab). */
			int e = strcmp(name, "_PyEval_EvalFrameDefault") == 0 ? 0 :
				strcmp(name, "_PyEval_EvalFrameDefault.cold") == 0 ? 1 : -1;

			if (e >= 0 && sym.st_size > 0) {
				f->eval[e].vaddr = sym.st_value;
				f->eval[e].size = sym.st_size;
			}
		} else if (type == STT_OBJECT && strcmp(name, "PyCode_Type") == 0) {
			f->has_code_type = true;
			f->code_type_vaddr = sym.st_value;
		} else if (type == STT_OBJECT && strcmp(name, "_PyRuntime") == 0) {
			f->has_runtime = true;
			f->runtime_vaddr = sym.st_value;
		} else if (type == STT_OBJECT && strcmp(name, "Py_Version") == 0) {
			f->has_py_version = true;
			f->py_version_vaddr = sym.st_value;
		}
	}
}

/* The .rodata of elf, or NULL (also when it is past what the loop reads). */
static Elf_Data *find_rodata(Elf *elf)
{
	GElf_Shdr sh;
	Elf_Scn *scn = elf_find_section(elf, ".rodata", &sh);

	return scn && elf_section_bytes(elf, &sh) <= ELF_LOOP_SECTION_MAX ? elf_getdata(scn, NULL) :
									     NULL;
}

/* Reads what detection needs from the ELF file on fd: the program headers,
 * _PyRuntime, Py_Version's value, PyCode_Type, the interpreter loop and, when the version is
 * not in Py_Version, the PY_VERSION string (for major.minor when
 * name_known is false, else for the patch).  Returns 0 or -errno (-EFBIG:
 * a symbol table past ELF_LOOP_SECTION_MAX, and no _PyRuntime in another). */
static int read_facts(int fd, bool name_known, unsigned major, unsigned minor,
		      struct elf_facts *f)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	bool too_big = false, have_symtab = false;
	GElf_Phdr eh_frame_hdr = { 0 };
	GElf_Ehdr eh;
	size_t nph;
	int r;

	*f = (struct elf_facts){ .patch = -1 };
	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph) < 0)
		return -EINVAL;
	if (eh.e_machine != EM_X86_64 || eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -ENOEXEC; /* the offsets are x86_64's */

	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type == PT_LOAD && f->n_loads < MAX_LOADS)
			f->loads[f->n_loads++] = ph;
		else if (ph.p_type == PT_GNU_EH_FRAME)
			eh_frame_hdr = ph;
	}

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		/* a big unstripped program may have a big .symtab and
		 * _PyRuntime in its .dynsym: refused only if nothing else says */
		if (!elf_symtab_fits(elf, scn, &sh, ELF_LOOP_SECTION_MAX)) {
			too_big = true;
			continue;
		}
		scan_symbols(elf, scn, &sh, f);
		have_symtab |= sh.sh_type == SHT_SYMTAB;
	}
	if (too_big && !f->has_runtime)
		return -EFBIG;
	if (!f->has_runtime && !name_known)
		return 0; /* not Python; spare the .rodata scan */
	read_trampoline(fd, f);
	if (f->has_runtime && !have_symtab)
		find_split_part(fd, elf, f, &eh_frame_hdr);

	if (f->has_py_version) {
		uint32_t v;

		if (read_u32_at(fd, f, f->py_version_vaddr, &v) == 0 && (v >> 24) >= 3) {
			f->py_version = v;
			return 0;
		}
		f->has_py_version = false;
	}

	Elf_Data *ro = find_rodata(elf);
	if (!ro || !ro->d_buf)
		return 0;
	if (name_known) {
		f->patch = scan_patch(ro->d_buf, ro->d_size, major, minor, false);
		return 0;
	}
	/* A renamed static binary before 3.11: only a literal of its own can
	 * be trusted to be PY_VERSION. */
	for (unsigned m = 7; m <= 10; m++) {
		int p = scan_patch(ro->d_buf, ro->d_size, 3, m, true);

		if (p >= 0) {
			f->rodata_minor = m;
			f->patch = p;
			break;
		}
	}
	return 0;
}

/* The load bias of path in maps (the same for every segment): start -
 * (p_vaddr rounded down to a page) of a mapping that is the mapping of a
 * PT_LOAD: same page offset, same executable bit.  Both are needed: lld
 * lets segments share a file page, so one mapping's range can cover parts
 * of two segments.  Returns 0 or -ENOENT when no mapping of path is one. */
static int find_bias(const struct procmaps *maps, const char *path, const struct elf_facts *f,
		     uint64_t *ret)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];

		if (strcmp(m->path, path) != 0)
			continue;
		for (size_t j = 0; j < f->n_loads; j++) {
			const GElf_Phdr *ph = &f->loads[j];

			if (m->pgoff != (ph->p_offset & ~(page - 1)) ||
			    m->executable != ((ph->p_flags & PF_X) != 0))
				continue;
			*ret = m->start - (ph->p_vaddr & ~(page - 1));
			return 0;
		}
	}
	return -ENOENT;
}

/* The file process pid maps at m, through its mapping (pid <= 0: by its
 * path, from our root): a regular file only (procfs.h).  Not by the path
 * from the process's root: the kernel writes a mapping's path as the
 * reader sees it, so for a process chrooted without a mount namespace of
 * its own the path is from our root ("/srv/root/usr/bin/python3.14"). */
static int open_mapped(pid_t pid, const struct procmap *m)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	struct stat st;

	if (pid > 0)
		return procfs_open_mapped_file(pid, m->start, m->end, m->path,
					       makedev(m->dev_major, m->dev_minor), m->inode, &st);
	return procfs_open_in_root(AT_FDCWD, m->path, &binary);
}

static bool seen_before(const struct procmaps *maps, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (strcmp(maps->maps[j].path, maps->maps[i].path) == 0)
			return true;
	return false;
}

static void fill(struct pyruntime *p, const char *path, unsigned major, unsigned minor,
		 const struct elf_facts *f, uint64_t bias)
{
	*p = (struct pyruntime){
		.major = major,
		.minor = minor,
		.patch = f->patch,
		.bias = bias,
		.runtime_addr = f->has_runtime ? bias + f->runtime_vaddr : 0,
		.offsets = pyoffsets_for(major, minor),
	};
	snprintf(p->path, sizeof(p->path), "%s", path);
	memcpy(p->trampoline, f->trampoline, f->trampoline_size);
	p->trampoline_size = f->trampoline_size;
	if (f->has_code_type)
		p->code_type_addr = bias + f->code_type_vaddr;
	for (size_t e = 0; e < PYRUNTIME_EVAL_RANGES; e++) {
		for (size_t i = 0; i < f->n_loads && f->eval[e].size; i++) {
			const GElf_Phdr *ph = &f->loads[i];

			if (f->eval[e].vaddr < ph->p_vaddr ||
			    f->eval[e].vaddr - ph->p_vaddr >= ph->p_filesz)
				continue;
			p->eval[e].start = f->eval[e].vaddr - ph->p_vaddr + ph->p_offset;
			p->eval[e].end = p->eval[e].start + f->eval[e].size;
			break;
		}
	}
	if (p->offsets && p->runtime_addr)
		p->autotsskey_addr = p->runtime_addr + (uint64_t)p->offsets->runtime_autotsskey;
}

int pyruntime_detect(pid_t pid, const struct procmaps *maps, struct pyruntime *ret)
{
	/* A file named like Python but without a runtime: Python 2 or 3.6,
	 * reported as unsupported unless a runtime turns up elsewhere. */
	struct pyruntime old;
	bool have_old = false, old_is_lib = false, first_file = true;
	int error = 0;

	if (!maps || !ret)
		return -EINVAL;

	for (size_t i = 0; i < maps->n; i++) {
		const char *path = maps->maps[i].path;
		const char *base = strrchr(path, '/');
		_cleanup_close_ int fd = -1;
		struct elf_facts f;
		unsigned major = 0, minor = 0;
		bool other_abi = false;
		uint64_t bias;
		bool is_first = first_file;
		int kind, r;

		if (path[0] != '/' || strstr(path, " (deleted)"))
			continue;
		first_file = false;
		kind = parse_python_name(base + 1, &major, &minor, &other_abi);
		if ((kind < 0 && !is_first) || seen_before(maps, i))
			continue;

		fd = open_mapped(pid, &maps->maps[i]);
		if (fd < 0) {
			if (kind >= 0 && error == 0)
				error = fd;
			continue;
		}
		r = read_facts(fd, kind > 0, major, minor, &f);
		if (r < 0) {
			if (kind >= 0 && r != -ENOEXEC && error == 0)
				error = r;
			continue;
		}

		if (!f.has_runtime) {
			bool lib = strncmp(base + 1, "lib", 3) == 0;

			/* The library, when there is one, holds the
			 * interpreter; the executable is only its main(). */
			if (kind > 0 && (!have_old || (lib && !old_is_lib)) &&
			    (major != 3 || minor < PYRUNTIME_MIN_MINOR ||
			     minor > PYRUNTIME_MAX_MINOR) &&
			    find_bias(maps, path, &f, &bias) == 0) {
				fill(&old, path, major, minor, &f, bias);
				have_old = true;
				old_is_lib = lib;
			}
			continue;
		}

		if (f.has_py_version) {
			major = f.py_version >> 24;
			minor = (f.py_version >> 16) & 0xff;
			f.patch = (f.py_version >> 8) & 0xff;
		} else if (kind <= 0) {
			/* Unknown minor: reported as 3.0, unsupported. */
			major = 3;
			minor = f.rodata_minor;
		}
		r = find_bias(maps, path, &f, &bias);
		if (r < 0)
			continue;
		fill(ret, path, major, minor, &f, bias);
		if (other_abi) {
			/* free-threaded or debug: other structure layouts */
			ret->other_abi = true;
			ret->offsets = NULL;
			ret->autotsskey_addr = 0;
		}
		return ret->offsets ? 0 : -EPROTONOSUPPORT;
	}

	if (have_old) {
		*ret = old;
		return -EPROTONOSUPPORT;
	}
	return error < 0 ? error : -ENOENT;
}
