/* SPDX-License-Identifier: MIT */
/* Which Valgrind tool runs the process (vg.h): decided once, at load. */
#include "valgrind/vg.h"

#ifdef RQSPIN_VALGRIND
#include <valgrind/drd.h>
#include <valgrind/helgrind.h>
#endif

/* Written here, before main and before any other thread exists, and read
 * only after: a plain int (the inline lock functions load it). */
int rqspin__valgrind;

#ifdef RQSPIN_VALGRIND
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
}
#endif
