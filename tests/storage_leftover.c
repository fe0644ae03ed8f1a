/* SPDX-License-Identifier: MIT */
/*
 * White-box test of a destroyed owner's leftover element (links the static
 * library and reads src/storage/internal.h), made deterministic by holding
 * the library's locks by hand, the state a signal handler finds:
 *
 *  1. owner_destroy while the bucket lock of one of the owner's values is
 *     held (a handler that interrupted a link or delete in that bucket):
 *     the value's storage side is done, its map side is left on the list,
 *     and the storage is freed. A second owner gets a storage at the same
 *     address; a get on it that must walk the bucket (its own index is
 *     being changed: odd seq, lock held, AA) must not take the leftover
 *     for its own value: -ENOENT, and with F_CREATE -EDEADLK, never the
 *     dead owner's value.
 *  2. The leftover is reclaimed by the next holder of its bucket lock (a
 *     link into that bucket), before any map_destroy: the allocator's
 *     live bytes are back at the baseline with the maps still alive.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage/internal.h"
#include "storage_util.h"
#include "test_util.h"

/* Bigger than an embeddable first element: a separate allocation from
 * rqspin_malloc_nolock, freed on its own. */
#define BIG 512

static struct st_local *local_of(struct rqspin_storage_owner *o)
{
	return st_local_of((uintptr_t)o->storage_);
}

#define NTRY 4096

int main(void)
{
	struct rqspin_storage_map *small, *big;
	struct rqspin_storage_owner dead = RQSPIN_STORAGE_OWNER_INIT;
	static struct rqspin_storage_owner o[NTRY];
	uint64_t sv[2] = { 1, 2 }, bv[BIG / 8], base;
	struct st_local *l1, *l2 = NULL;
	struct st_bucket *b;
	int n, err;

	tu_watchdog(120);
	memset(o, 0, sizeof(o));
	base = live_bytes();
	small = rqspin_storage_map_create(sizeof(sv), 0);
	big = rqspin_storage_map_create(BIG, 0);
	CHECK(small && big);
	CHECK_EQ_U64(live_bytes(), base); /* maps come from malloc */

	/* 1. The dead owner: its first value (embedded) in small, a big one
	 * whose bucket lock "the interrupted code" holds. */
	for (unsigned i = 0; i < BIG / 8; i++)
		bv[i] = 0xdeadull << 16 | i;
	CHECK(rqspin_storage_update(small, &dead, sv, RQSPIN_STORAGE_NOEXIST) == 0);
	CHECK(rqspin_storage_update(big, &dead, bv, RQSPIN_STORAGE_NOEXIST) == 0);
	l1 = local_of(&dead);
	b = st_bucket_of(big, l1);
	rqspin_storage_read_lock();
	CHECK(rqspin_lock(&b->lock) == 0);
	rqspin_storage_owner_destroy(&dead);
	rqspin_unlock(&b->lock); /* by hand: no sweep */
	/* Still in the section: l1 is queued for freeing. */
	CHECK(atomic_load(&l1->flags) & ST_CLEANED);
	CHECK(!(atomic_load(&l1->flags) & ST_EMB_LIVE)); /* the storage is freed */
	{
		/* The leftover: on the list, storage side done. */
		struct st_elem *e = atomic_load(&b->head);

		CHECK(e && e->local == l1 && atomic_load(&e->map) == big);
		CHECK(atomic_load(&e->state) == ST_STORAGE_UNLINKED);
	}
	rqspin_storage_read_unlock();
	rqspin_storage_barrier(); /* l1 is back in the allocator */

	/* A live owner whose storage has l1's address (the allocator hands
	 * the block back; keep the misses so that each try gets another). */
	for (n = 0; n < NTRY; n++) {
		CHECK(rqspin_storage_update(small, &o[n], sv, RQSPIN_STORAGE_NOEXIST) == 0);
		if (local_of(&o[n]) == l1) {
			l2 = l1;
			break;
		}
	}
	CHECK(l2 != NULL);
	/* Its index "being changed by the code a handler interrupted". */
	rqspin_storage_read_lock();
	CHECK(rqspin_lock(&l2->lock) == 0);
	atomic_fetch_add(&st_local_tab(l2)->seq, 1);
	err = 1;
	CHECK(rqspin_storage_get(big, &o[n], NULL, 0, &err) == NULL && err == -ENOENT);
	err = 1;
	CHECK(rqspin__storage_get_slow(big, &o[n], NULL, 0, &err) == NULL && err == -ENOENT);
	err = 1;
	CHECK(rqspin_storage_get(big, &o[n], NULL, RQSPIN_STORAGE_F_CREATE, &err) == NULL &&
	      err == -EDEADLK);
	CHECK(rqspin_storage_lookup_copy(big, &o[n], bv) == -ENOENT);
	/* Its own values are still found by the walk. */
	{
		uint64_t *p = rqspin_storage_get(small, &o[n], NULL, 0, &err);

		CHECK(p && err == 0 && p[0] == 1 && p[1] == 2);
	}
	atomic_fetch_add(&st_local_tab(l2)->seq, 1);
	rqs_st_local_unlock(l2);
	rqspin_storage_read_unlock();

	/* 2. The next link into the leftover's bucket (same storage address,
	 * same bucket) reclaims it; no map_destroy needed. */
	memset(bv, 0, sizeof(bv));
	CHECK(rqspin_storage_update(big, &o[n], bv, RQSPIN_STORAGE_NOEXIST) == 0);
	for (int i = 0; i <= n; i++)
		rqspin_storage_owner_destroy(&o[i]);
	CHECK_EQ_U64(live_bytes(), base);

	rqspin_storage_map_destroy(small);
	rqspin_storage_map_destroy(big);
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_leftover: a walk past a destroyed owner's leftover at a reused storage "
	       "address (try %d) misses it; the next link into its bucket frees it; no leak\n",
	       n + 1);
	return 0;
}
