/* SPDX-License-Identifier: MIT */
/*
 * A waiter whose deadline passes looks up the thread it waits for in the
 * held tables, then reads that thread's state from /proc. If the thread
 * released the lock and exited between the two reads, it is "gone": the
 * lock is changing hands, not stalled. CI caught rqspin_preempt failing
 * that way under load: the pending waiter took the lock, unlocked and
 * exited while the queue head was between its two reads; the head failed
 * with -ETIMEDOUT, and every waiter queued behind it with it.
 *
 * White-box, deterministic (rqspin_fake_holder.h): holder H takes L and
 * its thread record is given the id of a thread that has exited (what the head read: a record
 * that still names L, a tid that is gone).
 *  1. W calls rqspin_lock_timeout(L, T). At W's first deadline check
 *     (the stall_checks counter), H unlocks. W must get L (0); before the
 *     fix its first check failed it with -ETIMEDOUT.
 *  2. The same, but H keeps L: the extra wait is bounded, W fails with
 *     -ETIMEDOUT after one more T (>= 2T in all), well before 20T.
 */
#include "rqspin_fake_holder.h"

#include <rqspin/lock_diag.h>

#define T_NS (300 * RU_MS)

static _Atomic pid_t dead_tid;

static void *tid_main(void *arg)
{
	(void)arg;
	atomic_store(&dead_tid, ru_gettid());
	return NULL;
}

static uint64_t stall_checks(void)
{
	struct rqspin_lock_stats s;

	rqspin_lock_stats_get(&s);
	return s.stall_checks;
}

static uint64_t checks0;

/* H releases at W's first deadline check. */
static void release_at_first_check(void)
{
	RU_WAIT_FOR(stall_checks() > checks0, 60, "W's first deadline check");
	fh_release_now();
}

/* H holds the lock under a dead thread id; W waits; H releases at W's
 * first deadline check when release is true. */
static struct fh_result run(bool release)
{
	checks0 = stall_checks();
	return fh_run(atomic_load(&dead_tid), T_NS, release ? release_at_first_check : NULL);
}

int main(void)
{
	struct fh_result r;

	tu_thread_join(tu_thread_start(tid_main, NULL));
	CHECK(atomic_load(&dead_tid) > 0);

	r = run(true);
	printf("gone holder that releases at the first check: %s after %llu ms\n",
	       ru_err_name(r.ret), (unsigned long long)(r.ns / RU_MS));
	RU_EXPECT(r.ret == 0, "W got %s, want 0 (the lock was changing hands)",
		  ru_err_name(r.ret));

	r = run(false);
	printf("gone holder that keeps the lock: %s after %llu ms (T %llu ms)\n",
	       ru_err_name(r.ret), (unsigned long long)(r.ns / RU_MS),
	       (unsigned long long)(T_NS / RU_MS));
	RU_EXPECT(r.ret == -ETIMEDOUT, "W got %s, want -ETIMEDOUT", ru_err_name(r.ret));
	RU_EXPECT(r.ns >= 2 * T_NS - T_NS / 10 && r.ns < 20 * T_NS,
		  "W failed after %llu ms, want [~2T, 20T)", (unsigned long long)(r.ns / RU_MS));
	return ru_finish("rqspin_stall_gone");
}
