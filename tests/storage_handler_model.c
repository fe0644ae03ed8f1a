/* SPDX-License-Identifier: MIT */
/*
 * Randomized model test, handler-heavy: every worker thread has its own
 * owners and a per-thread timer (SIGEV_THREAD_ID, every ~15 us) whose
 * handler runs random operations on the same owners, owner destruction
 * included, at whatever point of the worker's own operation it lands.
 * Every value carries its owner (worker, owner slot, incarnation), its map
 * and a generation, and is checked against the model of the thread:
 *
 *  - the worker's result is exact unless a handler destroyed the owner
 *    during the call (then the owner is ended: the call may have failed
 *    with -EIDRM or succeeded, and nothing of it may remain);
 *  - the handler's result is exact on every value except the one the
 *    worker is changing (which may be in its old or its new state); a
 *    lookup never fails (a get that cannot lock walks the map's bucket,
 *    and must not return a destroyed owner's value left there); changes
 *    may fail only with -EDEADLK (the interrupted code holds the lock);
 *  - a destroyed owner has no values and refuses creation (-EIDRM) until
 *    the worker zeroes it for its next incarnation.
 * Maps are shared by the threads (bucket locks are contended), some hold
 * values too big to be embedded. Ends with the leak check.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage_util.h"
#include "test_util.h"

#define NTHREADS 2
#define NOWN 6
#define NMAPS 20
#define NBIG 4 /* the last NBIG maps: 320-byte values (not embedded) */
#define SMALL_WORDS 4
#define BIG_WORDS 40
#define SIG (SIGRTMIN + 5)

static struct rqspin_storage_map *maps[NMAPS];

static unsigned words_of(int m)
{
	return m >= NMAPS - NBIG ? BIG_WORDS : SMALL_WORDS;
}

/* A value: tag (worker, owner, incarnation), map, generation, a check
 * word, and for big maps a pattern of the generation. */
static void make_value(uint64_t *v, uint64_t tag, int m, uint64_t gen)
{
	v[0] = tag;
	v[1] = (uint64_t)m;
	v[2] = gen;
	v[3] = tag ^ ((uint64_t)m << 48) ^ gen ^ 0x5bd1e995u;
	for (unsigned k = SMALL_WORDS; k < words_of(m); k++)
		v[k] = gen * 0x9e3779b97f4a7c15ull + k;
}

/* 0: a consistent value of tag and map with generation gen (any when
 * gen is 0); else which check failed. */
static int value_bad(const uint64_t *v, uint64_t tag, int m, uint64_t gen)
{
	if (v[0] != tag)
		return 1;
	if (v[1] != (uint64_t)m)
		return 2;
	if (gen && v[2] != gen)
		return 3;
	if (v[3] != (tag ^ ((uint64_t)m << 48) ^ v[2] ^ 0x5bd1e995u))
		return 4;
	for (unsigned k = SMALL_WORDS; k < words_of(m); k++)
		if (v[k] != v[2] * 0x9e3779b97f4a7c15ull + k)
			return 5;
	return 0;
}

enum { OP_GET, OP_CREATE, OP_UPDATE, OP_DELETE, OP_COPY, OP_DESTROY, OP_N };

struct worker {
	int id;
	struct rqspin_storage_owner own[NOWN];
	/* The model (changed by the worker, and by its handler, which runs
	 * on this thread only while the worker is not in model code). */
	uint64_t gen[NOWN][NMAPS]; /* 0: absent */
	uint32_t incarnation[NOWN];
	uint32_t epoch[NOWN]; /* destructions */
	bool dead[NOWN];
	uint64_t next_gen;
	/* The worker's operation in flight: its cell (or the whole owner for
	 * a destroy) and the generations the value may have meanwhile. */
	volatile sig_atomic_t in_model;
	int busy_o, busy_m; /* busy_m -1: every map of busy_o */
	uint64_t busy_old, busy_new;
	timer_t timer;
	tu_rng hrng;
	volatile sig_atomic_t armed;
	unsigned long handled, skipped, h_ops[OP_N], h_deadlk, w_ops[OP_N], w_overrun;
};

static struct worker workers[NTHREADS];
static __thread struct worker *self;

static uint64_t tag_of(const struct worker *w, int o)
{
	return (uint64_t)(w->id + 1) << 48 | (uint64_t)o << 32 | w->incarnation[o];
}

static void fail_value(int line, int why)
{
	tu_write_str("storage_handler_model: bad value (check ");
	tu_write_u64((uint64_t)why);
	tu_write_str(") at line ");
	tu_write_u64((uint64_t)line);
	tu_write_str("\n");
	abort();
}

#define CHECK_VALUE(v, tag, m, gen)                          \
	do {                                                 \
		int why_ = value_bad((v), (tag), (m), (gen)); \
		if (why_)                                    \
			fail_value(__LINE__, why_);          \
	} while (0)

static void model_destroyed(struct worker *w, int o)
{
	for (int m = 0; m < NMAPS; m++)
		w->gen[o][m] = 0;
	w->dead[o] = true;
	w->epoch[o]++;
}

/* ---- the handler -------------------------------------------------------- */

static bool busy_cell(const struct worker *w, int o, int m)
{
	return w->busy_o == o && (w->busy_m < 0 || w->busy_m == m);
}

/* The cell the worker is changing: it may be in its old or new state
 * (for a destroy of the owner: there or gone). */
static void handler_busy(struct worker *w, int o, int m)
{
	uint64_t v[BIG_WORDS];
	int ret = rqspin_storage_lookup_copy(maps[m], &w->own[o], v);

	if (ret == 0 && w->busy_m < 0) {
		CHECK_VALUE(v, tag_of(w, o), m, w->gen[o][m]);
		CHECK(w->gen[o][m] != 0);
	} else if (ret == 0) {
		CHECK_VALUE(v, tag_of(w, o), m, 0);
		CHECK(v[2] == w->busy_old || v[2] == w->busy_new);
	} else {
		CHECK(ret == -ENOENT || ret == -EDEADLK);
	}
	w->h_ops[OP_COPY]++;
}

static void handler_op(struct worker *w)
{
	tu_rng *r = &w->hrng;
	int o = (int)tu_rng_below(r, NOWN), m = (int)tu_rng_below(r, NMAPS);
	struct rqspin_storage_owner *ow = &w->own[o];
	unsigned op = tu_rng_below(r, 100);
	uint64_t v[BIG_WORDS], have = w->gen[o][m], gen;
	int ret = 0, err = 0;
	void *p;

	if (busy_cell(w, o, m)) {
		handler_busy(w, o, m);
		return;
	}
	if (w->dead[o]) {
		/* Ended: nothing there, nothing can be made. */
		CHECK(!rqspin_storage_get(maps[m], ow, NULL, 0, &err) && err == -ENOENT);
		make_value(v, tag_of(w, o), m, 1);
		CHECK(!rqspin_storage_get(maps[m], ow, v, RQSPIN_STORAGE_F_CREATE, &err) &&
		      err == -EIDRM);
		CHECK(rqspin_storage_update(maps[m], ow, v, RQSPIN_STORAGE_ANY) == -EIDRM);
		CHECK(rqspin_storage_delete(maps[m], ow) == -ENOENT);
		rqspin_storage_owner_destroy(ow);
		w->h_ops[OP_GET]++;
		return;
	}
	gen = ++w->next_gen;
	make_value(v, tag_of(w, o), m, gen);
	if (op < 40) {
		/* Lookups never fail, even inside the worker's changes. */
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, NULL, 0, &err);
		if (have) {
			CHECK(p && err == 0);
			CHECK_VALUE(p, tag_of(w, o), m, have);
		} else {
			CHECK(!p && err == -ENOENT);
		}
		rqspin_storage_read_unlock();
		w->h_ops[OP_GET]++;
	} else if (op < 55) {
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, v, RQSPIN_STORAGE_F_CREATE, &err);
		if (p) {
			CHECK_VALUE(p, tag_of(w, o), m, have ? have : gen);
			w->gen[o][m] = have ? have : gen;
		} else {
			CHECK(err == -EDEADLK);
			w->h_deadlk++;
		}
		rqspin_storage_read_unlock();
		w->h_ops[OP_CREATE]++;
	} else if (op < 70) {
		unsigned f = tu_rng_below(r, 3);

		ret = rqspin_storage_update(maps[m], ow, v, f);
		if (ret == -EDEADLK) {
			w->h_deadlk++;
		} else if (f == RQSPIN_STORAGE_NOEXIST && have) {
			CHECK(ret == -EEXIST);
		} else if (f == RQSPIN_STORAGE_EXIST && !have) {
			CHECK(ret == -ENOENT);
		} else {
			CHECK(ret == 0);
			w->gen[o][m] = gen;
		}
		w->h_ops[OP_UPDATE]++;
	} else if (op < 82) {
		ret = rqspin_storage_delete(maps[m], ow);
		if (ret == -EDEADLK) {
			w->h_deadlk++;
		} else {
			CHECK(ret == (have ? 0 : -ENOENT));
			w->gen[o][m] = 0;
		}
		w->h_ops[OP_DELETE]++;
	} else if (op < 94) {
		ret = rqspin_storage_lookup_copy(maps[m], ow, v);
		if (ret == -EDEADLK) {
			w->h_deadlk++;
		} else if (have) {
			CHECK(ret == 0);
			CHECK_VALUE(v, tag_of(w, o), m, have);
		} else {
			CHECK(ret == -ENOENT);
		}
		w->h_ops[OP_COPY]++;
	} else {
		/* Even the owner the worker is changing. */
		rqspin_storage_owner_destroy(ow);
		model_destroyed(w, o);
		w->h_ops[OP_DESTROY]++;
	}
}

static void handler(int sig)
{
	struct worker *w = self;
	int saved = errno;

	(void)sig;
	if (w && w->armed) {
		if (w->in_model) {
			w->skipped++;
		} else {
			w->handled++;
			handler_op(w);
		}
	}
	errno = saved;
}

/* ---- the worker --------------------------------------------------------- */

/* The worker's model code runs with in_model set; the signal fences keep
 * the compiler from moving model accesses across the flag (the handler
 * runs on this thread, so a compiler barrier is all it takes). */
static void model_enter(struct worker *w)
{
	w->in_model = 1;
	atomic_signal_fence(memory_order_seq_cst);
}

static void model_leave(struct worker *w)
{
	atomic_signal_fence(memory_order_seq_cst);
	w->in_model = 0;
}

static void worker_op(struct worker *w, tu_rng *r)
{
	int o = (int)tu_rng_below(r, NOWN), m = (int)tu_rng_below(r, NMAPS);
	struct rqspin_storage_owner *ow = &w->own[o];
	unsigned op = tu_rng_below(r, 100), f = 0;
	uint64_t v[BIG_WORDS], out[BIG_WORDS], have, gen, tag;
	uint32_t epoch;
	int kind, ret = 0, err = 0;
	bool got = false, ended;
	void *p;

	kind = op < 25 ? OP_GET : op < 45 ? OP_CREATE : op < 65 ? OP_UPDATE :
	       op < 80 ? OP_DELETE : op < 97 ? OP_COPY : OP_DESTROY;
	model_enter(w);
	if (w->dead[o]) {
		/* Ended, whatever was in flight when it was destroyed. */
		make_value(v, tag_of(w, o), m, 1);
		CHECK(rqspin_storage_update(maps[m], ow, v, RQSPIN_STORAGE_ANY) == -EIDRM);
		/* Next incarnation: the handler cannot use it before this. */
		*ow = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
		w->dead[o] = false;
		w->incarnation[o]++;
	}
	have = w->gen[o][m];
	gen = ++w->next_gen;
	tag = tag_of(w, o);
	epoch = w->epoch[o];
	make_value(v, tag, m, gen);
	w->busy_o = o;
	w->busy_m = kind == OP_DESTROY ? -1 : m;
	w->busy_old = have;
	w->busy_new = gen;
	model_leave(w);

	/* The operation: a handler may run anywhere in it. */
	switch (kind) {
	case OP_GET:
	case OP_CREATE:
		rqspin_storage_read_lock();
		p = rqspin_storage_get(maps[m], ow, v, kind == OP_CREATE ? RQSPIN_STORAGE_F_CREATE : 0,
				       &err);
		/* In the section: a value removed meanwhile is still readable. */
		if (p) {
			memcpy(out, p, words_of(m) * 8);
			got = true;
		}
		rqspin_storage_read_unlock();
		ret = p ? 0 : err;
		break;
	case OP_UPDATE:
		f = tu_rng_below(r, 3);
		ret = rqspin_storage_update(maps[m], ow, v, f);
		break;
	case OP_DELETE:
		ret = rqspin_storage_delete(maps[m], ow);
		break;
	case OP_COPY:
		ret = rqspin_storage_lookup_copy(maps[m], ow, out);
		got = ret == 0;
		break;
	default:
		rqspin_storage_owner_destroy(ow);
		break;
	}

	model_enter(w);
	w->busy_o = -1;
	ended = w->epoch[o] != epoch; /* a handler destroyed the owner meanwhile */
	w->w_ops[kind]++;
	if (ret == -ETIMEDOUT) {
		/* Another thread held a bucket lock too long: nothing done. */
		w->w_overrun++;
	} else if (kind == OP_DESTROY) {
		model_destroyed(w, o);
	} else if (ended) {
		/* Whatever the call did is gone with the owner. */
		CHECK(ret == 0 || ret == -ENOENT || ret == -EEXIST || ret == -EIDRM);
		if (got) {
			CHECK_VALUE(out, tag, m, 0);
			CHECK(out[2] == have || out[2] == gen);
		}
	} else if (kind == OP_GET || kind == OP_COPY) {
		if (have) {
			CHECK(ret == 0);
			CHECK_VALUE(out, tag, m, have);
		} else {
			CHECK(ret == -ENOENT);
		}
	} else if (kind == OP_CREATE) {
		CHECK(ret == 0);
		CHECK_VALUE(out, tag, m, have ? have : gen);
		w->gen[o][m] = have ? have : gen;
	} else if (kind == OP_UPDATE) {
		if (f == RQSPIN_STORAGE_NOEXIST && have) {
			CHECK(ret == -EEXIST);
		} else if (f == RQSPIN_STORAGE_EXIST && !have) {
			CHECK(ret == -ENOENT);
		} else {
			CHECK(ret == 0);
			w->gen[o][m] = gen;
		}
	} else {
		CHECK(ret == (have ? 0 : -ENOENT));
		w->gen[o][m] = 0;
	}
	model_leave(w);
}

/* After the run: the model and the library agree on every cell. */
static void final_check(struct worker *w)
{
	uint64_t out[BIG_WORDS];

	for (int o = 0; o < NOWN; o++)
		for (int m = 0; m < NMAPS; m++) {
			int ret = rqspin_storage_lookup_copy(maps[m], &w->own[o], out);

			if (w->gen[o][m]) {
				CHECK(ret == 0);
				CHECK_VALUE(out, tag_of(w, o), m, w->gen[o][m]);
			} else {
				CHECK(ret == -ENOENT);
			}
		}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sigevent sev;
	struct itimerspec its;
	tu_rng r;
	unsigned iters = TU_ITERS(300000u);

	self = w;
	w->busy_o = -1;
	tu_rng_seed(&r, 1600 + (uint64_t)w->id);
	tu_rng_seed(&w->hrng, 1700 + (uint64_t)w->id);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIG;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &w->timer) == 0);
	memset(&its, 0, sizeof(its));
	its.it_value.tv_nsec = 15000;
	its.it_interval.tv_nsec = 15000 * (long)TU_SLOWDOWN;
	w->armed = 1;
	CHECK(timer_settime(w->timer, 0, &its, NULL) == 0);
	for (unsigned i = 0; i < iters; i++)
		worker_op(w, &r);
	w->armed = 0;
	memset(&its, 0, sizeof(its));
	CHECK(timer_settime(w->timer, 0, &its, NULL) == 0);
	CHECK(timer_delete(w->timer) == 0);
	final_check(w);
	for (int o = 0; o < NOWN; o++)
		rqspin_storage_owner_destroy(&w->own[o]);
	return NULL;
}

int main(void)
{
	uint64_t base;
	unsigned long handled = 0, skipped = 0, deadlk = 0, overrun = 0, h[OP_N] = { 0 },
		      wk[OP_N] = { 0 };

	tu_watchdog(300);
	base = live_bytes();
	for (int m = 0; m < NMAPS; m++) {
		maps[m] = rqspin_storage_map_create(words_of(m) * 8, 0);
		CHECK(maps[m]);
	}
	tu_set_handler(SIG, handler, SA_RESTART, NULL);
	for (int i = 0; i < NTHREADS; i++)
		workers[i].id = i;
	tu_run_threads(NTHREADS, worker_main, workers, sizeof(workers[0]));
	tu_reset_handler(SIG);
	for (int i = 0; i < NTHREADS; i++) {
		handled += workers[i].handled;
		skipped += workers[i].skipped;
		deadlk += workers[i].h_deadlk;
		overrun += workers[i].w_overrun;
		for (int k = 0; k < OP_N; k++) {
			h[k] += workers[i].h_ops[k];
			wk[k] += workers[i].w_ops[k];
		}
	}
	for (int m = 0; m < NMAPS; m++)
		rqspin_storage_map_destroy(maps[m]);
	CHECK_EQ_U64(live_bytes(), base);
	CHECK(handled > 0);
	printf("storage_handler_model: %d threads; worker ops get %lu create %lu update %lu "
	       "delete %lu copy %lu destroy %lu (%lu timed out); handler calls %lu (+%lu in model "
	       "code): get %lu create %lu update %lu delete %lu copy %lu destroy %lu, %lu EDEADLK; "
	       "every value matched the model; no leak\n",
	       NTHREADS, wk[OP_GET], wk[OP_CREATE], wk[OP_UPDATE], wk[OP_DELETE], wk[OP_COPY],
	       wk[OP_DESTROY], overrun, handled, skipped, h[OP_GET], h[OP_CREATE], h[OP_UPDATE],
	       h[OP_DELETE], h[OP_COPY], h[OP_DESTROY], deadlk);
	return 0;
}
