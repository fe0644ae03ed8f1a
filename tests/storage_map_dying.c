/* SPDX-License-Identifier: MIT */
/*
 * Map destruction:
 *
 *  1. A creation that races map_destroy (misuse, as in the kernel, but
 *     made safe): this thread holds a read-side section, as a get with
 *     F_CREATE does while it runs, and another thread destroys the map
 *     meanwhile. A creation in the map after the destroyer's sweep must
 *     be refused (-EIDRM), not linked into a swept bucket, where a later
 *     owner_destroy would find a freed map. map_destroy itself does not
 *     wait for this thread's section.
 *  2. Deletes racing map_destroy (misuse too): a thread deletes the values
 *     of the map being destroyed, in a read section, while the sweep
 *     unlinks them from the map's buckets. A delete that finds a value
 *     whose map side the sweep already unlinked must not unlink it again
 *     (before the fix: a write through the cleared link, SIGSEGV in most
 *     runs); the owners' other values stay as they were.
 *  3. Create/destroy cycles, each map holding a value of a live owner, then
 *     the leak check (maps are freed after a grace period, without
 *     map_destroy waiting for one: 20 000 cycles take well under a
 *     second, where waiting for a grace period and a barrier in each
 *     would take minutes and hit the test's timeout).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage_util.h"
#include "test_util.h"

static struct rqspin_storage_map *victim;
static _Atomic int destroyed;

static void *destroyer(void *arg)
{
	(void)arg;
	rqspin_storage_map_destroy(victim);
	atomic_store(&destroyed, 1);
	return NULL;
}

static void racing_create(void)
{
	struct rqspin_storage_map *other = rqspin_storage_map_create(8, 0);
	struct rqspin_storage_owner a = RQSPIN_STORAGE_OWNER_INIT, b = RQSPIN_STORAGE_OWNER_INIT;
	uint64_t v = 7;
	pthread_t t;
	int err = 0;

	victim = rqspin_storage_map_create(8, 0);
	CHECK(victim && other);
	/* a has a storage already (another map's value); b has none. */
	CHECK(rqspin_storage_update(other, &a, &v, RQSPIN_STORAGE_NOEXIST) == 0);
	CHECK(rqspin_storage_update(victim, &a, &v, RQSPIN_STORAGE_NOEXIST) == 0);
	rqspin_storage_read_lock();
	t = tu_thread_start(destroyer, NULL);
	/* Bounded: a map_destroy that waits for this section never ends. */
	for (int i = 0; i < 10000 && !atomic_load(&destroyed); i++)
		tu_sleep_us(1000);
	CHECK(atomic_load(&destroyed));
	/* The section keeps the map's memory; its buckets are swept. */
	CHECK(!rqspin_storage_get(victim, &a, &v, RQSPIN_STORAGE_F_CREATE, &err) && err == -EIDRM);
	CHECK(!rqspin_storage_get(victim, &b, &v, RQSPIN_STORAGE_F_CREATE, &err) && err == -EIDRM);
	CHECK(rqspin_storage_update(victim, &a, &v, RQSPIN_STORAGE_ANY) == -EIDRM);
	CHECK(!rqspin_storage_get(victim, &a, NULL, 0, &err) && err == -ENOENT);
	rqspin_storage_read_unlock();
	tu_thread_join(t);
	/* The other map's value is untouched. */
	CHECK(rqspin_storage_lookup_copy(other, &a, &v) == 0 && v == 7);
	rqspin_storage_owner_destroy(&a);
	rqspin_storage_owner_destroy(&b);
	rqspin_storage_map_destroy(other);
}

#define DEL_OWNERS 2000

static struct rqspin_storage_owner del_owner[DEL_OWNERS];
static struct rqspin_storage_map *_Atomic del_map;
static _Atomic int del_stop;
static _Atomic uint64_t del_done;

static void *deleter(void *arg)
{
	(void)arg;
	while (!atomic_load(&del_stop)) {
		struct rqspin_storage_map *m;

		rqspin_storage_read_lock();
		m = atomic_load(&del_map);
		for (int i = 0; m && i < DEL_OWNERS; i++) {
			int r = rqspin_storage_delete(m, &del_owner[i]);

			CHECK(r == 0 || r == -ENOENT || r == -EIDRM);
			if (r == 0)
				atomic_fetch_add(&del_done, 1);
		}
		rqspin_storage_read_unlock();
	}
	return NULL;
}

static void racing_delete(void)
{
	struct rqspin_storage_map *keep = rqspin_storage_map_create(8, 0);
	unsigned rounds = TU_ITERS(200u);
	pthread_t t;

	CHECK(keep);
	/* A first value elsewhere, so that the racing map's values sit in
	 * the owners' indexes. */
	for (uint64_t i = 0; i < DEL_OWNERS; i++)
		CHECK(rqspin_storage_update(keep, &del_owner[i], &i, RQSPIN_STORAGE_NOEXIST) == 0);
	t = tu_thread_start(deleter, NULL);
	for (unsigned r = 0; r < rounds; r++) {
		struct rqspin_storage_map *m = rqspin_storage_map_create(8, 0);
		uint64_t v = r;

		CHECK(m);
		for (int i = 0; i < DEL_OWNERS; i++)
			CHECK(rqspin_storage_update(m, &del_owner[i], &v, RQSPIN_STORAGE_NOEXIST) == 0);
		atomic_store(&del_map, m);
		rqspin_storage_map_destroy(m);
		atomic_store(&del_map, NULL);
		/* The deleter's section that may still hold m ends. */
		rqspin_storage_synchronize();
	}
	atomic_store(&del_stop, 1);
	tu_thread_join(t);
	for (uint64_t i = 0; i < DEL_OWNERS; i++) {
		uint64_t v;

		CHECK(rqspin_storage_lookup_copy(keep, &del_owner[i], &v) == 0 && v == i);
		rqspin_storage_owner_destroy(&del_owner[i]);
	}
	rqspin_storage_map_destroy(keep);
	printf("deletes racing map_destroy: %u rounds, %llu values deleted by the racer\n", rounds,
	       (unsigned long long)atomic_load(&del_done));
}

int main(void)
{
	struct rqspin_storage_owner o = RQSPIN_STORAGE_OWNER_INIT;
	unsigned cycles = TU_ITERS(20000u);
	uint64_t base;

	tu_watchdog(60);
	base = live_bytes();
	racing_create();
	CHECK_EQ_U64(live_bytes(), base);
	racing_delete();
	rqspin_storage_barrier();
	CHECK_EQ_U64(live_bytes(), base);
	for (unsigned i = 0; i < cycles; i++) {
		struct rqspin_storage_map *m = rqspin_storage_map_create(8 + 8 * (i % 4), 0);
		uint64_t v[4] = { i, ~(uint64_t)i, 0, 0 }, out[4];

		CHECK(m);
		CHECK(rqspin_storage_update(m, &o, v, RQSPIN_STORAGE_NOEXIST) == 0);
		CHECK(rqspin_storage_lookup_copy(m, &o, out) == 0 && out[0] == i);
		rqspin_storage_map_destroy(m);
	}
	rqspin_storage_owner_destroy(&o);
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_map_dying: a creation racing map_destroy refused (-EIDRM) without "
	       "map_destroy waiting for its section; %u map create/destroy cycles; no leak\n",
	       cycles);
	return 0;
}
