/* SPDX-License-Identifier: MIT */
/*
 * The program the Valgrind tests run (tests/valgrind/valgrind.cmake):
 *
 *   vg_prog correct   4 threads share counters under a qspinlock and an
 *                     rqspinlock (nested too), and hand objects of the
 *                     any-context allocator to each other through a ring
 *                     under the rqspinlock (filled by one thread, checked
 *                     and freed by another). Correct: helgrind and DRD must
 *                     report nothing. Checks its counters and checksums.
 *   vg_prog race      the same, plus one thread that writes a counter the
 *                     others update under the qspinlock without taking it:
 *                     helgrind and DRD must report it.
 *   vg_prog overflow  writes one byte past a 32-byte allocator object,
 *                     where the next object of its size class starts:
 *                     memcheck must report it.
 *
 * Small iteration counts: Valgrind runs the threads one at a time, slowly.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/rqspin.h>

/* -DTHREADS=... -DITERS=... for a longer run by hand. */
#ifndef THREADS
#define THREADS 4
#endif
#ifndef ITERS
#define ITERS 300
#endif
#define RING 16

static qspinlock_t qlock = QSPINLOCK_INIT;
static rqspinlock_t rlock = RQSPINLOCK_INIT;
static uint64_t q_counter;     /* under qlock */
static uint64_t r_counter;     /* under rlock */
static uint64_t nested_counter; /* under qlock, then rlock */
static uint64_t racy;          /* under qlock, except in the racer */

/* Objects in flight: under rlock. */
static uint64_t *ring[RING];
static unsigned ring_head, ring_tail;
static uint64_t sent_sum, received_sum; /* under rlock */

static void fail(const char *what)
{
	fprintf(stderr, "vg_prog: %s\n", what);
	exit(1);
}

static void rlock_or_die(rqspinlock_t *l)
{
	/* A correct program with a generous timeout: any error is a bug. */
	if (rqspin_lock_timeout(l, 10ull * 1000 * 1000 * 1000) != 0)
		fail("rqspin_lock failed");
}

/* Fill an object of n words with a pattern derived from seed. */
static uint64_t *make_obj(uint64_t seed, unsigned n)
{
	uint64_t *o = rqspin_malloc_nolock(n * sizeof(uint64_t), 0);

	if (!o)
		fail("rqspin_malloc_nolock");
	o[0] = n;
	for (unsigned i = 1; i < n; i++)
		o[i] = seed * 31 + i;
	return o;
}

static uint64_t obj_sum(const uint64_t *o)
{
	uint64_t s = 0;

	for (unsigned i = 1; i < o[0]; i++)
		s += o[i];
	return s;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;

	for (unsigned i = 0; i < ITERS; i++) {
		uint64_t seed = (uint64_t)id * ITERS + i;
		uint64_t *mine = make_obj(seed, 2 + (unsigned)(seed % 13));
		uint64_t *got = NULL;

		qspin_lock(&qlock);
		q_counter++;
		racy++;
		qspin_unlock(&qlock);

		rlock_or_die(&rlock);
		r_counter++;
		if (ring_head - ring_tail < RING) {
			sent_sum += obj_sum(mine);
			ring[ring_head++ % RING] = mine;
			mine = NULL;
		}
		if (ring_head != ring_tail && (i & 1))
			got = ring[ring_tail++ % RING];
		if (got)
			received_sum += obj_sum(got);
		rqspin_unlock(&rlock);

		/* Another thread's object, read and freed here. */
		if (got)
			rqspin_free_nolock(got);
		if (mine)
			rqspin_free_nolock(mine);

		qspin_lock(&qlock);
		rlock_or_die(&rlock);
		nested_counter++;
		rqspin_unlock(&rlock);
		qspin_unlock(&qlock);
	}
	return NULL;
}

static void *racer(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < ITERS; i++)
		racy += 2; /* the planted race: no lock */
	return NULL;
}

static int run_threads(int with_racer)
{
	pthread_t t[THREADS + 1];
	unsigned n = THREADS;

	for (unsigned i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i))
			fail("pthread_create");
	if (with_racer && pthread_create(&t[n++], NULL, racer, NULL))
		fail("pthread_create");
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);

	while (ring_tail != ring_head) {
		uint64_t *o = ring[ring_tail++ % RING];

		received_sum += obj_sum(o);
		rqspin_free_nolock(o);
	}
	if (q_counter != THREADS * ITERS || r_counter != THREADS * ITERS ||
	    nested_counter != THREADS * ITERS)
		fail("a counter is wrong");
	if (!with_racer && racy != THREADS * ITERS)
		fail("the racy counter is wrong without a racer");
	if (sent_sum != received_sum)
		fail("objects changed in flight");
	/* Zero-size requests take the described path too (an object memcheck
	 * was never told of would be reported at its free). */
	for (unsigned i = 0; i < 4; i++) {
		void *z = rqspin_malloc_nolock(0, 0);

		if (!z)
			fail("rqspin_malloc_nolock(0)");
		rqspin_free_nolock(z);
	}
	printf("vg_prog: %u threads x %u iterations, counters and checksums right\n", THREADS,
	       ITERS);
	return 0;
}

static int overflow(void)
{
	/* 32 is a size class: natively, p[32] is the next object's first
	 * byte. */
	unsigned char *p = rqspin_malloc_nolock(32, 0);
	unsigned char *q = rqspin_malloc_nolock(32, 0);

	if (!p || !q)
		fail("rqspin_malloc_nolock");
	memset(q, 0, 32);
	memset(p, 0, 32);
	p[32] = 0x5a; /* the planted overflow */
	printf("vg_prog: wrote past a 32-byte object\n");
	rqspin_free_nolock(p);
	rqspin_free_nolock(q);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "correct";

	if (!strcmp(mode, "correct"))
		return run_threads(0);
	if (!strcmp(mode, "race"))
		return run_threads(1);
	if (!strcmp(mode, "overflow"))
		return overflow();
	fprintf(stderr, "usage: vg_prog correct|race|overflow\n");
	return 2;
}
