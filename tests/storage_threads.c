/* SPDX-License-Identifier: MIT */
/*
 * Threads sharing maps, each with its own owners (checked against a
 * per-thread model) and all of them on a set of shared owners (concurrent
 * create / update / delete / copy / iterate on the same values, checked for
 * torn values). More maps than cache slots, both allocators. Ends with the
 * leak check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/alloc.h>
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

#define NTHREADS 4
#define NMAPS 20
#define NOWN 24    /* private owners per thread */
#define NSHARED 8  /* owners every thread uses */

struct val {
	uint64_t a, b; /* b == ~a, always */
	uint64_t pad[2];
};

static struct rqspin_storage_map *maps[NMAPS];
static struct rqspin_storage_owner shared[NSHARED];
static tu_barrier start;
static _Atomic uint64_t timeouts;

struct worker {
	int id;
	struct rqspin_storage_owner own[NOWN];
	uint64_t model[NMAPS][NOWN]; /* 0 = absent, else the value's a */
	unsigned long ops;
};

static struct worker workers[NTHREADS];

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

static struct val mkval(uint64_t a)
{
	struct val v = { a, ~a, { 0, 0 } };

	return v;
}

/* Errors that concurrent use (no signals) may give: only a timeout when
 * the machine is very loaded. */
static bool busy(int ret)
{
	if (ret == -ETIMEDOUT) {
		atomic_fetch_add(&timeouts, 1);
		return true;
	}
	return false;
}

static void check_val(const struct val *v)
{
	CHECK(v->b == ~v->a);
}

static int iter_cb(struct rqspin_storage_owner *owner, void *value, void *arg)
{
	rqspinlock_t *lk = rqspin_storage_value_lock(value);
	struct val v;
	int ret;

	(void)owner;
	ret = rqspin_lock(lk);
	if (ret == 0) {
		memcpy(&v, value, sizeof(v));
		rqspin_unlock(lk);
		if (v.a != 0)
			check_val(&v);
	} else {
		CHECK(busy(ret));
	}
	(*(unsigned long *)arg)++;
	return 0;
}

static void private_op(struct worker *w, tu_rng *r)
{
	int m = (int)tu_rng_below(r, NMAPS), o = (int)tu_rng_below(r, NOWN);
	struct rqspin_storage_owner *ow = &w->own[o];
	uint64_t *mv = &w->model[m][o];
	uint64_t a = (tu_rng_next(r) | 1);
	struct val v = mkval(a), out;
	unsigned op = tu_rng_below(r, 100);
	int err, ret;
	void *p;

	if (op < 30) {
		p = rqspin_storage_get(maps[m], ow, &v, RQSPIN_STORAGE_F_CREATE, &err);
		if (!p) {
			CHECK(busy(err));
			return;
		}
		memcpy(&out, p, sizeof(out)); /* only this thread writes it */
		if (*mv)
			CHECK(out.a == *mv);
		else
			CHECK(out.a == a);
		*mv = out.a;
		check_val(&out);
	} else if (op < 55) {
		ret = rqspin_storage_update(maps[m], ow, &v, RQSPIN_STORAGE_ANY);
		if (busy(ret))
			return;
		CHECK(ret == 0);
		*mv = a;
	} else if (op < 75) {
		ret = rqspin_storage_lookup_copy(maps[m], ow, &out);
		if (busy(ret))
			return;
		if (*mv) {
			CHECK(ret == 0);
			CHECK(out.a == *mv);
		} else {
			CHECK(ret == -ENOENT);
		}
	} else if (op < 97) {
		ret = rqspin_storage_delete(maps[m], ow);
		if (busy(ret))
			return;
		CHECK(ret == (*mv ? 0 : -ENOENT));
		*mv = 0;
	} else {
		rqspin_storage_owner_destroy(ow);
		/* Zeroed for reuse: only this thread uses it. */
		*ow = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
		for (int k = 0; k < NMAPS; k++)
			w->model[k][o] = 0;
	}
}

static void shared_op(tu_rng *r)
{
	int m = (int)tu_rng_below(r, NMAPS), o = (int)tu_rng_below(r, NSHARED);
	struct rqspin_storage_owner *ow = &shared[o];
	struct val v = mkval(tu_rng_next(r) | 1), out;
	unsigned op = tu_rng_below(r, 100);
	int err, ret;
	void *p;

	if (op < 30) {
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, NULL, RQSPIN_STORAGE_F_CREATE, &err);
		if (p) {
			rqspinlock_t *lk = rqspin_storage_value_lock(p);

			ret = rqspin_lock(lk);
			if (ret == 0) {
				memcpy(&out, p, sizeof(out));
				if (out.a != 0)
					check_val(&out);
				rqspin_unlock(lk);
			} else {
				CHECK(busy(ret));
			}
		} else {
			CHECK(busy(err));
		}
		rqspin_storage_read_unlock();
	} else if (op < 60) {
		ret = rqspin_storage_update(maps[m], ow, &v, tu_rng_below(r, 3));
		CHECK(ret == 0 || ret == -EEXIST || ret == -ENOENT || busy(ret));
	} else if (op < 85) {
		ret = rqspin_storage_lookup_copy(maps[m], ow, &out);
		if (ret == 0) {
			if (out.a != 0)
				check_val(&out);
		} else {
			CHECK(ret == -ENOENT || busy(ret));
		}
	} else if (op < 99) {
		ret = rqspin_storage_delete(maps[m], ow);
		CHECK(ret == 0 || ret == -ENOENT || busy(ret));
	} else {
		unsigned long n = 0;

		CHECK(rqspin_storage_map_iter(maps[m], iter_cb, &n) == 0);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	tu_rng r;
	unsigned iters = TU_ITERS(200000u);

	tu_rng_seed(&r, 100 + (uint64_t)w->id);
	tu_barrier_wait(&start);
	for (unsigned i = 0; i < iters; i++) {
		if (tu_rng_below(&r, 2))
			private_op(w, &r);
		else
			shared_op(&r);
		w->ops++;
	}
	/* Final check of the private model. */
	for (int m = 0; m < NMAPS; m++) {
		for (int o = 0; o < NOWN; o++) {
			struct val out;
			int ret = rqspin_storage_lookup_copy(maps[m], &w->own[o], &out);

			if (w->model[m][o]) {
				CHECK(ret == 0);
				CHECK(out.a == w->model[m][o]);
			} else {
				CHECK(ret == -ENOENT);
			}
		}
	}
	for (int o = 0; o < NOWN; o++)
		rqspin_storage_owner_destroy(&w->own[o]);
	return NULL;
}

int main(void)
{
	uint64_t base;
	unsigned long total = 0;

	tu_watchdog(300);
	base = live_bytes();
	for (int m = 0; m < NMAPS; m++) {
		maps[m] = rqspin_storage_map_create(sizeof(struct val),
						    m % 5 == 4 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0);
		CHECK(maps[m] != NULL);
	}
	tu_barrier_init(&start, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		workers[i].id = i;
	tu_run_threads(NTHREADS, worker_main, workers, sizeof(workers[0]));
	for (int i = 0; i < NTHREADS; i++)
		total += workers[i].ops;
	for (int o = 0; o < NSHARED; o++)
		rqspin_storage_owner_destroy(&shared[o]);
	for (int m = 0; m < NMAPS; m++)
		rqspin_storage_map_destroy(maps[m]);
	rqspin_storage_barrier();
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_threads: %d threads, %lu ops, %lu lock timeouts; no leak\n", NTHREADS,
	       total, (unsigned long)atomic_load(&timeouts));
	return 0;
}
