/* SPDX-License-Identifier: MIT */
/*
 * A waiter whose deadline passes finds the thread it waits for in the held
 * tables, then reads that thread's state from /proc. If the thread
 * released the lock between the two reads and then slept (or began to
 * exit, which is not always 'Z' at once), the state says "asleep" but the
 * lock is changing hands. A soak of the test suite with two CPU hogs saw
 * rqspin_preempt fail that way: its pending waiter got -ETIMEDOUT just as
 * the preempted owner released and exited.
 *
 * White-box, deterministic: holder H takes L, and its thread record is
 * given the id of a thread S that sleeps for the whole test (what W reads
 * from /proc is then 'S'). slowpath.c is compiled once more with its test
 * hook, which runs on W's thread right after W's stall check read the
 * state.
 *  1. The hook has H unlock L (and waits until it has). W must get L (0);
 *     before the fix it failed with -ETIMEDOUT at its first check.
 *  2. No hook: H keeps L while "asleep". W must fail with -ETIMEDOUT
 *     after about T (a blocked owner is a stall), well before 20T.
 */
#include "rqspin_util.h"

#include "lock/registry.h"

#define T_NS (100 * RU_MS)

extern void (*rqs_lock_test_hook)(unsigned where);

static rqspinlock_t L = RQSPINLOCK_INIT;
static _Atomic(struct rqspin_thread *) h_rec;
static _Atomic int h_release, h_exit, h_released, s_exit, armed;
static _Atomic pid_t sleeper_tid;

static void *s_main(void *arg)
{
	(void)arg;
	atomic_store(&sleeper_tid, ru_gettid());
	while (!atomic_load(&s_exit))
		tu_sleep_us(1000);
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

/* On W's thread, inside its stall check, after the /proc read. */
static void hook(unsigned where)
{
	(void)where;
	if (!atomic_exchange(&armed, 0))
		return;
	atomic_store(&h_release, 1);
	RU_WAIT_FOR(atomic_load(&h_released), 60, "H's unlock");
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

static struct w_result run(bool release)
{
	struct w_result r = { 1, 0 };
	pthread_t h, w;
	pid_t real;

	atomic_store(&h_release, 0);
	atomic_store(&h_released, 0);
	atomic_store(&h_exit, 0);
	atomic_store(&h_rec, NULL);
	h = tu_thread_start(h_main, NULL);
	RU_WAIT_FOR(atomic_load(&h_rec) != NULL, 30, "H holds L");
	real = atomic_exchange(&atomic_load(&h_rec)->tid, atomic_load(&sleeper_tid));
	atomic_store(&armed, release);
	w = tu_thread_start(w_main, &r);
	tu_thread_join(w);
	atomic_store(&armed, 0);
	atomic_store(&atomic_load(&h_rec)->tid, real);
	atomic_store(&h_release, 1);
	atomic_store(&h_exit, 1);
	tu_thread_join(h);
	CHECK_EQ_U64(ru_word(&L), 0);
	return r;
}

int main(void)
{
	pthread_t s;
	struct w_result r;

	s = tu_thread_start(s_main, NULL);
	RU_WAIT_FOR(atomic_load(&sleeper_tid) > 0, 30, "the sleeper");
	rqs_lock_test_hook = hook;

	r = run(true);
	printf("holder that released between the tables and /proc, then slept: %s after %llu ms\n",
	       ru_err_name(r.ret), (unsigned long long)(r.ns / RU_MS));
	RU_EXPECT(r.ret == 0, "W got %s, want 0 (the lock was changing hands)",
		  ru_err_name(r.ret));

	r = run(false);
	printf("holder asleep with the lock: %s after %llu ms (T %llu ms)\n", ru_err_name(r.ret),
	       (unsigned long long)(r.ns / RU_MS), (unsigned long long)(T_NS / RU_MS));
	RU_EXPECT(r.ret == -ETIMEDOUT, "W got %s, want -ETIMEDOUT", ru_err_name(r.ret));
	RU_EXPECT(r.ns >= T_NS - T_NS / 10 && r.ns < 20 * T_NS,
		  "W failed after %llu ms, want [~T, 20T)", (unsigned long long)(r.ns / RU_MS));

	rqs_lock_test_hook = NULL;
	atomic_store(&s_exit, 1);
	tu_thread_join(s);
	return ru_finish("rqspin_stall_released");
}
