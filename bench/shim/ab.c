/* SPDX-License-Identifier: MIT */
/*
 * rqspin-shim-ab: an in-process A/B of the uncontended pthread_spin pair,
 * for differences of a few tenths of a nanosecond that separate processes
 * (rqspin-bench shim's `pair`) do not resolve.
 *
 *   rqspin-shim-ab [--rounds N] [--pairs N] IMPL...
 *
 * Each IMPL is `glibc` (this program's own pthread_spin_*) or the path of
 * a library that exports pthread_spin_init/lock/unlock (a build of
 * librqspin-pthread.so), loaded with dlopen(RTLD_LOCAL) so that several
 * builds sit side by side. Every round runs --pairs lock/unlock pairs of
 * each IMPL in turn, one lock per IMPL, through a function pointer; the
 * first 10 rounds warm up. Prints per IMPL the median and the 25th
 * percentile of ns per pair over the rounds, and the median's ratio to
 * the first IMPL's. Pin it to one CPU (taskset -c 1): the ratio is only
 * meaningful when every block runs on the same core.
 *
 * Several librqspin-pthread builds loaded together share one librqspin.so
 * (the first one the loader finds: set LD_LIBRARY_PATH to the newest
 * build), and so one held-lock table per thread: every build must leave
 * the table the way the others expect it (an empty table after each
 * pair). Exit status 0, 1 when a library cannot be loaded, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_IMPLS 16
#define WARMUP_ROUNDS 10

typedef int (*spin_fn)(pthread_spinlock_t *);
typedef int (*spin_init_fn)(pthread_spinlock_t *, int);

struct impl {
	const char *name;
	spin_init_fn init;
	spin_fn lock, unlock;
	double *ns; /* per measured round */
};

/* One lock per implementation, each on its own cache line. */
static struct {
	pthread_spinlock_t l;
	char pad[64 - sizeof(pthread_spinlock_t)];
} locks[MAX_IMPLS] __attribute__((aligned(64)));

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int usage(const char *msg)
{
	fprintf(stderr,
		"rqspin-shim-ab: %s\n"
		"usage: rqspin-shim-ab [--rounds N] [--pairs N] IMPL...\n"
		"  IMPL: glibc, or the path of a pthread_spin_* library (up to %d)\n"
		"  --rounds N  measured rounds (default 300, 1..100000)\n"
		"  --pairs N   lock/unlock pairs per block (default 200000, 1..100000000)\n",
		msg, MAX_IMPLS);
	return 2;
}

static int parse_count(const char *s, long max, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

static int load(struct impl *im, const char *name)
{
	void *h;

	im->name = name;
	if (strcmp(name, "glibc") == 0) {
		im->init = pthread_spin_init;
		im->lock = pthread_spin_lock;
		im->unlock = pthread_spin_unlock;
		return 0;
	}
	h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "rqspin-shim-ab: %s\n", dlerror());
		return -1;
	}
	im->init = (spin_init_fn)dlsym(h, "pthread_spin_init");
	im->lock = (spin_fn)dlsym(h, "pthread_spin_lock");
	im->unlock = (spin_fn)dlsym(h, "pthread_spin_unlock");
	if (!im->init || !im->lock || !im->unlock) {
		fprintf(stderr, "rqspin-shim-ab: %s does not export pthread_spin_*\n", name);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct impl impls[MAX_IMPLS];
	long rounds = 300, pairs = 200000;
	int n = 0, i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 || strcmp(argv[i], "--pairs") == 0) {
			long *dst = argv[i][2] == 'r' ? &rounds : &pairs;
			long max = argv[i][2] == 'r' ? 100000 : 100000000;

			if (i + 1 >= argc || parse_count(argv[i + 1], max, dst) != 0)
				return usage("bad count");
			i++;
		} else if (argv[i][0] == '-') {
			return usage("unknown option");
		} else {
			if (n == MAX_IMPLS)
				return usage("too many implementations");
			if (load(&impls[n], argv[i]) != 0)
				return 1;
			n++;
		}
	}
	if (n == 0)
		return usage("no implementation given");
	for (i = 0; i < n; i++) {
		impls[i].ns = calloc((size_t)rounds, sizeof(double));
		if (!impls[i].ns || impls[i].init(&locks[i].l, PTHREAD_PROCESS_PRIVATE) != 0) {
			fprintf(stderr, "rqspin-shim-ab: setup of %s failed\n", impls[i].name);
			return 1;
		}
	}
	for (long r = 0; r < rounds + WARMUP_ROUNDS; r++) {
		for (i = 0; i < n; i++) {
			spin_fn lk = impls[i].lock, ulk = impls[i].unlock;
			pthread_spinlock_t *l = &locks[i].l;
			double t0 = now_ns();

			for (long k = 0; k < pairs; k++) {
				lk(l);
				ulk(l);
			}
			if (r >= WARMUP_ROUNDS)
				impls[i].ns[r - WARMUP_ROUNDS] = (now_ns() - t0) / (double)pairs;
		}
	}
	for (i = 0; i < n; i++)
		qsort(impls[i].ns, (size_t)rounds, sizeof(double), cmp_double);
	printf("%-48s %10s %10s %8s\n", "implementation", "median ns", "p25 ns", "ratio");
	for (i = 0; i < n; i++) {
		double med = impls[i].ns[rounds / 2], first = impls[0].ns[rounds / 2];

		printf("%-48s %10.3f %10.3f %8.3f\n", impls[i].name, med, impls[i].ns[rounds / 4],
		       med / first);
	}
	return 0;
}
