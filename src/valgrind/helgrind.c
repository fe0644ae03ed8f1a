/* SPDX-License-Identifier: MIT */
/* Helgrind client requests (vg.h). Only called under helgrind. */
#include "valgrind/vg.h"

#ifdef RQSPIN_VALGRIND
#include <valgrind/helgrind.h>

void rqs_hg_private(const volatile void *p, size_t n)
{
	VALGRIND_HG_DISABLE_CHECKING(p, n);
}

void rqs_hg_fresh(void *p, size_t n)
{
	/* Tracked again, as memory this thread just allocated. */
	VALGRIND_HG_ENABLE_CHECKING(p, n);
	VALGRIND_HG_CLEAN_MEMORY(p, n);
}

void rqs_hg_hb_before(const volatile void *obj)
{
	ANNOTATE_HAPPENS_BEFORE(obj);
}

void rqs_hg_hb_after(const volatile void *obj)
{
	ANNOTATE_HAPPENS_AFTER(obj);
}

/* A try-lock, as for ThreadSanitizer: an rqspinlock never blocks for good
 * on itself (AA gives -EDEADLK), so helgrind must not call it a self
 * deadlock; it still checks the order locks are taken in. */
void rqs_hg_lock_pre(const volatile void *lock)
{
	VALGRIND_HG_MUTEX_LOCK_PRE(lock, 1);
}

void rqs_hg_lock_post(const volatile void *lock)
{
	VALGRIND_HG_MUTEX_LOCK_POST(lock);
}

void rqs_hg_unlock_pre(const volatile void *lock)
{
	VALGRIND_HG_MUTEX_UNLOCK_PRE(lock);
}

void rqs_hg_unlock_post(const volatile void *lock)
{
	VALGRIND_HG_MUTEX_UNLOCK_POST(lock);
}
#else
void rqs_hg_private(const volatile void *p, size_t n) { (void)p; (void)n; }
void rqs_hg_fresh(void *p, size_t n) { (void)p; (void)n; }
void rqs_hg_hb_before(const volatile void *obj) { (void)obj; }
void rqs_hg_hb_after(const volatile void *obj) { (void)obj; }
void rqs_hg_lock_pre(const volatile void *lock) { (void)lock; }
void rqs_hg_lock_post(const volatile void *lock) { (void)lock; }
void rqs_hg_unlock_pre(const volatile void *lock) { (void)lock; }
void rqs_hg_unlock_post(const volatile void *lock) { (void)lock; }
#endif
