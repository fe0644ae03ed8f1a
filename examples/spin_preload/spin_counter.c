/* An ordinary program that uses pthread_spinlock_t and knows nothing of
 * librqspin. Run it plain and with the shim preloaded (see README.md):
 *
 *   ./spin_counter 8
 *   LD_PRELOAD=path/to/librqspin-pthread.so ./spin_counter 8
 *
 * With the shim its threads queue instead of all spinning (it stays fast
 * when there are more threads than cores). The relock at the end (--relock)
 * is a bug that hangs forever with glibc; the shim reports it on stderr
 * and, by default, hangs too (glibc's semantics), but asleep; with
 * RQSPIN_PTHREAD_DEADLOCK=error it comes back as EDEADLK (with --relock
 * the exit status is 0 only if it did). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_spinlock_t lock;
static long counter;
static long iters = 200000;

static void *worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < iters; i++) {
		pthread_spin_lock(&lock);
		counter++;
		pthread_spin_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t *t;
	struct timespec a, b;
	int err;

	if (threads < 1 || threads > 1024) {
		fprintf(stderr, "usage: %s [threads 1..1024] [--relock]\n", argv[0]);
		return 2;
	}
	t = calloc((size_t)threads, sizeof(*t));
	if (!t)
		return 1;
	pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%d threads: counter %ld (expected %ld), %.1f M lock/unlock per second\n", threads,
	       counter, threads * iters,
	       threads * iters / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9) / 1e6);

	if (argc > 2 && !strcmp(argv[2], "--relock")) {
		pthread_spin_lock(&lock);
		err = pthread_spin_lock(&lock); /* glibc: hangs here */
		printf("relock: %s\n", err == EDEADLK ? "EDEADLK (detected)" : strerror(err));
		pthread_spin_unlock(&lock);
		if (err != EDEADLK)
			counter = -1; /* fail below */
	}
	free(t);
	return counter == threads * iters ? 0 : 1;
}
