/* SPDX-License-Identifier: MIT */
/*
 * qspin_unlock from a thread other than the one that locked (qspinlock.h:
 * "Any thread may release a lock, not only the one that took it"):
 *  - a lock taken by a thread that exited is unlocked by main and reused;
 *  - a lock taken by main is unlocked by another thread;
 *  - two threads hand one held lock back and forth (each unlocks a lock
 *    the other took) while a third thread uses it normally and must never
 *    get into the handed-over critical section.
 * Must pass under ThreadSanitizer too: the lock's TSan annotations have to
 * accept a release by another thread.
 */
#include <rqspin/qspinlock.h>

#include "test_util.h"

static qspinlock_t g_l = QSPINLOCK_INIT;
static uint64_t g_l_data; /* protected by g_l */

static void *try_and_keep(void *p)
{
	(void)p;
	CHECK(qspin_trylock(&g_l));
	g_l_data++;
	return NULL; /* exits holding g_l */
}

static void *unlock_other(void *p)
{
	(void)p;
	CHECK(qspin_is_locked(&g_l));
	g_l_data++;
	qspin_unlock(&g_l); /* taken by another thread */
	return NULL;
}

static void *lock_and_keep(void *p)
{
	(void)p;
	qspin_lock(&g_l);
	g_l_data++;
	return NULL;
}

static void test_exit_unlock(void)
{
	for (int round = 0; round < 100; round++) {
		/* Taken by a thread that exits: main sees it held, unlocks it. */
		tu_thread_join(tu_thread_start(try_and_keep, NULL));
		CHECK(qspin_is_locked(&g_l));
		CHECK(!qspin_trylock(&g_l));
		g_l_data++;
		qspin_unlock(&g_l);
		CHECK(!qspin_is_locked(&g_l));
		CHECK(qspin_trylock(&g_l));
		g_l_data++;

		/* Taken by main, unlocked by another thread. */
		tu_thread_join(tu_thread_start(unlock_other, NULL));
		CHECK(!qspin_is_locked(&g_l));
		CHECK_EQ_U64(g_l.w.val, 0);

		/* qspin_lock in a thread that exits, unlock in main, relock. */
		tu_thread_join(tu_thread_start(lock_and_keep, NULL));
		CHECK(qspin_is_locked(&g_l));
		g_l_data++;
		qspin_unlock(&g_l);
		qspin_lock(&g_l);
		g_l_data++;
		qspin_unlock(&g_l);
	}
	CHECK_EQ_U64(g_l_data, 100u * 7);
	CHECK_EQ_U64(g_l.w.val, 0);
}

/* ---- a lock handed back and forth ---------------------------------------- */

/*
 * Two threads pass one *held* lock between them: the holder does its part
 * of the critical section and passes the turn; the other thread continues
 * the same critical section, unlocks it (a lock it did not take), locks it
 * again and passes the turn back. A third thread only ever uses qspin_lock
 * on the same lock and must never get in while it is "held across" threads.
 */
static qspinlock_t g_pp = QSPINLOCK_INIT;
static tu_event g_turn;         /* 0 or 1: whose move */
static atomic_int g_pp_stop;
static uint64_t g_pp_data;      /* protected by g_pp */
static uint64_t g_pp_intruder;  /* protected by g_pp */
static int g_pp_state;          /* protected by g_pp: 1 = "held across threads" */
static unsigned g_pp_rounds;

static void *pingpong(void *p)
{
	int me = (int)(intptr_t)p;

	for (unsigned r = 0; r < g_pp_rounds; r++) {
		tu_event_wait(&g_turn, (unsigned)me);
		/* The lock is held (by whoever passed the turn). */
		CHECK(qspin_is_locked(&g_pp));
		CHECK(!qspin_trylock(&g_pp));
		CHECK(g_pp_state == 1);
		g_pp_data++;
		g_pp_state = 0;
		qspin_unlock(&g_pp);
		qspin_lock(&g_pp);
		CHECK(g_pp_state == 0);
		g_pp_state = 1;
		g_pp_data++;
		tu_event_set(&g_turn, (unsigned)!me);
	}
	return NULL;
}

static void *intruder(void *p)
{
	(void)p;
	while (!atomic_load_explicit(&g_pp_stop, memory_order_acquire)) {
		qspin_lock(&g_pp);
		CHECK(g_pp_state == 0); /* never inside the handed-over section */
		g_pp_intruder++;
		qspin_unlock(&g_pp);
		sched_yield();
	}
	return NULL;
}

static void test_pingpong(void)
{
	pthread_t a, b, c;

	g_pp_rounds = TU_ITERS(20000u);
	qspin_lock(&g_pp);
	g_pp_state = 1;
	tu_event_set(&g_turn, 0);
	a = tu_thread_start(pingpong, (void *)(intptr_t)0);
	b = tu_thread_start(pingpong, (void *)(intptr_t)1);
	c = tu_thread_start(intruder, NULL);
	tu_thread_join(a);
	tu_thread_join(b);
	/* The last move left the lock held (by thread b). */
	CHECK(qspin_is_locked(&g_pp));
	CHECK_EQ_U64(g_pp_data, 4ull * g_pp_rounds);
	CHECK(g_pp_state == 1);
	g_pp_state = 0;
	qspin_unlock(&g_pp);
	atomic_store(&g_pp_stop, 1);
	tu_thread_join(c);
	CHECK(!qspin_is_locked(&g_pp));
	printf("pingpong: %u rounds, intruder got in %llu times\n", g_pp_rounds,
	       (unsigned long long)g_pp_intruder);
}

int main(void)
{
	tu_watchdog(120);
	setvbuf(stdout, NULL, _IONBF, 0);
	test_exit_unlock();
	test_pingpong();
	puts("qspin_cross_unlock ok");
	return 0;
}
