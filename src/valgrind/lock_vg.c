/* SPDX-License-Identifier: MIT */
/*
 * The lock operations under Valgrind: the inline functions of qspinlock.h
 * and rqspinlock.h call these when rqspin__valgrind is set. Each one runs
 * the very same inline code (compiled here without the Valgrind test) and
 * tells the tool what it did (vg.h). Async-signal-safe, as the functions
 * they stand for: client requests are instructions Valgrind interprets.
 */
#define RQSPIN__VALGRIND_INSIDE 1
#include <errno.h>

#include <rqspin/qspinlock.h>
#include <rqspin/rqspinlock.h>

#include "valgrind/vg.h"

/* The lock word is written by every thread with atomics. Done on every
 * operation: a lock has no constructor (static initialisers, zeroed
 * memory), and memory reallocated by malloc is tracked again. */
static void word_private(const void *lock)
{
	vg_private(lock, sizeof(uint32_t));
}

/* Acquire side of a lock, once it is taken. */
static void acquired_hb(const void *lock)
{
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_hb_after(lock);
	else if (rqspin__valgrind == VG_DRD)
		rqs_drd_hb_after(lock);
}

RQSPIN_API void rqspin__qspin_lock_vg(qspinlock_t *lock)
{
	word_private(lock);
	vg_internal_begin();
	qspin_lock(lock);
	vg_internal_end();
	acquired_hb(lock);
}

RQSPIN_API bool rqspin__qspin_trylock_vg(qspinlock_t *lock)
{
	bool ok;

	word_private(lock);
	vg_internal_begin();
	ok = qspin_trylock(lock);
	vg_internal_end();
	if (ok)
		acquired_hb(lock);
	return ok;
}

/* Any thread may release a qspinlock: only the edge to the next holder. */
RQSPIN_API void rqspin__qspin_unlock_vg(qspinlock_t *lock)
{
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_hb_before(lock);
	else if (rqspin__valgrind == VG_DRD)
		rqs_drd_hb_before(lock);
	vg_internal_begin();
	qspin_unlock(lock);
	vg_internal_end();
}

/* -EOWNERDEAD also hands the lock over. */
static bool rqspin_taken(int ret)
{
	return ret == 0 || ret == -EOWNERDEAD;
}

static void rq_pre(rqspinlock_t *lock)
{
	word_private(lock);
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_lock_pre(lock);
	vg_internal_begin();
}

static void rq_post(rqspinlock_t *lock, bool taken)
{
	vg_internal_end();
	if (!taken)
		return;
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_lock_post(lock);
	else if (rqspin__valgrind == VG_DRD)
		rqs_drd_lock_post(lock);
}

RQSPIN_API int rqspin__lock_vg(rqspinlock_t *lock, uint64_t timeout_ns)
{
	int ret;

	if (!lock)
		return -EINVAL;
	rq_pre(lock);
	ret = rqspin_lock_timeout(lock, timeout_ns);
	rq_post(lock, rqspin_taken(ret));
	return ret;
}

RQSPIN_API bool rqspin__trylock_vg(rqspinlock_t *lock)
{
	bool ok;

	if (!lock)
		return false;
	rq_pre(lock);
	ok = rqspin_trylock(lock);
	rq_post(lock, ok);
	return ok;
}

RQSPIN_API void rqspin__unlock_vg(rqspinlock_t *lock)
{
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_unlock_pre(lock);
	else if (rqspin__valgrind == VG_DRD)
		rqs_drd_unlock_pre(lock);
	vg_internal_begin();
	rqspin_unlock(lock);
	vg_internal_end();
	if (rqspin__valgrind == VG_HELGRIND)
		rqs_hg_unlock_post(lock);
}
