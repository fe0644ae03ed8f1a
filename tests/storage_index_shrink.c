/* SPDX-License-Identifier: MIT */
/*
 * An owner's index shrinks as its values are deleted, and the tables it
 * gives up are safe for readers that still hold their address.
 * Deterministic, white-box (links the static library, reads the storage's
 * structures):
 *   1. an owner with 40 values has a 64-slot index; deleting all but the
 *      first and 3 others shrinks it to 8 slots, and the tables given up
 *      go to the pool (rqspin_storage_pool_bytes grows);
 *   2. deleting the last indexed values leaves the owner no index at all
 *      (the shared empty table), its first value still found;
 *   3. the 8-slot table given up in 2 is the next one another owner gets
 *      when its index starts; a reader of the first owner that still holds
 *      the table's address must not take the second owner's value from it:
 *      the inline home-slot check (rqspin__storage_home_hit) and the
 *      library's probe (st_tab_probe) both see the owner stamp and decline
 *      (without the stamp, both return the other owner's element);
 *   4. values are right throughout; destroying the owners and the maps
 *      leaves the pool empty and nothing allocated.
 */
#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "storage/internal.h"
#include "storage_util.h"

#define NMAPS 48
#define NVALS 40

static struct rqspin_storage_map *maps[NMAPS];

static struct st_local *local_of(struct rqspin_storage_owner *o)
{
	return st_local_of((uintptr_t)o->storage_);
}

static uint32_t index_cap(struct rqspin_storage_owner *o)
{
	struct st_tab *t = atomic_load(&local_of(o)->tab);

	return t == ST_EMPTY_TAB ? 0 : t->mask + 1;
}

static void put(int m, struct rqspin_storage_owner *o, unsigned id)
{
	st_test_put(maps[m], (unsigned)m, o, id);
}

static void expect(int m, struct rqspin_storage_owner *o, unsigned id, bool present)
{
	st_test_expect(maps[m], (unsigned)m, o, id, present);
}

int main(void)
{
	struct rqspin_storage_owner a = { 0 }, b = { 0 };
	uint64_t base, raw0;
	struct st_tab *t8;
	struct st_local *la, *lb;
	struct st_elem *eb;

	tu_watchdog(60);
	raw0 = raw_live_bytes();
	base = live_bytes();
	for (int i = 0; i < NMAPS; i++) {
		maps[i] = rqspin_storage_map_create(sizeof(struct st_test_val), 0);
		CHECK(maps[i]);
	}

	/* 1. Grow to 64 slots (40 values: the first outside the index, 39
	 * in it, 3/4 of 64 = 48), then shrink. */
	for (int m = 0; m < NVALS; m++)
		put(m, &a, 1);
	la = local_of(&a);
	CHECK(la->first != NULL);
	CHECK_EQ_U64(index_cap(&a), 64);
	CHECK_EQ_U64(rqspin_storage_pool_bytes(), 0);
	for (int m = 4; m < NVALS; m++)
		CHECK(rqspin_storage_delete(maps[m], &a) == 0);
	/* 3 indexed values left: 64 -> 8 (a quarter full or less halves). */
	CHECK_EQ_U64(index_cap(&a), 8);
	CHECK(rqspin_storage_pool_bytes() > 0);
	for (int m = 0; m < NVALS; m++)
		expect(m, &a, 1, m < 4);

	/* 2. The last indexed values go: no index at all. */
	t8 = atomic_load(&la->tab);
	for (int m = 1; m < 4; m++)
		CHECK(rqspin_storage_delete(maps[m], &a) == 0);
	CHECK(atomic_load(&la->tab) == ST_EMPTY_TAB);
	CHECK(atomic_load(&t8->seq) & 1); /* retired: odd for good */
	expect(0, &a, 1, true);
	for (int m = 1; m < NVALS; m++)
		expect(m, &a, 1, false);

	/* 3. b's first index is a's old 8-slot table (the pool's latest). */
	put(0, &b, 2);
	put(1, &b, 2);
	lb = local_of(&b);
	CHECK(atomic_load(&lb->tab) == t8);
	CHECK(atomic_load(&t8->owner) == lb && !(atomic_load(&t8->seq) & 1));
	eb = st_tab_find_locked(t8, maps[1]->key);
	CHECK(eb != NULL);
	/* A reader of a that loaded t8's address before it was given up. */
	CHECK(rqspin__storage_home_hit((const struct rqspin__storage_local *)(const void *)la,
				       (const struct rqspin__storage_index *)(const void *)t8,
				       maps[1]->key) == NULL);
	CHECK(st_tab_probe(la, t8, maps[1]->key) == ST_RETRY);
	/* b's own readers find it. */
	CHECK(rqspin__storage_home_hit((const struct rqspin__storage_local *)(const void *)lb,
				       (const struct rqspin__storage_index *)(const void *)t8,
				       maps[1]->key) ==
	      (struct rqspin__storage_elem *)(void *)eb);
	CHECK(st_tab_probe(lb, t8, maps[1]->key) == eb);
	expect(1, &a, 1, false);
	expect(1, &b, 2, true);
	expect(0, &b, 2, true);

	/* 4. Owners, then maps: the last map drains the pool. */
	rqspin_storage_owner_destroy(&a);
	rqspin_storage_owner_destroy(&b);
	CHECK_EQ_U64(live_bytes(), base);
	for (int i = 0; i < NMAPS; i++)
		rqspin_storage_map_destroy(maps[i]);
	CHECK_EQ_U64(rqspin_storage_pool_bytes(), 0);
	CHECK_EQ_U64(raw_live_bytes(), raw0);
	tu_write_str("storage_index_shrink: ok\n");
	return 0;
}
