/* SPDX-License-Identifier: MIT */
/*
 * White-box: a signal handler that interrupts its own thread inside the
 * index-table pool (the pool's lock held: the interrupted code is shrinking
 * an owner's index) and then grows and shrinks other owners' indexes.
 *
 * The pool's test hook (table.c compiled once more with
 * RQSPIN_STORAGE_TEST_HOOKS) raises SIGUSR1 right after the lock is taken
 * for owner A's shrink. The handler:
 *   - gives owner B (one value, no index) a second value: its first index
 *     must come without the pool (a new table), and the update succeeds;
 *   - gives owner C (8 indexed values, a full 8-slot table) a ninth: the
 *     16-slot table is new, and the outgrown one stays on C's chain;
 *   - deletes B's second value: the index would go back to the empty
 *     table, which needs the pool, so it stays;
 *   - reads every value it wrote.
 * Nothing waits (the pool's rqspinlock reports the handler's attempt as
 * AA; a lock that waited would hang here until the watchdog). Afterwards
 * A's shrink completes, C's chain reaches the pool on C's next shrink, B's
 * index goes when B deletes again, every value is right and nothing leaks
 * once the maps are gone.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>

#include <rqspin/storage.h>

#include "storage/internal.h"
#include "storage_util.h"
#include "test_util.h"

#define NM 24

static struct rqspin_storage_map *M[NM];
static struct rqspin_storage_owner A, B, C;
static _Atomic bool armed;
static atomic_int handler_runs;

static struct st_local *local_of(struct rqspin_storage_owner *o)
{
	return st_local_of((uintptr_t)o->storage_);
}

static struct st_tab *tab_of(struct rqspin_storage_owner *o)
{
	return atomic_load(&local_of(o)->tab);
}

static void put(int m, struct rqspin_storage_owner *o, unsigned id)
{
	st_test_put(M[m], (unsigned)m, o, id);
}

static void expect(int m, struct rqspin_storage_owner *o, unsigned id, bool present)
{
	st_test_expect(M[m], (unsigned)m, o, id, present);
}

static void on_usr1(int sig)
{
	struct st_tab *ct;

	(void)sig;
	/* B: its first index, without the pool. */
	CHECK(tab_of(&B) == ST_EMPTY_TAB);
	put(14, &B, 2);
	CHECK(tab_of(&B) != ST_EMPTY_TAB && !tab_of(&B)->pooled);
	expect(14, &B, 2, true);
	/* C: 8 -> 16 slots; the 8-slot table kept on C's chain. */
	ct = tab_of(&C);
	CHECK(ct->mask + 1 == 8 && ct->live == 8);
	put(22, &C, 3);
	CHECK(tab_of(&C)->mask + 1 == 16);
	CHECK(caa_container_of(tab_of(&C), struct st_xtab, t)->older ==
	      caa_container_of(ct, struct st_xtab, t));
	for (int m = 13; m <= 22; m++)
		expect(m, &C, 3, true);
	/* B back to one value: the empty table needs the pool; the index
	 * stays (empty). */
	CHECK(rqspin_storage_delete(M[14], &B) == 0);
	CHECK(tab_of(&B) != ST_EMPTY_TAB && tab_of(&B)->live == 0);
	expect(14, &B, 2, false);
	expect(13, &B, 2, true);
	atomic_fetch_add(&handler_runs, 1);
}

static void hook(unsigned where, struct st_elem *e)
{
	(void)e;
	if (where == ST_HOOK_POOL && atomic_exchange(&armed, false))
		raise(SIGUSR1);
}

int main(void)
{
	uint64_t raw0, pool0;
	int block[] = { 0 };

	tu_watchdog(60);
	raw0 = raw_live_bytes();
	for (int i = 0; i < NM; i++) {
		M[i] = rqspin_storage_map_create(sizeof(struct st_test_val), 0);
		CHECK(M[i]);
	}
	/* A: a first value and 12 indexed (16 slots). B: one value. C: a
	 * first value and 8 indexed (a full 8-slot table). */
	for (int m = 0; m <= 12; m++)
		put(m, &A, 1);
	CHECK(tab_of(&A)->mask + 1 == 16);
	put(13, &B, 2);
	for (int m = 13; m <= 21; m++)
		put(m, &C, 3);
	CHECK(tab_of(&C)->mask + 1 == 8);

	tu_set_handler(SIGUSR1, on_usr1, 0, block);
	rqs_st_test_hook = hook;
	pool0 = rqspin_storage_pool_bytes();
	/* A's deletes: at 4 indexed values left, 16 slots shrink to 8, under
	 * the pool's lock, where the hook raises the signal. */
	atomic_store(&armed, true);
	for (int m = 12; m >= 5; m--)
		CHECK(rqspin_storage_delete(M[m], &A) == 0);
	rqs_st_test_hook = NULL;
	CHECK(atomic_load(&handler_runs) == 1);
	CHECK(tab_of(&A)->mask + 1 == 8);
	CHECK(rqspin_storage_pool_bytes() > pool0);
	for (int m = 0; m <= 12; m++)
		expect(m, &A, 1, m <= 4);

	/* C's chain reaches the pool when C shrinks with the pool free:
	 * 16 slots, 9 indexed; down to 4. */
	for (int m = 22; m >= 18; m--)
		CHECK(rqspin_storage_delete(M[m], &C) == 0);
	CHECK(tab_of(&C)->mask + 1 == 8);
	CHECK(caa_container_of(tab_of(&C), struct st_xtab, t)->older == NULL);
	for (int m = 13; m <= 22; m++)
		expect(m, &C, 3, m <= 17);
	/* B's empty index goes with its next delete. */
	put(15, &B, 2);
	CHECK(rqspin_storage_delete(M[15], &B) == 0);
	CHECK(tab_of(&B) == ST_EMPTY_TAB);
	expect(13, &B, 2, true);

	rqspin_storage_owner_destroy(&A);
	rqspin_storage_owner_destroy(&B);
	rqspin_storage_owner_destroy(&C);
	for (int i = 0; i < NM; i++)
		rqspin_storage_map_destroy(M[i]);
	CHECK_EQ_U64(rqspin_storage_pool_bytes(), 0);
	CHECK_EQ_U64(raw_live_bytes(), raw0);
	tu_write_str("storage_pool_handler: ok\n");
	return 0;
}
