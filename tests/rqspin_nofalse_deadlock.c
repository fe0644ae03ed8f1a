/* SPDX-License-Identifier: MIT */
/*
 * No false deadlocks: a thread that holds no lock is never part of a
 * cycle, so it never gets -EDEADLK.
 *
 * Eight threads on two locks: four "cycle" threads take A then B or B
 * then A (two each: real ABBA deadlocks, which may fail with -EDEADLK or
 * -ETIMEDOUT), four "plain" threads hold nothing and take A, then B, one
 * at a time. Every acquisition by a plain thread must succeed (0).
 * Mutual exclusion through a non-atomic owner word and counter per lock.
 * Bounded by the plain threads' iterations; the cycle threads run until
 * the plain threads are done. T = 1 s: a plain thread's wait never comes
 * near it unless it is failed by mistake.
 */
#include "rqspin_util.h"

#define NCYCLE 4
#define NPLAIN 4
#define PLAIN_ITERS 1000u

struct guarded {
	rqspinlock_t l;
	volatile uint64_t owner;
	uint64_t count; /* protected by l */
} __attribute__((aligned(64)));

static struct guarded G[2];
static _Atomic uint64_t ok[2];
static _Atomic uint64_t plain_fail, plain_deadlk, cycle_deadlk, cycle_timeout, cycle_ok;
static _Atomic int plain_last_err;
static _Atomic int stop;

static void cs(struct guarded *g, uint64_t id)
{
	CHECK(g->owner == 0);
	g->owner = id;
	g->count++;
	for (volatile int k = 0; k < 300; k++)
		;
	CHECK(g->owner == id);
	g->owner = 0;
}

static void *plain(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;

	for (unsigned i = 0; i < TU_ITERS(PLAIN_ITERS); i++) {
		for (int k = 0; k < 2; k++) {
			int r = rqspin_lock(&G[k].l);

			if (r != 0) {
				atomic_fetch_add(&plain_fail, 1);
				if (r == -EDEADLK)
					atomic_fetch_add(&plain_deadlk, 1);
				atomic_store(&plain_last_err, r);
				if (r == -EOWNERDEAD)
					rqspin_unlock(&G[k].l);
				continue;
			}
			cs(&G[k], id);
			atomic_fetch_add(&ok[k], 1);
			rqspin_unlock(&G[k].l);
		}
	}
	return NULL;
}

static void *cycle(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	int first = (int)(id % 2), second = 1 - first;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int r = rqspin_lock(&G[first].l);

		if (r) {
			RU_CHECK_FAILCODE(r);
			continue;
		}
		cs(&G[first], id);
		atomic_fetch_add(&ok[first], 1);
		r = rqspin_lock(&G[second].l);
		if (r == 0) {
			cs(&G[second], id);
			atomic_fetch_add(&ok[second], 1);
			rqspin_unlock(&G[second].l);
			atomic_fetch_add(&cycle_ok, 1);
		} else {
			RU_CHECK_FAILCODE(r);
			atomic_fetch_add(r == -EDEADLK ? &cycle_deadlk : &cycle_timeout, 1);
		}
		rqspin_unlock(&G[first].l);
	}
	return NULL;
}

int main(void)
{
	pthread_t p[NPLAIN], c[NCYCLE];
	uint64_t t0 = tu_now_ns();

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(240);
	RU_CHECK_RET(rqspin_set_default_timeout(1 * RU_SEC * TU_SLOWDOWN), 0);
	for (int i = 0; i < NCYCLE; i++)
		c[i] = tu_thread_start(cycle, (void *)(uintptr_t)(100 + i));
	for (int i = 0; i < NPLAIN; i++)
		p[i] = tu_thread_start(plain, (void *)(uintptr_t)(200 + i));
	for (int i = 0; i < NPLAIN; i++)
		tu_thread_join(p[i]);
	atomic_store(&stop, 1);
	for (int i = 0; i < NCYCLE; i++)
		tu_thread_join(c[i]);

	printf("%d plain x %u x 2 locks, %d cycle threads: %llu ms; plain failures %llu "
	       "(-EDEADLK %llu); cycle: ok %llu -EDEADLK %llu -ETIMEDOUT %llu\n",
	       NPLAIN, TU_ITERS(PLAIN_ITERS), NCYCLE,
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)atomic_load(&plain_fail),
	       (unsigned long long)atomic_load(&plain_deadlk),
	       (unsigned long long)atomic_load(&cycle_ok),
	       (unsigned long long)atomic_load(&cycle_deadlk),
	       (unsigned long long)atomic_load(&cycle_timeout));
	for (int k = 0; k < 2; k++) {
		CHECK_EQ_U64(G[k].owner, 0);
		CHECK_EQ_U64(G[k].count, atomic_load(&ok[k]));
		CHECK_EQ_U64(ru_word(&G[k].l), 0);
	}
	RU_EXPECT(atomic_load(&plain_fail) == 0,
		  "threads holding no lock failed %llu times (-EDEADLK %llu; last %s); want 0",
		  (unsigned long long)atomic_load(&plain_fail),
		  (unsigned long long)atomic_load(&plain_deadlk),
		  ru_err_name(atomic_load(&plain_last_err)));
	return ru_finish("rqspin_nofalse_deadlock");
}
