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
 * White-box, deterministic (rqspin_fake_holder.h): holder H takes L, and
 * its thread record is given the id of a thread S that sleeps for the whole test (what W reads
 * from /proc is then 'S'). slowpath.c is compiled once more with its test
 * hook, which runs on W's thread right after W's stall check read the
 * state.
 *  1. The hook has H unlock L (and waits until it has). W must get L (0);
 *     before the fix it failed with -ETIMEDOUT at its first check.
 *  2. No hook: H keeps L while "asleep". W must fail with -ETIMEDOUT
 *     after about T (a blocked owner is a stall), well before 20T.
 */
#include "rqspin_fake_holder.h"

#define T_NS (100 * RU_MS)

extern void (*rqs_lock_test_hook)(unsigned where);

static _Atomic int s_exit, armed;
static _Atomic pid_t sleeper_tid;

static void *s_main(void *arg)
{
	(void)arg;
	atomic_store(&sleeper_tid, ru_gettid());
	while (!atomic_load(&s_exit))
		tu_sleep_us(1000);
	return NULL;
}

/* On W's thread, inside its stall check, after the /proc read. */
static void hook(unsigned where)
{
	(void)where;
	if (atomic_exchange(&armed, 0))
		fh_release_now();
}

static struct fh_result run(bool release)
{
	struct fh_result r;

	atomic_store(&armed, release);
	r = fh_run(atomic_load(&sleeper_tid), T_NS, NULL);
	atomic_store(&armed, 0);
	return r;
}

int main(void)
{
	pthread_t s;
	struct fh_result r;

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
