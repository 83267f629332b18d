/* SPDX-License-Identifier: MIT */
/*
 * Naming a callback in a report, the way addr2line would: "sym (file+off)".
 *
 * dladdr() names a symbol only if its object exports it, which a static
 * function or a program built without -rdynamic does not; so the
 * object's own symbol table (.symtab, else .dynsym) is read from its
 * file, mapped read-only for the lookup.  Only a first report comes here
 * (report.c), never a call's path, and nothing is allocated: the hog
 * that reports may have preempted a thread holding the malloc lock.
 */
#include "internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The mapped file: bounds-checked views into it. */
struct image {
	const unsigned char *p;
	size_t size;
};

static const void *at(const struct image *im, uint64_t off, uint64_t len)
{
	return off <= im->size && len <= im->size - off ? im->p + off : NULL;
}

/* Section header @i, NULL where it lies outside the file. */
static const ElfW(Shdr) * section(const struct image *im,
				  const ElfW(Ehdr) * eh, uint64_t i)
{
	return at(im, eh->e_shoff + i * eh->e_shentsize, sizeof(ElfW(Shdr)));
}

/* The function of symbol table @sh that holds @value, its name into
 * @name.  A symbol of size 0 matches only its first byte. */
static bool in_table(const struct image *im, const ElfW(Ehdr) * eh,
		     const ElfW(Shdr) * sh, uint64_t value, char *name,
		     size_t size)
{
	const ElfW(Shdr) *strs = section(im, eh, sh->sh_link);
	const ElfW(Sym) *syms = at(im, sh->sh_offset, sh->sh_size);
	size_t i, n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	if (!strs || !syms || sh->sh_entsize != sizeof(*syms))
		return false;
	for (i = 0; i < n; i++) {
		const ElfW(Sym) *s = &syms[i];
		const char *str;

		/* ELF32_ST_TYPE is the same low nibble */
		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_value ||
		    value < s->st_value ||
		    value >= s->st_value + (s->st_size ? s->st_size : 1))
			continue;
		str = at(im, strs->sh_offset + s->st_name, 1);
		if (!str || s->st_name >= strs->sh_size)
			continue;
		snprintf(name, size, "%.*s", (int)(strs->sh_size - s->st_name),
			 str);
		return true;
	}
	return false;
}

/* .symtab first (every function), then .dynsym (the exported ones).
 * @addr lies @off into the object: a non-PIE program's symbols are
 * absolute addresses, a PIE's and a library's offsets. */
static bool in_image(const struct image *im, uint64_t addr, uint64_t off,
		     char *name, size_t size)
{
	const ElfW(Ehdr) *eh = at(im, 0, sizeof(*eh));
	uint32_t want[2] = { SHT_SYMTAB, SHT_DYNSYM };
	uint64_t value;
	unsigned int k, i;

	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_shentsize != sizeof(ElfW(Shdr)))
		return false;
	value = eh->e_type == ET_EXEC ? addr : off;
	for (k = 0; k < 2; k++)
		for (i = 0; i < eh->e_shnum; i++) {
			const ElfW(Shdr) *sh = section(im, eh, i);

			if (sh && sh->sh_type == want[k] &&
			    in_table(im, eh, sh, value, name, size))
				return true;
		}
	return false;
}

/* The function of @file holding @addr, @off into it. */
static bool from_file(const char *file, uint64_t addr, uint64_t off,
		      char *name, size_t size)
{
	struct image im = { MAP_FAILED, 0 };
	struct stat st;
	bool found;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		im.size = (size_t)st.st_size;
		im.p = mmap(NULL, im.size, PROT_READ, MAP_PRIVATE, fd, 0);
	}
	close(fd); /* the mapping stays */
	if (im.p == MAP_FAILED)
		return false;
	found = in_image(&im, addr, off, name, size);
	munmap((void *)im.p, im.size);
	return found;
}

void cpuhog_i_symbol_describe(const void *addr, char *buf, size_t size)
{
	char sym[128] = "";
	const char *file, *path;
	Dl_info di = { 0 };
	uint64_t off;

	if (!dladdr(addr, &di) || !di.dli_fname) {
		snprintf(buf, size, "%p", addr);
		return;
	}
	off = (uint64_t)((const char *)addr - (const char *)di.dli_fbase);
	/* glibc names the main program by argv[0], relative to a working
	 * directory that may have changed: its file is /proc/self/exe */
	path = di.dli_fname;
	if (!path[0] || !strcmp(path, program_invocation_name))
		path = "/proc/self/exe";
	if (di.dli_sname)
		snprintf(sym, sizeof(sym), "%s", di.dli_sname);
	else /* sym stays "" where the file names nothing */
		from_file(path, (uintptr_t)addr, off, sym, sizeof(sym));
	file = strrchr(di.dli_fname, '/');
	file = file ? file + 1 : di.dli_fname;
	snprintf(buf, size, "%s%s(%s+%#llx)", sym, sym[0] ? " " : "",
		 file[0] ? file : "main program", (unsigned long long)off);
}
