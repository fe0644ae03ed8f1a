/* SPDX-License-Identifier: MIT */
/*
 * White-box: map_destroy racing the creation of an owner's first value.
 *
 * The creator links the new element into the map's bucket, then (still
 * holding the owner's storage lock) puts it in the storage. A destroy of
 * the map that unlinks the element between those two steps clears the
 * element's map field; nothing may set it again afterwards. A first
 * element lives as long as its owner's storage, and lookups (the inline
 * get first of all) match it by that field: left naming the destroyed map,
 * it would be found as the owner's value of the next map that malloc
 * places at the same address.
 *
 * Each round: map M, owner O; a test hook in the creator's path (ops.c
 * compiled once more with RQSPIN_STORAGE_TEST_HOOKS) runs right after the
 * link; it starts thread D's rqspin_storage_map_destroy(M) and waits until
 * D has unlinked the element (D then waits for O's storage lock). Checks:
 * the element's map is NULL once the destroy is done; after the grace
 * period, a new map at M's address (when malloc gives one) has no value
 * for O; no bytes leak. Before the fix the creator stored the map field
 * after the link returned, over D's NULL.
 *
 * Links the static library, reads src/storage/internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <rqspin/storage.h>

#include "storage/internal.h"
#include "storage_util.h"
#include "test_util.h"

#define ROUNDS 20
#define VALUE 16

static struct rqspin_storage_map *M;
static _Atomic bool armed, d_go;
static struct st_elem *_Atomic linked;

static void hook(unsigned where, struct st_elem *e)
{
	uint64_t t0;

	if (where != ST_HOOK_LINKED || !atomic_exchange(&armed, false))
		return;
	atomic_store(&linked, e);
	atomic_store(&d_go, true);
	t0 = tu_now_ns();
	while (!(atomic_load_explicit(&e->state, memory_order_acquire) & ST_MAP_UNLINKED)) {
		CHECK(tu_now_ns() - t0 < 60ull * 1000000000ull); /* D never unlinked it */
		tu_sleep_us(100);
	}
}

static void *d_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&d_go))
		tu_sleep_us(50);
	rqspin_storage_map_destroy(M);
	return NULL;
}

int main(void)
{
	uint64_t base;
	unsigned reused = 0;
	int err;

	tu_watchdog(120);
	rqs_st_test_hook = hook;
	base = live_bytes();
	for (int r = 0; r < ROUNDS; r++) {
		struct rqspin_storage_owner o = RQSPIN_STORAGE_OWNER_INIT;
		struct rqspin_storage_map *old, *m2;
		struct st_elem *e;
		pthread_t d;
		void *v;

		M = rqspin_storage_map_create(VALUE, 0);
		CHECK(M != NULL);
		old = M;
		atomic_store(&d_go, false);
		atomic_store(&linked, NULL);
		atomic_store(&armed, true);
		d = tu_thread_start(d_main, NULL);
		v = rqspin_storage_get(M, &o, NULL, RQSPIN_STORAGE_F_CREATE, &err);
		/* The creation happened before the destroy took the value
		 * out: it succeeded, or saw the owner's storage taken. */
		CHECK(v != NULL || err == -EIDRM);
		tu_thread_join(d);
		e = atomic_load(&linked);
		CHECK(e != NULL);
		/* It is O's first element (the owner word points at it). */
		CHECK(((uintptr_t)o.storage_ & ST_OWNER_EMB) &&
		      st_embedded_of((uintptr_t)o.storage_) == e);
		if (atomic_load(&e->map) != NULL) {
			fprintf(stderr, "round %d: the first element of a destroyed map still "
					"names it\n", r);
			return 1;
		}
		/* The map is freed after a grace period; a new one may land at
		 * its address and must not find O's old value. */
		rqspin_storage_barrier();
		m2 = rqspin_storage_map_create(VALUE, 0);
		CHECK(m2 != NULL);
		if (m2 == old) {
			reused++;
			CHECK(rqspin_storage_get(m2, &o, NULL, 0, &err) == NULL && err == -ENOENT);
		}
		rqspin_storage_map_destroy(m2);
		rqspin_storage_owner_destroy(&o);
	}
	rqs_st_test_hook = NULL;
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_link_destroy: %d rounds, map address reused in %u\n", ROUNDS, reused);
	return 0;
}
