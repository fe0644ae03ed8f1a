/* SPDX-License-Identifier: MIT */
/*
 * Lock microbenchmarks through Google Benchmark (bench/gbench), in C:
 *
 *   lock_unlock/<lock>      uncontended lock + unlock, one thread
 *   trylock_unlock/<lock>   uncontended successful trylock + unlock
 *   rqspin_held/held:N      rqspin lock + unlock while the thread holds
 *                           N rqspinlocks in all (the measured one
 *                           included): 1, 8, 31 (the table is full), 32
 *                           (the measured lock is past the table)
 *   contended/<lock>/threads:T   lock + unlock of one shared lock by T
 *                           threads (no FIFO locks: a fixed iteration
 *                           count can take minutes on 2 cores)
 *   slow_steal/<qspin|rqspin>  lock + unlock of a word whose tail names a
 *                           queue while its locked byte is free: each lock
 *                           misses the fast path and steals the lock in
 *                           the slow path, as nearly every acquisition does
 *                           at 4-8 threads on 2 CPUs (the queue's waiters
 *                           asleep). The tail is never followed: the
 *                           steal always succeeds with one thread.
 *   empty_loop/for|while    the loop alone (GBENCH_FOR, gbench_keep_running)
 *
 * The lock operations are the inline functions of lock_impl.h, called
 * directly, so the loop has no indirect call. cas_floor is the bare
 * acquire CAS + release store that qspin's fast paths are made of.
 *
 * main() starts and joins a thread before running anything: until a
 * process has had a second thread, glibc takes single-threaded shortcuts
 * (pthread_mutex_lock without the LOCK prefix on x86), which would make
 * the uncontended mutex look 3x cheaper than in any program that has
 * threads, i.e. any program that needs a lock.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbench/gbench.h"
#include "lock_impl.h"
#include "lock_peers.h"

static void *make(gbench_state *st, const char *name, unsigned nthreads)
{
	const struct lock_peer *p = lock_peer_find(name);
	void *obj = p ? p->create(nthreads) : NULL;

	if (!obj)
		gbench_skip_with_error(st, "cannot create the lock");
	return obj;
}

static void drop(const char *name, void *obj)
{
	if (obj)
		lock_peer_find(name)->destroy(obj);
}

/* Uncontended lock+unlock of a private lock. */
#define BM_LOCK_UNLOCK(name)                                                   \
	static void bm_lock_unlock_##name(gbench_state *st)                    \
	{                                                                      \
		void *obj = make(st, #name, 1);                                \
		void *ctx = obj ? lock_peer_find(#name)->ctx(obj, 0) : NULL;   \
		int err = 0;                                                   \
                                                                               \
		GBENCH_FOR(st) {                              \
			err |= bl_##name##_lock(obj, ctx);                     \
			bl_##name##_unlock(obj, ctx);                          \
		}                                                              \
		if (err)                                                       \
			gbench_skip_with_error(st, "lock failed");             \
		gbench_set_items_processed(st, gbench_iterations(st));         \
		drop(#name, obj);                                              \
	}

#define BM_TRYLOCK_UNLOCK(name)                                                \
	static void bm_trylock_unlock_##name(gbench_state *st)                 \
	{                                                                      \
		void *obj = make(st, #name, 1);                                \
		void *ctx = obj ? lock_peer_find(#name)->ctx(obj, 0) : NULL;   \
		bool ok = true;                                                \
                                                                               \
		GBENCH_FOR(st) {                              \
			ok &= bl_##name##_trylock(obj, ctx);                   \
			bl_##name##_unlock(obj, ctx);                          \
		}                                                              \
		if (!ok)                                                       \
			gbench_skip_with_error(st, "trylock failed");          \
		gbench_set_items_processed(st, gbench_iterations(st));         \
		drop(#name, obj);                                              \
	}

/* One lock shared by the threads of a run: thread 0 creates it before the
 * loop (the loop starts only when every thread is ready, so nobody uses
 * it earlier) and destroys it after (the loop also ends together). Only
 * for locks without a per-thread context. */
#define BM_CONTENDED(name)                                                      \
	static void *g_##name;                                                  \
	static void bm_contended_##name(gbench_state *st)                       \
	{                                                                       \
		const struct lock_peer *p = lock_peer_find(#name);              \
		int err = 0;                                                    \
                                                                                \
		if (gbench_thread_index(st) == 0)                               \
			g_##name = p->create((unsigned)gbench_num_threads(st)); \
		GBENCH_FOR(st) {                               \
			err |= bl_##name##_lock(g_##name, NULL);                \
			bl_##name##_unlock(g_##name, NULL);                     \
		}                                                               \
		if (err)                                                        \
			gbench_skip_with_error(st, "lock failed");              \
		gbench_set_items_processed(st, gbench_iterations(st));          \
		if (gbench_thread_index(st) == 0) {                             \
			p->destroy(g_##name);                                   \
			g_##name = NULL;                                        \
		}                                                               \
	}

BM_LOCK_UNLOCK(qspin)
BM_LOCK_UNLOCK(rqspin)
BM_LOCK_UNLOCK(pthread_spin)
BM_LOCK_UNLOCK(pthread_mutex)
BM_LOCK_UNLOCK(ttas)
BM_LOCK_UNLOCK(cas_floor)
BM_TRYLOCK_UNLOCK(qspin)
BM_TRYLOCK_UNLOCK(rqspin)
BM_TRYLOCK_UNLOCK(pthread_spin)
BM_TRYLOCK_UNLOCK(pthread_mutex)
BM_TRYLOCK_UNLOCK(ttas)
BM_TRYLOCK_UNLOCK(cas_floor)
BM_CONTENDED(qspin)
BM_CONTENDED(rqspin)
BM_CONTENDED(pthread_spin)
BM_CONTENDED(pthread_mutex)
BM_CONTENDED(ttas)
#ifdef RQSPIN_BENCH_HAVE_CK
BM_LOCK_UNLOCK(ck_mcs)
BM_LOCK_UNLOCK(ck_ticket)
BM_LOCK_UNLOCK(ck_clh)
BM_TRYLOCK_UNLOCK(ck_mcs)
#if BL_CK_TICKET_HAS_TRYLOCK
BM_TRYLOCK_UNLOCK(ck_ticket)
#endif
#endif

/* The loop alone, in both forms (see gbench.h). */
static void bm_empty_loop(gbench_state *st)
{
	GBENCH_FOR(st)
		gbench_clobber_memory();
	gbench_set_items_processed(st, gbench_iterations(st));
}

static void bm_empty_loop_while(gbench_state *st)
{
	while (gbench_keep_running(st))
		gbench_clobber_memory();
	gbench_set_items_processed(st, gbench_iterations(st));
}

#define HELD_MAX 32
static rqspinlock_t held_locks[HELD_MAX];

static void bm_rqspin_held(gbench_state *st)
{
	int64_t total = gbench_range(st, 0);
	rqspinlock_t *measured = &held_locks[total - 1];
	int err = 0;

	/* Hold total - 1 others, measure the last one, release LIFO. */
	for (int64_t i = 0; i < total - 1; i++)
		err |= rqspin_lock(&held_locks[i]);
	GBENCH_FOR(st) {
		err |= rqspin_lock(measured);
		rqspin_unlock(measured);
	}
	for (int64_t i = total - 2; i >= 0; i--)
		rqspin_unlock(&held_locks[i]);
	if (err)
		gbench_skip_with_error(st, "rqspin_lock failed");
	gbench_set_items_processed(st, gbench_iterations(st));
}

/* A tail of slot 0, node 0: a queue that is never visited. */
#define FAKE_TAIL (1u << 18)

static void bm_slow_steal_qspin(gbench_state *st)
{
	qspinlock_t l;

	__atomic_store_n(&l.w.val, FAKE_TAIL, __ATOMIC_RELAXED);
	GBENCH_FOR(st) {
		qspin_lock(&l);
		qspin_unlock(&l);
	}
	gbench_set_items_processed(st, gbench_iterations(st));
}

static void bm_slow_steal_rqspin(gbench_state *st)
{
	rqspinlock_t l;
	int err = 0;

	__atomic_store_n(&l.w.val, FAKE_TAIL, __ATOMIC_RELAXED);
	GBENCH_FOR(st) {
		err |= rqspin_lock(&l);
		rqspin_unlock(&l);
	}
	if (err)
		gbench_skip_with_error(st, "rqspin_lock failed");
	gbench_set_items_processed(st, gbench_iterations(st));
}

GBENCH_INIT(register_lock_benchmarks)
{
	static const struct {
		const char *name;
		gbench_fn fn;
	} uncontended[] = {
		{ "lock_unlock/cas_floor", bm_lock_unlock_cas_floor },
		{ "lock_unlock/qspin", bm_lock_unlock_qspin },
		{ "lock_unlock/rqspin", bm_lock_unlock_rqspin },
		{ "lock_unlock/pthread_spin", bm_lock_unlock_pthread_spin },
		{ "lock_unlock/pthread_mutex", bm_lock_unlock_pthread_mutex },
#ifdef RQSPIN_BENCH_HAVE_CK
		{ "lock_unlock/ck_mcs", bm_lock_unlock_ck_mcs },
		{ "lock_unlock/ck_ticket", bm_lock_unlock_ck_ticket },
		{ "lock_unlock/ck_clh", bm_lock_unlock_ck_clh },
#endif
		{ "lock_unlock/ttas", bm_lock_unlock_ttas },
		{ "trylock_unlock/cas_floor", bm_trylock_unlock_cas_floor },
		{ "trylock_unlock/qspin", bm_trylock_unlock_qspin },
		{ "trylock_unlock/rqspin", bm_trylock_unlock_rqspin },
		{ "trylock_unlock/pthread_spin", bm_trylock_unlock_pthread_spin },
		{ "trylock_unlock/pthread_mutex", bm_trylock_unlock_pthread_mutex },
#ifdef RQSPIN_BENCH_HAVE_CK
		{ "trylock_unlock/ck_mcs", bm_trylock_unlock_ck_mcs },
#if BL_CK_TICKET_HAS_TRYLOCK
		{ "trylock_unlock/ck_ticket", bm_trylock_unlock_ck_ticket },
#endif
#endif
		{ "trylock_unlock/ttas", bm_trylock_unlock_ttas },
		{ "slow_steal/qspin", bm_slow_steal_qspin },
		{ "slow_steal/rqspin", bm_slow_steal_rqspin },
		{ "empty_loop/for", bm_empty_loop },
		{ "empty_loop/while", bm_empty_loop_while },
	};
	static const struct {
		const char *name;
		gbench_fn fn;
	} contended[] = {
		{ "contended/qspin", bm_contended_qspin },
		{ "contended/rqspin", bm_contended_rqspin },
		{ "contended/pthread_spin", bm_contended_pthread_spin },
		{ "contended/pthread_mutex", bm_contended_pthread_mutex },
		{ "contended/ttas", bm_contended_ttas },
	};
	gbench_bm *b;

	for (size_t i = 0; i < sizeof(uncontended) / sizeof(uncontended[0]); i++)
		gbench_register(uncontended[i].name, uncontended[i].fn);
	b = gbench_register("rqspin_held", bm_rqspin_held);
	gbench_bm_arg_name(b, "held");
	gbench_bm_arg(b, 1);
	gbench_bm_arg(b, 8);
	gbench_bm_arg(b, 31);
	gbench_bm_arg(b, 32);
	for (size_t i = 0; i < sizeof(contended) / sizeof(contended[0]); i++) {
		b = gbench_register(contended[i].name, contended[i].fn);
		gbench_bm_thread_range(b, 1, 4);
		gbench_bm_use_real_time(b);
	}
}

static void *nothing(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (pthread_create(&t, NULL, nothing, NULL) == 0)
		pthread_join(t, NULL);
	return gbench_main(argc, argv);
}
