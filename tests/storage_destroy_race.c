/* SPDX-License-Identifier: MIT */
/*
 * Owner destruction racing map destruction: per round, owners with values
 * in many maps (more than 16 for some) are destroyed by two threads while a
 * third destroys the maps, and a fourth keeps creating, updating and
 * deleting values of other owners (which also have values in the maps
 * being destroyed) in a map that stays. After every round the allocator's
 * live bytes are back to the baseline.
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

#define NMAPS 24
#define NOWNERS 1500
#define NKEEP 64

struct obj {
	uint64_t id;
	struct rqspin_storage_owner st;
};

static struct rqspin_storage_map *maps[NMAPS];
static struct rqspin_storage_map *stay;
static struct obj *objs[NOWNERS];
static struct obj keep[NKEEP];
static tu_barrier start;
static _Atomic int destroyers_left;
static unsigned round_no;

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

static void *owners_fwd(void *arg)
{
	(void)arg;
	tu_barrier_wait(&start);
	for (int i = 0; i < NOWNERS / 2; i++) {
		rqspin_storage_owner_destroy(&objs[i]->st);
		free(objs[i]);
		objs[i] = NULL;
	}
	atomic_fetch_sub(&destroyers_left, 1);
	return NULL;
}

static void *owners_rev(void *arg)
{
	(void)arg;
	tu_barrier_wait(&start);
	for (int i = NOWNERS - 1; i >= NOWNERS / 2; i--) {
		rqspin_storage_owner_destroy(&objs[i]->st);
		free(objs[i]);
		objs[i] = NULL;
	}
	atomic_fetch_sub(&destroyers_left, 1);
	return NULL;
}

static void *maps_killer(void *arg)
{
	tu_rng r;
	int order[NMAPS];

	(void)arg;
	tu_rng_seed(&r, 7000 + round_no);
	for (int i = 0; i < NMAPS; i++)
		order[i] = i;
	for (int i = NMAPS - 1; i > 0; i--) {
		int j = (int)tu_rng_below(&r, (uint32_t)i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	tu_barrier_wait(&start);
	for (int i = 0; i < NMAPS; i++) {
		rqspin_storage_map_destroy(maps[order[i]]);
		maps[order[i]] = NULL;
	}
	atomic_fetch_sub(&destroyers_left, 1);
	return NULL;
}

/* Works on the kept owners (whose storages the map destroyer is also
 * unlinking from) in the map that stays, until the destroyers are done. */
static void *keeper(void *arg)
{
	tu_rng r;
	unsigned long n = 0;

	(void)arg;
	tu_rng_seed(&r, 9000 + round_no);
	tu_barrier_wait(&start);
	while (atomic_load(&destroyers_left) > 0 || n < 1000) {
		struct obj *o = &keep[tu_rng_below(&r, NKEEP)];
		uint64_t v = tu_rng_next(&r), out;
		int ret;

		switch (tu_rng_below(&r, 4)) {
		case 0:
			ret = rqspin_storage_update(stay, &o->st, &v, RQSPIN_STORAGE_ANY);
			CHECK(ret == 0 || ret == -ETIMEDOUT);
			break;
		case 1:
			ret = rqspin_storage_delete(stay, &o->st);
			CHECK(ret == 0 || ret == -ENOENT || ret == -ETIMEDOUT);
			break;
		case 2:
			ret = rqspin_storage_lookup_copy(stay, &o->st, &out);
			CHECK(ret == 0 || ret == -ENOENT || ret == -ETIMEDOUT);
			break;
		default:
			CHECK(rqspin_storage_get(stay, &o->st, &v, RQSPIN_STORAGE_F_CREATE, &ret) ||
			      ret == -ETIMEDOUT);
			break;
		}
		n++;
	}
	return NULL;
}

static void fill(tu_rng *r, struct rqspin_storage_owner *st)
{
	/* Every owner gets a random subset; one in eight gets all maps. */
	bool all = tu_rng_below(r, 8) == 0;

	for (int m = 0; m < NMAPS; m++) {
		uint64_t v[4] = { tu_rng_next(r), 1, 2, 3 };

		if (all || tu_rng_below(r, 3) == 0)
			CHECK(rqspin_storage_get(maps[m], st, v, RQSPIN_STORAGE_F_CREATE, NULL));
	}
}

int main(void)
{
	tu_rng r;
	uint64_t base;
	unsigned rounds = TU_ITERS(30u);

	tu_watchdog(600);
	tu_rng_seed(&r, 42);
	base = live_bytes();
	for (round_no = 0; round_no < rounds; round_no++) {
		stay = rqspin_storage_map_create(8, 0);
		CHECK(stay);
		for (int m = 0; m < NMAPS; m++) {
			maps[m] = rqspin_storage_map_create(8 + 8 * (size_t)(m % 4),
							    m % 6 == 5 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0);
			CHECK(maps[m]);
		}
		for (int i = 0; i < NOWNERS; i++) {
			objs[i] = calloc(1, sizeof(*objs[i]));
			CHECK(objs[i]);
			objs[i]->id = (uint64_t)i;
			fill(&r, &objs[i]->st);
		}
		for (int i = 0; i < NKEEP; i++)
			fill(&r, &keep[i].st);
		atomic_store(&destroyers_left, 3);
		tu_barrier_init(&start, 4);
		{
			pthread_t t[4];

			t[0] = tu_thread_start(owners_fwd, NULL);
			t[1] = tu_thread_start(owners_rev, NULL);
			t[2] = tu_thread_start(maps_killer, NULL);
			t[3] = tu_thread_start(keeper, NULL);
			for (int i = 0; i < 4; i++)
				tu_thread_join(t[i]);
		}
		for (int i = 0; i < NKEEP; i++) {
			rqspin_storage_owner_destroy(&keep[i].st);
			keep[i].st = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
		}
		rqspin_storage_map_destroy(stay);
		rqspin_storage_barrier();
		CHECK_EQ_U64(live_bytes(), base);
	}
	printf("storage_destroy_race: %u rounds of %d owners x %d maps; no leak after each\n",
	       rounds, NOWNERS, NMAPS);
	return 0;
}
