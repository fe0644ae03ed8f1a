/* SPDX-License-Identifier: MIT */
/*
 * rqspin-shim-worker: an ordinary program that uses pthread_spinlock_t and
 * knows nothing of librqspin (it links libc only). The shim scenario of
 * rqspin-bench runs it alternately as it is (glibc's spinlock) and with
 * LD_PRELOAD=librqspin-pthread.so, so both are called through the PLT the
 * way unmodified programs call them.
 *
 *   rqspin-shim-worker pair ITERS
 *       one thread, ITERS lock/unlock pairs per block, best of 5 blocks:
 *       "pair ns=<ns per pair>"
 *   rqspin-shim-worker loop THREADS MS WINDOW_MS [CS THINK]
 *       THREADS threads in a tight loop (lock, counter++, unlock) for MS
 *       milliseconds; every WINDOW_MS the main thread takes each thread's
 *       count: "loop ops=<total> secs=<s> minshare=<worst thread's share of
 *       its fair share over any whole window> ok=<1 if the counter under the
 *       lock equals the sum of the per-thread counts>". With CS and THINK:
 *       CS increments of the counter under the lock, then THINK spins on
 *       average outside it (uniform in 0..2*THINK-1), so that the lock is
 *       often free when a waiter looks (ok: counter = CS x operations).
 * Exit status 0 on success, 1 on a broken count, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 256

static pthread_spinlock_t lock;
static uint64_t counter; /* protected by lock, deliberately not atomic */
static int stop;

struct per_thread {
	uint64_t count; /* written by its thread, read by the sampler */
	char pad[64 - sizeof(uint64_t)];
} __attribute__((aligned(64)));

static struct per_thread per[MAX_THREADS];
static pthread_barrier_t start;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_pair(long iters)
{
	double best = 1e30;

	pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE);
	for (int block = 0; block < 5; block++) {
		double t0 = now_s(), dt;

		for (long i = 0; i < iters; i++) {
			pthread_spin_lock(&lock);
			/* Keeps the pair from being merged across iterations. */
			__asm__ __volatile__("" ::: "memory");
			pthread_spin_unlock(&lock);
		}
		dt = now_s() - t0;
		if (dt < best)
			best = dt;
	}
	printf("pair ns=%.3f\n", best * 1e9 / (double)iters);
	return 0;
}

static void *worker(void *arg)
{
	struct per_thread *me = arg;
	uint64_t n = 0;

	pthread_barrier_wait(&start);
	/* Relaxed: stop only ends the loop; the counts are read after join. */
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pthread_spin_lock(&lock);
		counter++;
		pthread_spin_unlock(&lock);
		/* Relaxed: the sampler needs a recent value, not an order. */
		__atomic_store_n(&me->count, ++n, __ATOMIC_RELAXED);
	}
	return NULL;
}

static unsigned cs_writes, think_spins;

/* The loop with a longer critical section and think time. Separate from
 * worker, so that the tight loop's code stays as it was. */
static void *worker_think(void *arg)
{
	struct per_thread *me = arg;
	uint64_t n = 0;
	uint32_t rng = (uint32_t)(me - per) * 2654435761u + 1;

	pthread_barrier_wait(&start);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint32_t spins;

		pthread_spin_lock(&lock);
		for (unsigned i = 0; i < cs_writes; i++) {
			counter++;
			/* One store per write, not one add of cs_writes. */
			__asm__ __volatile__("" ::: "memory");
		}
		pthread_spin_unlock(&lock);
		__atomic_store_n(&me->count, ++n, __ATOMIC_RELAXED);
		rng ^= rng << 13;
		rng ^= rng >> 17;
		rng ^= rng << 5;
		spins = rng % (2 * think_spins);
		for (uint32_t i = 0; i < spins; i++)
			__asm__ __volatile__("");
	}
	return NULL;
}

static int run_loop(int threads, long ms, long window_ms)
{
	pthread_t tid[MAX_THREADS];
	uint64_t prev[MAX_THREADS] = { 0 }, total = 0, total_writes;
	double t0, secs, minshare = 1.0;
	long windows = ms / window_ms, w;
	struct timespec nap = { .tv_sec = window_ms / 1000, .tv_nsec = (window_ms % 1000) * 1000000 };

	pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE);
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, think_spins ? worker_think : worker, &per[i])) {
			fprintf(stderr, "rqspin-shim-worker: pthread_create failed\n");
			return 2;
		}
	pthread_barrier_wait(&start);
	t0 = now_s();
	for (w = 0; w < windows; w++) {
		uint64_t cur[MAX_THREADS], sum = 0, least = UINT64_MAX;

		nanosleep(&nap, NULL);
		for (int i = 0; i < threads; i++) {
			cur[i] = __atomic_load_n(&per[i].count, __ATOMIC_RELAXED);
			sum += cur[i] - prev[i];
			if (cur[i] - prev[i] < least)
				least = cur[i] - prev[i];
		}
		if (sum && (double)least * threads / (double)sum < minshare)
			minshare = (double)least * threads / (double)sum;
		for (int i = 0; i < threads; i++)
			prev[i] = cur[i];
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	secs = now_s() - t0;
	for (int i = 0; i < threads; i++)
		total += per[i].count;
	if (think_spins)
		total_writes = total * cs_writes;
	else
		total_writes = total;
	printf("loop ops=%llu secs=%.6f minshare=%.4f ok=%d\n", (unsigned long long)total, secs,
	       minshare, counter == total_writes);
	return counter == total_writes ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && argv[1][0] == 'p') {
		long iters = atol(argv[2]);

		if (iters > 0)
			return run_pair(iters);
	} else if ((argc == 5 || argc == 7) && argv[1][0] == 'l') {
		int threads = atoi(argv[2]);
		long ms = atol(argv[3]), window = atol(argv[4]);

		if (argc == 7) {
			long cs = atol(argv[5]), think = atol(argv[6]);

			if (cs < 1 || cs > 100000 || think < 1 || think > 1000000)
				goto usage;
			cs_writes = (unsigned)cs;
			think_spins = (unsigned)think;
		}
		if (threads >= 1 && threads <= MAX_THREADS && window > 0 && ms >= window)
			return run_loop(threads, ms, window);
	}
usage:
	fprintf(stderr, "usage: %s pair ITERS | loop THREADS MS WINDOW_MS [CS THINK]\n", argv[0]);
	return 2;
}
