/* SPDX-License-Identifier: MIT */
/*
 * White-box test of the no-fail destruction paths (links the static library
 * and reads src/storage/internal.h), made deterministic by holding the
 * library's locks by hand, which is the state a signal handler finds when
 * it interrupts the library:
 *
 *  1. owner_destroy while this thread holds the owner's storage lock: the
 *     lock attempt fails (AA), nothing is freed, the owner is zeroed at
 *     once; the holder's unlock (rqs_st_local_unlock) does the cleanup.
 *  2. owner_destroy while this thread holds the bucket lock of one of the
 *     owner's values: the storage side is done, the map side is left, and
 *     the holder's unlock (rqs_st_bucket_unlock) sweeps it (and frees the
 *     storage, which waited for its embedded value).
 *  3. map_destroy while an owner still holds values of the map, then the
 *     owner's destruction: the storage side is finished by map_destroy.
 *  4. gets while this thread holds the storage's lock in the middle of a
 *     change of its index (odd seq): the lock-free probes give up, the lock
 *     attempt fails (AA), and the lookup walks the map's bucket instead:
 *     values are found, absent ones are -ENOENT; a delete gets -EDEADLK.
 * After each, and at the end, the allocator's live bytes are back at the
 * baseline.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage/internal.h"
#include "storage_util.h"
#include "test_util.h"

static struct st_local *local_of(struct rqspin_storage_owner *o)
{
	return st_local_of((uintptr_t)o->storage_);
}

static void fill(struct rqspin_storage_map **maps, int n, struct rqspin_storage_owner *o)
{
	for (int i = 0; i < n; i++) {
		uint64_t v[2] = { (uint64_t)i, ~(uint64_t)i };

		CHECK(rqspin_storage_update(maps[i], o, v, RQSPIN_STORAGE_NOEXIST) == 0);
	}
}

int main(void)
{
	struct rqspin_storage_map *maps[20];
	struct rqspin_storage_owner o = RQSPIN_STORAGE_OWNER_INIT;
	struct st_local *l;
	uint64_t base, with_values;
	int ret;

	tu_watchdog(120);
	base = live_bytes();
	for (int i = 0; i < 20; i++) {
		maps[i] = rqspin_storage_map_create(16, i == 19 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0);
		CHECK(maps[i]);
	}
	/* The maps' buckets come from malloc: the baseline holds. */
	CHECK_EQ_U64(live_bytes(), base);

	/* 1. Storage lock held by "the interrupted code". */
	fill(maps, 20, &o);
	l = local_of(&o);
	CHECK(((uintptr_t)o.storage_ & ST_OWNER_EMB) != 0); /* first value embedded */
	with_values = live_bytes();
	CHECK(with_values > base);
	rqspin_storage_read_lock(); /* as the library's paths do */
	ret = rqspin_lock(&l->lock);
	CHECK(ret == 0);
	rqspin_storage_owner_destroy(&o); /* AA inside: hands the work over */
	CHECK((uintptr_t)o.storage_ == ST_OWNER_DEAD);
	CHECK(atomic_load(&l->flags) & ST_GONE);
	CHECK(!(atomic_load(&l->flags) & ST_CLEANED));
	rqs_st_local_unlock(l); /* the holder's unlock finishes the destruction */
	CHECK(atomic_load(&l->flags) & ST_CLEANED);
	rqspin_storage_read_unlock();
	CHECK_EQ_U64(live_bytes(), base);

	/* 2. Bucket lock of the embedded value held: its map side is left
	 * to the holder, whose unlock sweeps it and frees the storage. */
	o = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
	fill(maps, 20, &o);
	l = local_of(&o);
	{
		struct st_bucket *b = st_bucket_of(maps[0], l);

		rqspin_storage_read_lock();
		CHECK(rqspin_lock(&b->lock) == 0);
		rqspin_storage_owner_destroy(&o);
		CHECK((uintptr_t)o.storage_ == ST_OWNER_DEAD);
		/* Cleaned, but the storage stays: its first element is still
		 * in the bucket list, the sweep is asked for. */
		CHECK(atomic_load(&l->flags) & ST_CLEANED);
		CHECK(atomic_load(&l->flags) & ST_EMB_LIVE);
		CHECK(atomic_load(&b->sweep));
		rqs_st_bucket_unlock(b);
		CHECK(!atomic_load(&b->sweep));
		rqspin_storage_read_unlock();
	}
	CHECK_EQ_U64(live_bytes(), base);

	/* 3. Maps go first; the owner keeps an empty storage until it goes. */
	o = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
	fill(maps, 20, &o);
	for (int i = 0; i < 20; i++) {
		rqspin_storage_map_destroy(maps[i]);
		maps[i] = NULL;
	}
	CHECK(o.storage_ != NULL);
	{
		struct rqspin_storage_map *m = rqspin_storage_map_create(16, 0);
		int err = 0;

		CHECK(m);
		CHECK(rqspin_storage_get(m, &o, NULL, 0, &err) == NULL && err == -ENOENT);
		CHECK(rqspin_storage_get(m, &o, NULL, RQSPIN_STORAGE_F_CREATE, &err) != NULL);
		rqspin_storage_owner_destroy(&o);
		rqspin_storage_map_destroy(m);
	}
	CHECK_EQ_U64(live_bytes(), base);
	o = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;

	/* 4. An index change in progress on this thread. */
	for (int i = 0; i < 20; i++) {
		maps[i] = rqspin_storage_map_create(16, i == 19 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0);
		CHECK(maps[i]);
	}
	fill(maps, 19, &o); /* maps[19] stays absent */
	l = local_of(&o);
	rqspin_storage_read_lock();
	CHECK(rqspin_lock(&l->lock) == 0);
	atomic_fetch_add(&st_local_tab(l)->seq, 1); /* odd: "changing" */
	for (int i = 0; i < 20; i++) {
		int err = 1;
		uint64_t *p = rqspin_storage_get(maps[i], &o, NULL, 0, &err);
		uint64_t *q = rqspin__storage_get_slow(maps[i], &o, NULL, 0, &err);
		uint64_t v[2];

		if (i == 19) {
			CHECK(!p && !q && err == -ENOENT);
			CHECK(rqspin_storage_lookup_copy(maps[i], &o, v) == -ENOENT);
			continue;
		}
		CHECK(p && p == q && err == 0);
		CHECK(p[0] == (uint64_t)i && p[1] == ~(uint64_t)i);
		CHECK(rqspin_storage_lookup_copy(maps[i], &o, v) == 0 && v[0] == (uint64_t)i);
	}
	CHECK(rqspin_storage_delete(maps[1], &o) == -EDEADLK);
	atomic_fetch_add(&st_local_tab(l)->seq, 1); /* even again */
	rqs_st_local_unlock(l);
	rqspin_storage_read_unlock();
	CHECK(rqspin_storage_delete(maps[1], &o) == 0);
	rqspin_storage_owner_destroy(&o);
	for (int i = 0; i < 20; i++)
		rqspin_storage_map_destroy(maps[i]);
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_handoff: owner destroy handed to the lock holder, map side swept by "
	       "the bucket's holder, maps before owners, lookups past an index change; "
	       "no leak\n");
	return 0;
}
