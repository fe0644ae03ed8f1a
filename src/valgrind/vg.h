/* SPDX-License-Identifier: MIT */
/*
 * Describing the library to Valgrind's tools (docs/valgrind.md).
 *
 * rqspin__valgrind (rqspin/static/lock_word.h) says which tool runs the process, once,
 * at load time (detect.c). Natively every hook here is one predictable
 * branch on it. Under a race detector (helgrind, DRD):
 *  - qspinlock, which any thread may release, is a happens-before edge
 *    from each unlock to the next lock (vg_hb_*), as for ThreadSanitizer;
 *  - rqspinlock is a lock: helgrind sees a mutex, DRD a reader-writer lock
 *    taken for writing (DRD's only public lock annotation);
 *  - the library's own shared words (lock words, thread records, queue
 *    nodes, allocator lists) are ordered by C11 atomics, which neither
 *    tool models: they are excluded from checking (vg_private, and
 *    vg_internal_begin/end around whole operations for DRD), so that what
 *    is left is the program's own memory.
 * Under memcheck the allocator announces its objects (alloc/sanitize.c).
 * Without the Valgrind headers (RQSPIN_VALGRIND off) all of it compiles to
 * nothing and the flag stays 0.
 */
#ifndef RQSPIN_VALGRIND_VG_H
#define RQSPIN_VALGRIND_VG_H

#include <stddef.h>

#include <rqspin/static/lock_word.h>

#include "common/compiler.h"

/* Values of rqspin__valgrind. */
enum vg_tool {
	VG_NATIVE = 0,
	VG_OTHER = 1, /* memcheck, or a tool without race checks */
	VG_HELGRIND = 2,
	VG_DRD = 3,
};

#define VG_ON() RQS_UNLIKELY(rqspin__valgrind != VG_NATIVE)
#define VG_RACES() RQS_UNLIKELY(rqspin__valgrind >= VG_HELGRIND)

/* What the tool is told (helgrind.c, drd.c). */
void rqs_hg_private(const volatile void *p, size_t n);
void rqs_hg_fresh(void *p, size_t n);
void rqs_hg_hb_before(const volatile void *obj);
void rqs_hg_hb_after(const volatile void *obj);
void rqs_hg_lock_pre(const volatile void *lock);
void rqs_hg_lock_post(const volatile void *lock);
void rqs_hg_unlock_pre(const volatile void *lock);
void rqs_hg_unlock_post(const volatile void *lock);
void rqs_drd_private(const volatile void *p, size_t n);
void rqs_drd_fresh(void *p, size_t n);
void rqs_drd_hb_before(const volatile void *obj);
void rqs_drd_hb_after(const volatile void *obj);
void rqs_drd_lock_post(const volatile void *lock);
void rqs_drd_unlock_pre(const volatile void *lock);
void rqs_drd_record(int on);

/* [p, p+n) is the library's and synchronised by atomics: never checked. */
static inline void vg_private(const volatile void *p, size_t n)
{
	if (VG_RACES()) {
		if (rqspin__valgrind == VG_HELGRIND)
			rqs_hg_private(p, n);
		else
			rqs_drd_private(p, n);
	}
}

/* [p, p+n) is handed to the caller as new memory, with no history (an
 * allocator object: its last user's accesses are ordered by the free and
 * the allocation, through atomics the tools do not see). */
static inline void vg_fresh(void *p, size_t n)
{
	if (VG_RACES()) {
		if (rqspin__valgrind == VG_HELGRIND)
			rqs_hg_fresh(p, n);
		else
			rqs_drd_fresh(p, n);
	}
}

/* A library operation that only touches library memory (queue nodes,
 * thread records) runs between these: DRD stops recording this thread's
 * accesses; helgrind has no such switch (everything it would see is
 * vg_private). They nest (a signal handler's operation inside an
 * interrupted one), counted per thread in drd.c. */
static inline void vg_internal_begin(void)
{
	if (rqspin__valgrind == VG_DRD)
		rqs_drd_record(0);
}

static inline void vg_internal_end(void)
{
	if (rqspin__valgrind == VG_DRD)
		rqs_drd_record(1);
}

#endif /* RQSPIN_VALGRIND_VG_H */
