/* SPDX-License-Identifier: MIT */
/*
 * A program that uses liburcu itself, besides the storage: registrations in
 * any order, on any thread, with either flavour.
 *
 *  1. memb after storage: the thread's first storage call comes first,
 *     then the program registers the thread with liburcu-memb, reads,
 *     waits for a grace period, and unregisters; storage keeps working.
 *  2. memb before storage: the other order.
 *  3. bp (the storage's own flavour) registered by the program before and
 *     after storage calls, sections nested both ways, the program's own
 *     synchronize_rcu.
 * Each on its own thread, twice over; then the leak check.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <urcu/urcu-bp.h>
#include <urcu/urcu-memb.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "test_util.h"

#ifdef TU_TSAN
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:liburcu-bp.so\ncalled_from_lib:liburcu-memb.so\n"
	       "called_from_lib:liburcu-common.so\n";
}
#endif

static struct rqspin_storage_map *map;

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_storage_barrier();
	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

/* Values on a fresh owner: created, read back, deleted, destroyed. */
static void use_storage(uint64_t seed)
{
	struct rqspin_storage_owner o = RQSPIN_STORAGE_OWNER_INIT;
	uint64_t v = seed, out = 0;
	int err = 0;

	CHECK(rqspin_storage_update(map, &o, &v, RQSPIN_STORAGE_NOEXIST) == 0);
	rqspin_storage_read_lock();
	CHECK(*(uint64_t *)rqspin_storage_get(map, &o, NULL, 0, &err) == seed);
	rqspin_storage_read_unlock();
	CHECK(rqspin_storage_lookup_copy(map, &o, &out) == 0 && out == seed);
	CHECK(rqspin_storage_delete(map, &o) == 0);
	CHECK(rqspin_storage_update(map, &o, &v, RQSPIN_STORAGE_NOEXIST) == 0);
	rqspin_storage_owner_destroy(&o);
}

static void memb_use(void)
{
	urcu_memb_read_lock();
	urcu_memb_read_unlock();
	urcu_memb_synchronize_rcu();
}

static void *memb_after(void *arg)
{
	(void)arg;
	use_storage(1);
	urcu_memb_register_thread();
	memb_use();
	use_storage(2);
	urcu_memb_unregister_thread();
	use_storage(3);
	return NULL;
}

static void *memb_before(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	memb_use();
	use_storage(4);
	memb_use();
	urcu_memb_unregister_thread();
	use_storage(5);
	return NULL;
}

static void *bp_both(void *arg)
{
	(void)arg;
	urcu_bp_register_thread();
	use_storage(6);
	urcu_bp_register_thread();
	/* The program's section around ours, and ours around its. */
	urcu_bp_read_lock();
	rqspin_storage_read_lock();
	urcu_bp_read_unlock();
	use_storage(7);
	rqspin_storage_read_unlock();
	rqspin_storage_read_lock();
	urcu_bp_read_lock();
	rqspin_storage_read_unlock();
	urcu_bp_read_unlock();
	urcu_bp_synchronize_rcu();
	rqspin_storage_synchronize();
	use_storage(8);
	return NULL;
}

int main(void)
{
	uint64_t base;

	tu_watchdog(60);
	base = live_bytes();
	map = rqspin_storage_map_create(8, 0);
	CHECK(map);
	for (int round = 0; round < 2; round++) {
		tu_thread_join(tu_thread_start(memb_after, NULL));
		tu_thread_join(tu_thread_start(memb_before, NULL));
		tu_thread_join(tu_thread_start(bp_both, NULL));
	}
	/* The main thread too: storage first (map_create), then memb. */
	urcu_memb_register_thread();
	memb_use();
	use_storage(9);
	urcu_memb_unregister_thread();
	rqspin_storage_map_destroy(map);
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_urcu_order: liburcu memb registered after and before storage calls, "
	       "bp registered and nested both ways; no leak\n");
	return 0;
}
