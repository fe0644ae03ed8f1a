/* SPDX-License-Identifier: MIT */
/* Which Valgrind tool runs the process (vg.h): decided once, at load. */
#include <stdbool.h>

#include "valgrind/vg.h"

#ifdef RQSPIN_VALGRIND
#include <link.h>
#include <stdint.h>

#include <valgrind/drd.h>
#include <valgrind/helgrind.h>
#endif

/* Written here, before main and before any other thread exists, and read
 * only after: a plain int (the inline lock functions load it). */
int rqspin__valgrind;

#ifdef RQSPIN_VALGRIND
/* The library's static state (registry and allocator tables, list heads,
 * counters) is shared with atomics too: in librqspin.so that is all of its
 * writable segments. Linked statically, those are the program's, whose
 * own data must stay checked: left as they are (docs/valgrind.md). */
static int private_statics(struct dl_phdr_info *info, size_t size, void *self)
{
	bool ours = false;
	ElfW(Half) i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum && !ours; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		ours = ph->p_type == PT_LOAD && (uintptr_t)self >= start &&
		       (uintptr_t)self - start < ph->p_memsz;
	}
	if (!ours)
		return 0;
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
		return 1; /* the program itself */
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W))
			vg_private((const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz);
	}
	return 1;
}

/* Early, so that constructors of other libraries that take locks after
 * ours find the flag set (they run after ours only if they depend on us). */
__attribute__((constructor(101))) static void vg_detect(void)
{
	static char probe;

	if (!RUNNING_ON_VALGRIND)
		return;
	/* Each request answers its default (0, resp. -2) unless its own tool
	 * runs. */
	if (DRD_GET_DRD_THREADID != 0)
		rqspin__valgrind = VG_DRD;
	else if (VALGRIND_HG_GET_ABITS(&probe, NULL, 1) != -2)
		rqspin__valgrind = VG_HELGRIND;
	else
		rqspin__valgrind = VG_OTHER;
	/* Found by an address in our own code: rqspin__valgrind may be the
	 * program's copy (a copy relocation). */
	if (VG_RACES())
		dl_iterate_phdr(private_statics, (void *)(uintptr_t)&vg_detect);
}
#endif
