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
 * White-box, deterministic: holder H takes L and its thread record is
 * given the id of a thread that has exited (what the head read: a record
 * that still names L, a tid that is gone).
 *  1. W calls rqspin_lock_timeout(L, T). At W's first deadline check
 *     (the stall_checks counter), H unlocks. W must get L (0); before the
 *     fix its first check failed it with -ETIMEDOUT.
 *  2. The same, but H keeps L: the extra wait is bounded, W fails with
 *     -ETIMEDOUT after one more T (>= 2T in all), well before 20T.
 */
#include "rqspin_util.h"

#include <rqspin/lock_diag.h>

#include "lock/registry.h"

#define T_NS (300 * RU_MS)

static rqspinlock_t L = RQSPINLOCK_INIT;
static _Atomic(struct rqspin_thread *) h_rec;
static _Atomic int h_release, h_exit, h_released;
static _Atomic pid_t dead_tid;

static void *tid_main(void *arg)
{
	(void)arg;
	atomic_store(&dead_tid, ru_gettid());
	return NULL;
}

static void *h_main(void *arg)
{
	(void)arg;
	RU_CHECK_RET(rqspin_lock(&L), 0);
	atomic_store(&h_rec, (struct rqspin_thread *)rqspin__self());
	RU_WAIT_FOR(atomic_load(&h_release), 60, "the release");
	rqspin_unlock(&L);
	atomic_store(&h_released, 1);
	RU_WAIT_FOR(atomic_load(&h_exit), 60, "the end");
	return NULL;
}

struct w_result {
	int ret;
	uint64_t ns;
};

static void *w_main(void *arg)
{
	struct w_result *r = arg;
	uint64_t t0 = tu_now_ns();

	r->ret = rqspin_lock_timeout(&L, T_NS);
	r->ns = tu_now_ns() - t0;
	if (r->ret == 0)
		rqspin_unlock(&L);
	return NULL;
}

static uint64_t stall_checks(void)
{
	struct rqspin_lock_stats s;

	rqspin_lock_stats_get(&s);
	return s.stall_checks;
}

/* H holds L under a dead thread id; W waits; H releases at W's first
 * deadline check when release is true. */
static struct w_result run(bool release)
{
	struct w_result r = { 1, 0 };
	pthread_t h, w;
	pid_t real;
	uint64_t checks0;

	atomic_store(&h_release, 0);
	atomic_store(&h_released, 0);
	atomic_store(&h_exit, 0);
	atomic_store(&h_rec, NULL);
	h = tu_thread_start(h_main, NULL);
	RU_WAIT_FOR(atomic_load(&h_rec) != NULL, 30, "H holds L");
	real = atomic_exchange(&atomic_load(&h_rec)->tid, atomic_load(&dead_tid));
	checks0 = stall_checks();
	w = tu_thread_start(w_main, &r);
	if (release) {
		RU_WAIT_FOR(stall_checks() > checks0, 60, "W's first deadline check");
		atomic_store(&h_release, 1);
		RU_WAIT_FOR(atomic_load(&h_released), 60, "H's unlock");
	}
	tu_thread_join(w);
	atomic_store(&atomic_load(&h_rec)->tid, real);
	atomic_store(&h_release, 1);
	atomic_store(&h_exit, 1);
	tu_thread_join(h);
	CHECK_EQ_U64(ru_word(&L), 0);
	return r;
}

int main(void)
{
	struct w_result r;

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
