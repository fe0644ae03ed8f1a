/* SPDX-License-Identifier: MIT */
/*
 * Lock-free gets racing changes of the same owners' indexes. The gets run
 * without a read-side section (the inline home-slot probe of storage.h and
 * the library's full probe, rqspin__storage_get_slow) and rely on each
 * table's seq to detect a change in progress; this test is what catches a
 * torn snapshot or a false miss there.
 *
 * White-box: links the static library and also calls the probe itself
 * (st_tab_probe), whose answer must be the right element, absent only for
 * a churn value, or "retry"; a single false answer fails (through the API,
 * a false miss would be retried by the slower paths and could go unseen).
 *
 * One writer thread gives each owner, one after another, its "stable"
 * values (never deleted once created; a reader may get only those already
 * announced), and meanwhile creates and deletes "churn" values of the owners
 * already started: tables grow (to 64 slots) and entries shift back on
 * every delete, past stable ones (map ids interleave, so homes collide in
 * small tables; deletes shrink them again, and the tables given up are
 * reused by other owners while readers may still hold their address).
 * Reader threads get values and check that
 *   - a stable value is always found, and is the value of that map and that
 *     owner (each value holds its map and owner);
 *   - a churn value, got inside a read-side section, is absent or the
 *     right one.
 * A signal handler on the writer does stable gets at random points of the
 * writer's changes, including in the middle of a change of the same index
 * (whose lock its own thread holds): it must find the right value there
 * too (the library then walks the map's bucket). Ends with the leak check.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage/internal.h"
#include "test_util.h"

#ifdef TU_TSAN
/* liburcu is not instrumented (see storage_threads.c). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:liburcu-bp.so\ncalled_from_lib:liburcu-common.so\n";
}
#endif

#define NMAPS 40   /* map i is stable when i % 4 == 0: 10 stable, 30 churn */
#define NOWN 32
#define NREADERS 2
#define NSTABLE (NMAPS / 4)

struct val {
	uint64_t tag; /* map << 32 | owner */
	uint64_t inv; /* ~tag */
};

static struct rqspin_storage_map *maps[NMAPS];
static struct rqspin_storage_owner owners[NOWN];
/* Owners started by the writer; per owner, the stable values created. */
static atomic_uint started;
static atomic_uint stable_n[NOWN];
static atomic_bool writer_done;
static atomic_uint readers_done;
static pthread_t writer_thread;
static atomic_ulong probe_retries, handler_hits, handler_timeouts, reader_gets, churn_hits;

static int stable_map(unsigned k)
{
	return (int)(4 * k);
}

static int churn_map(unsigned k)
{
	return (int)(4 * (k / 3) + 1 + k % 3);
}

static uint64_t tag_of(int m, unsigned o)
{
	return (uint64_t)m << 32 | o;
}

static void check_value(const void *p, int m, unsigned o)
{
	const struct val *v = p;

	CHECK_EQ_U64(v->tag, tag_of(m, o));
	CHECK_EQ_U64(v->inv, ~tag_of(m, o));
}

/* A get of an announced stable value, through the inline lookup or the
 * library's probe: found and right, or err (only from a handler). */
static void *get_stable(unsigned o, unsigned k, bool slow, int *err)
{
	int m = stable_map(k);
	void *p = slow ? rqspin__storage_get_slow(maps[m], &owners[o], NULL, 0, err)
		       : rqspin_storage_get(maps[m], &owners[o], NULL, 0, err);

	if (p)
		check_value(p, m, o);
	return p;
}

/* Mostly one of the two owners started last, whose indexes the writer
 * changes most: the races this test is about need a reader and the writer
 * on the same index at once. */
static unsigned pick_owner(tu_rng *r, unsigned n)
{
	if (n > 2 && tu_rng_below(r, 8) != 0)
		return n - 1 - tu_rng_below(r, 2);
	return tu_rng_below(r, n);
}

/* Picks an owner and one of its announced stable values; false if none. */
static bool pick_stable(tu_rng *r, unsigned *o, unsigned *k)
{
	/* acquire: pairs with the writer's release stores, so the values
	 * announced are created (and their owners started). */
	unsigned n = atomic_load_explicit(&started, memory_order_acquire), s;

	if (n == 0)
		return false;
	*o = pick_owner(r, n);
	s = atomic_load_explicit(&stable_n[*o], memory_order_acquire);
	if (s == 0)
		return false;
	*k = tu_rng_below(r, s);
	return true;
}

/* The probe itself, on a stable value: the right element, or a retry. The
 * storage and its tables live until the owner is destroyed, so this needs
 * no read-side section. */
static void probe_stable(unsigned o, unsigned k)
{
	int m = stable_map(k);
	uintptr_t w = __atomic_load_n((uintptr_t *)&owners[o].storage_, __ATOMIC_ACQUIRE);
	struct st_elem *e;

	CHECK(w != 0);
	/* The owner's first value is not in its index: the owner word finds
	 * it (its map is set for good once linked). */
	if (w & ST_OWNER_EMB) {
		e = st_embedded_of(w);
		if (atomic_load_explicit(&e->map, memory_order_relaxed) == maps[m]) {
			check_value(e->data, m, o);
			return;
		}
	}
	e = st_tab_probe(st_local_of(w), st_local_tab(st_local_of(w)), maps[m]->key);
	if (e == ST_RETRY) {
		atomic_fetch_add_explicit(&probe_retries, 1, memory_order_relaxed);
		return;
	}
	CHECK(e != NULL);
	check_value(e->data, m, o);
}

static tu_rng handler_rng; /* only the writer thread takes the signal */

static void on_signal(int sig)
{
	unsigned o, k;
	int err = 0, saved = errno;

	(void)sig;
	if (pick_stable(&handler_rng, &o, &k)) {
		if (get_stable(o, k, tu_rng_below(&handler_rng, 2), &err)) {
			atomic_fetch_add(&handler_hits, 1);
		} else {
			/* A lock timeout (another thread holds it): a very
			 * loaded machine. */
			CHECK(err == -ETIMEDOUT);
			atomic_fetch_add(&handler_timeouts, 1);
		}
	}
	errno = saved;
}

static void churn_once(tu_rng *r, unsigned nstarted)
{
	unsigned o = pick_owner(r, nstarted);
	int m = churn_map(tu_rng_below(r, NMAPS - NSTABLE));
	int err, ret;

	if (tu_rng_below(r, 2)) {
		struct val v = { tag_of(m, o), ~tag_of(m, o) };
		void *p = rqspin_storage_get(maps[m], &owners[o], &v, RQSPIN_STORAGE_F_CREATE, &err);

		if (p)
			check_value(p, m, o);
		else
			CHECK(err == -ETIMEDOUT); /* a very loaded machine */
	} else {
		ret = rqspin_storage_delete(maps[m], &owners[o]);
		CHECK(ret == 0 || ret == -ENOENT || ret == -ETIMEDOUT);
	}
}

static void *writer_main(void *arg)
{
	tu_rng r;
	unsigned churns = TU_ITERS(1000000u);

	(void)arg;
	tu_rng_seed(&r, 7);
	for (unsigned o = 0; o < NOWN; o++) {
		/* release: the owner is announced before its first value. */
		atomic_store_explicit(&started, o + 1, memory_order_release);
		for (unsigned k = 0; k < NSTABLE; k++) {
			int m = stable_map(k);
			struct val v = { tag_of(m, o), ~tag_of(m, o) };
			int ret = -ETIMEDOUT;

			/* A lock timeout only on a very loaded machine: retry a
			 * few times, then fail rather than loop forever. */
			for (int t = 0; t < 20 && ret == -ETIMEDOUT; t++)
				ret = rqspin_storage_update(maps[m], &owners[o], &v,
							    RQSPIN_STORAGE_NOEXIST);
			CHECK(ret == 0);
			/* release: the value exists before readers look for it. */
			atomic_store_explicit(&stable_n[o], k + 1, memory_order_release);
			for (unsigned c = 0; c < 64; c++)
				churn_once(&r, o + 1);
		}
	}
	for (unsigned i = 0; i < churns; i++)
		churn_once(&r, NOWN);
	atomic_store(&writer_done, true);
	/* Stay alive while readers may still signal this thread. */
	for (unsigned round = 0; atomic_load(&readers_done) < NREADERS;)
		tu_backoff(&round);
	return NULL;
}

static void *reader_main(void *arg)
{
	tu_rng r;
	unsigned long gets = 0;

	tu_rng_seed(&r, 100 + (uint64_t)(uintptr_t)arg);
	/* Bounded: the writer ends after a fixed number of changes, and the
	 * reader stops at most this many gets after that. */
	for (unsigned long i = 0; i < 200000000ul && !atomic_load(&writer_done); i++) {
		unsigned o, k;
		int err;

		unsigned what = tu_rng_below(&r, 4);

		if (what == 0) {
			if (!pick_stable(&r, &o, &k))
				continue;
			probe_stable(o, k);
		} else if (what == 1) {
			if (!pick_stable(&r, &o, &k))
				continue;
			/* Found, or (lock timeout) a very loaded machine;
			 * never -ENOENT. */
			if (!get_stable(o, k, i & 1, &err))
				CHECK(err == -ETIMEDOUT);
		} else {
			unsigned n = atomic_load_explicit(&started, memory_order_acquire);
			int m = churn_map(tu_rng_below(&r, NMAPS - NSTABLE));
			void *p;

			if (n == 0)
				continue;
			o = pick_owner(&r, n);
			/* A section: the value may be deleted meanwhile. */
			rqspin_storage_read_lock();
			p = (i & 2) ? rqspin__storage_get_slow(maps[m], &owners[o], NULL, 0, &err)
				    : rqspin_storage_get(maps[m], &owners[o], NULL, 0, &err);
			if (p) {
				check_value(p, m, o);
				atomic_fetch_add_explicit(&churn_hits, 1, memory_order_relaxed);
			} else {
				CHECK(err == -ENOENT || err == -ETIMEDOUT);
			}
			rqspin_storage_read_unlock();
		}
		gets++;
		if ((gets & 1023) == 0)
			pthread_kill(writer_thread, SIGUSR1);
	}
	atomic_fetch_add(&reader_gets, gets);
	atomic_fetch_add(&readers_done, 1);
	return NULL;
}

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

int main(void)
{
	pthread_t readers[NREADERS];
	uint64_t base, pooled;
	int block[] = { SIGUSR1, 0 };

	tu_watchdog(300);
	base = live_bytes();
	tu_rng_seed(&handler_rng, 3);
	for (int m = 0; m < NMAPS; m++) {
		maps[m] = rqspin_storage_map_create(sizeof(struct val),
						    m % 5 == 3 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0);
		CHECK(maps[m] != NULL);
	}
	tu_set_handler(SIGUSR1, on_signal, SA_RESTART, block);
	writer_thread = tu_thread_start(writer_main, NULL);
	for (int i = 0; i < NREADERS; i++)
		readers[i] = tu_thread_start(reader_main, (void *)(uintptr_t)i);
	tu_thread_join(writer_thread);
	for (int i = 0; i < NREADERS; i++)
		tu_thread_join(readers[i]);
	/* Every stable value is still there, right. */
	for (unsigned o = 0; o < NOWN; o++) {
		for (unsigned k = 0; k < NSTABLE; k++) {
			int err;

			CHECK(get_stable(o, k, false, &err) != NULL);
			CHECK(get_stable(o, k, true, &err) != NULL);
		}
	}
	/* The churn's deletes shrank indexes under the readers (given-up
	 * tables went to the pool, and other owners' growth reused them).
	 * The writer's sequence is fixed by its seed. */
	pooled = rqspin_storage_pool_bytes();
	CHECK(atomic_load(&rqs_st_shrinks) > 0);
	for (unsigned o = 0; o < NOWN; o++)
		rqspin_storage_owner_destroy(&owners[o]);
	for (int m = 0; m < NMAPS; m++)
		rqspin_storage_map_destroy(maps[m]);
	CHECK_EQ_U64(rqspin_storage_pool_bytes(), 0);
	rqspin_storage_barrier();
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_index_race: %lu reader gets (%lu churn hits, %lu probe retries); "
	       "handler: %lu hits, %lu lock timeouts; %llu index shrinks, %llu bytes of tables "
	       "pooled at the end; no leak\n",
	       atomic_load(&reader_gets), atomic_load(&churn_hits), atomic_load(&probe_retries),
	       atomic_load(&handler_hits), atomic_load(&handler_timeouts),
	       (unsigned long long)atomic_load(&rqs_st_shrinks), (unsigned long long)pooled);
	return 0;
}
