/* SPDX-License-Identifier: MIT */
/*
 * Signal handlers using storage at random points of the code they
 * interrupt. Each worker thread has its own timer (timer_create,
 * SIGEV_THREAD_ID) that fires every few tens of
 * microseconds (CLOCK_MONOTONIC: CPU-time timers only fire on the
 * scheduler tick); the worker creates, updates, deletes,
 * copies and destroys values of its owners in many maps, and its handler
 * does gets, creates, deletes, updates, copies and owner destructions on
 * the same owners (so it lands inside updates of the very owner and value
 * it touches: those must end in -EDEADLK or success, never a hang). Values
 * are pairs (a, ~a) written under their lock; every read checks the pair.
 * The first storage call of each worker is made by its handler (lazy
 * registration from a handler). Ends with the leak check.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include <rqspin/alloc.h>
#include <rqspin/lock_diag.h>
#include <rqspin/storage.h>

#include "test_util.h"

#ifdef TU_TSAN
/* liburcu is not instrumented: its own call_rcu/rcu_barrier bookkeeping
 * (calloc in one thread, free in its worker, ordered by futexes that
 * ThreadSanitizer cannot see) would be reported. The library's frees in its
 * call_rcu callbacks are not affected (they are called from librqspin, and
 * annotated). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:liburcu-bp.so\ncalled_from_lib:liburcu-common.so\n";
}
#endif

#define NTHREADS 2
#define NMAPS 18
#define NOWN 4
#define SIG (SIGRTMIN + 3)

struct val {
	uint64_t a, b;
};

static struct rqspin_storage_map *maps[NMAPS];

enum { RES_OK, RES_NOENT, RES_EXIST, RES_DEADLK, RES_TIMEDOUT, RES_IDRM, RES_N };

struct worker {
	int id;
	struct rqspin_storage_owner own[NOWN];
	timer_t timer;
	tu_rng hrng; /* the handler's own generator */
	_Atomic int armed;
	unsigned long handled;
	unsigned long res[RES_N]; /* handler results (written by the handler only) */
	unsigned long main_res[RES_N];
};

static struct worker workers[NTHREADS];
static __thread struct worker *self;

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

/* Async-signal-safe classification; anything else fails the test. */
static void count(unsigned long *res, int ret)
{
	switch (ret) {
	case 0: res[RES_OK]++; break;
	case -ENOENT: res[RES_NOENT]++; break;
	case -EEXIST: res[RES_EXIST]++; break;
	case -EDEADLK: res[RES_DEADLK]++; break;
	case -ETIMEDOUT: res[RES_TIMEDOUT]++; break;
	case -EIDRM: res[RES_IDRM]++; break;
	default:
		tu_write_str("unexpected error ");
		tu_write_u64((uint64_t)-ret);
		tu_write_str("\n");
		abort();
	}
}

static void check_pair(const struct val *v)
{
	CHECK(v->b == ~v->a);
}

/* Read a value under its lock (async-signal-safe). */
static int read_locked(void *p, struct val *out)
{
	rqspinlock_t *lk = rqspin_storage_value_lock(p);
	int ret = rqspin_lock(lk);

	if (ret)
		return ret;
	memcpy(out, p, sizeof(*out));
	rqspin_unlock(lk);
	check_pair(out);
	return 0;
}

static void one_op(struct worker *w, tu_rng *r, unsigned long *res, bool in_handler)
{
	int m = (int)tu_rng_below(r, NMAPS), o = (int)tu_rng_below(r, NOWN);
	struct rqspin_storage_owner *ow = &w->own[o];
	uint64_t a = tu_rng_next(r);
	struct val v = { a, ~a }, out;
	unsigned op = tu_rng_below(r, 100);
	int ret = 0;
	void *p;

	if (op < 25) {
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, NULL, 0, &ret);
		if (p) {
			ret = read_locked(p, &out);
		}
		rqspin_storage_read_unlock();
	} else if (op < 45) {
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, &v, RQSPIN_STORAGE_F_CREATE, &ret);
		if (p)
			ret = read_locked(p, &out);
		rqspin_storage_read_unlock();
	} else if (op < 65) {
		ret = rqspin_storage_update(maps[m], ow, &v, tu_rng_below(r, 3));
	} else if (op < 80) {
		ret = rqspin_storage_lookup_copy(maps[m], ow, &out);
		if (ret == 0)
			check_pair(&out);
	} else if (op < 98) {
		ret = rqspin_storage_delete(maps[m], ow);
	} else {
		/* A destroy that lands inside an update of this owner hands
		 * its cleanup to the interrupted code, and ends the owner:
		 * creations on it give -EIDRM until the thread zeroes it. */
		rqspin_storage_owner_destroy(ow);
		if (!in_handler)
			*ow = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
	}
	/* Destroyed by a handler: reused (zeroed) by the interrupted code,
	 * which knows it is not using it. */
	if (ret == -EIDRM && !in_handler)
		*ow = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
	count(res, ret);
}

static void handler(int sig)
{
	struct worker *w = self;
	int saved = errno;

	(void)sig;
	if (!w || !atomic_load_explicit(&w->armed, memory_order_relaxed)) {
		errno = saved;
		return;
	}
	__atomic_store_n(&w->handled, w->handled + 1, __ATOMIC_RELAXED);
	one_op(w, &w->hrng, w->res, true);
	errno = saved;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sigevent sev;
	struct itimerspec its;
	tu_rng r;
	unsigned iters = TU_ITERS(400000u);

	self = w;
	tu_rng_seed(&r, 500 + (uint64_t)w->id);
	tu_rng_seed(&w->hrng, 900 + (uint64_t)w->id);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIG;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &w->timer) == 0);
	memset(&its, 0, sizeof(its));
	its.it_value.tv_nsec = 20000;
	its.it_interval.tv_nsec = 17000 * (long)TU_SLOWDOWN;
	atomic_store(&w->armed, 1);
	CHECK(timer_settime(w->timer, 0, &its, NULL) == 0);
	/* Let the handler make this thread's first storage call. */
	while (__atomic_load_n(&w->handled, __ATOMIC_RELAXED) == 0)
		;
	for (unsigned i = 0; i < iters; i++)
		one_op(w, &r, w->main_res, false);
	atomic_store(&w->armed, 0);
	memset(&its, 0, sizeof(its));
	CHECK(timer_settime(w->timer, 0, &its, NULL) == 0);
	CHECK(timer_delete(w->timer) == 0);
	for (int o = 0; o < NOWN; o++)
		rqspin_storage_owner_destroy(&w->own[o]);
	return NULL;
}

int main(void)
{
	uint64_t base;
	struct rqspin_lock_stats ls0, ls1;
	unsigned long handled = 0, res[RES_N] = { 0 }, main_res[RES_N] = { 0 };

	tu_watchdog(300);
	base = live_bytes();
	rqspin_lock_stats_get(&ls0);
	for (int m = 0; m < NMAPS; m++) {
		maps[m] = rqspin_storage_map_create(sizeof(struct val), 0);
		CHECK(maps[m]);
	}
	tu_set_handler(SIG, handler, SA_RESTART, NULL);
	for (int i = 0; i < NTHREADS; i++)
		workers[i].id = i;
	tu_run_threads(NTHREADS, worker_main, workers, sizeof(workers[0]));
	tu_reset_handler(SIG);
	for (int i = 0; i < NTHREADS; i++) {
		handled += workers[i].handled;
		for (int k = 0; k < RES_N; k++) {
			res[k] += workers[i].res[k];
			main_res[k] += workers[i].main_res[k];
		}
	}
	for (int m = 0; m < NMAPS; m++)
		rqspin_storage_map_destroy(maps[m]);
	rqspin_storage_barrier();
	CHECK_EQ_U64(live_bytes(), base);
	rqspin_lock_stats_get(&ls1);
	CHECK(handled >= NTHREADS);
	printf("storage_signal: %lu handler calls: ok %lu, ENOENT %lu, EEXIST %lu, EDEADLK %lu, "
	       "ETIMEDOUT %lu, EIDRM %lu; interrupted code: ok %lu, ENOENT %lu, EEXIST %lu, "
	       "EDEADLK %lu, ETIMEDOUT %lu, EIDRM %lu; AA reported by the locks: %lu; no leak\n",
	       handled, res[RES_OK], res[RES_NOENT], res[RES_EXIST], res[RES_DEADLK], res[RES_TIMEDOUT],
	       res[RES_IDRM], main_res[RES_OK], main_res[RES_NOENT], main_res[RES_EXIST],
	       main_res[RES_DEADLK], main_res[RES_TIMEDOUT], main_res[RES_IDRM],
	       (unsigned long)(ls1.aa - ls0.aa));
	return 0;
}
