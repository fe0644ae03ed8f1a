/* SPDX-License-Identifier: MIT */
/* DRD client requests (vg.h). Only called under DRD. */
#include "valgrind/vg.h"

#ifdef RQSPIN_VALGRIND
#include <valgrind/drd.h>

void rqs_drd_private(const volatile void *p, size_t n)
{
	ANNOTATE_BENIGN_RACE_SIZED(p, n, "librqspin internal (C11 atomics)");
}

void rqs_drd_fresh(void *p, size_t n)
{
	VALGRIND_DO_CLIENT_REQUEST_STMT(VG_USERREQ__DRD_FINISH_SUPPRESSION, p, n, 0, 0, 0);
	ANNOTATE_NEW_MEMORY(p, n);
}

void rqs_drd_hb_before(const volatile void *obj)
{
	ANNOTATE_HAPPENS_BEFORE(obj);
}

void rqs_drd_hb_after(const volatile void *obj)
{
	ANNOTATE_HAPPENS_AFTER(obj);
}

void rqs_drd_lock_post(const volatile void *lock)
{
	ANNOTATE_WRITERLOCK_ACQUIRED(lock);
}

void rqs_drd_unlock_pre(const volatile void *lock)
{
	ANNOTATE_WRITERLOCK_RELEASED(lock);
}

/* Operations between vg_internal_begin and _end on this thread, counting
 * signal handlers' that interrupted one: recording resumes at the
 * outermost end only. The counter is the thread's own; a handler that
 * lands between the increment and the request records its own accesses
 * (a window of a few instructions: at worst a report, never a missed
 * race). */
static __thread unsigned ignoring __attribute__((tls_model("initial-exec")));

void rqs_drd_record(int on)
{
	if (on) {
		if (--ignoring == 0)
			ANNOTATE_IGNORE_READS_AND_WRITES_END();
	} else if (ignoring++ == 0) {
		ANNOTATE_IGNORE_READS_AND_WRITES_BEGIN();
	}
}
#else
void rqs_drd_private(const volatile void *p, size_t n) { (void)p; (void)n; }
void rqs_drd_fresh(void *p, size_t n) { (void)p; (void)n; }
void rqs_drd_hb_before(const volatile void *obj) { (void)obj; }
void rqs_drd_hb_after(const volatile void *obj) { (void)obj; }
void rqs_drd_lock_post(const volatile void *lock) { (void)lock; }
void rqs_drd_unlock_pre(const volatile void *lock) { (void)lock; }
void rqs_drd_record(int on) { (void)on; }
#endif
