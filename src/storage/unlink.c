/* SPDX-License-Identifier: MIT */
/*
 * Linking elements into buckets, and the no-fail teardown of an owner's
 * storage.
 *
 * Owner destruction cannot fail and must not wait for other threads (it is
 * async-signal-safe: its handler may have interrupted the very code that
 * holds the owner's lock). It puts the tombstone in the owner word (so
 * nothing can be created on the owner again, see rqs_st_dead), marks the
 * storage ST_GONE and tries the lock once; if that fails, whoever holds
 * the lock does the cleanup when it releases it (rqs_st_local_unlock). The
 * hand-off cannot be lost: the destroyer stores ST_GONE then reads the
 * lock word, a holder stores the unlock then reads the flags, each with a
 * seq_cst fence in between (store-buffering with fences): of the
 * destroyer and the last holder to unlock, at least one sees the other's
 * store. A destroyer that sees the lock word released takes the lock and
 * cleans up itself; a holder that sees ST_GONE tries the lock again and
 * cleans up. ST_CLEANED (set under the lock) makes the cleanup happen
 * once. This replaces the kernel's wait on owner_refcnt and its possible
 * 176-byte leak.
 *
 * Per element, the cleanup unlinks the storage side (under the storage lock
 * it holds) and tries the map side (bucket lock, nested in the right order,
 * tried once). When the bucket lock is taken, the element is left on the
 * list with its storage side done, and the bucket's holder sweeps it when
 * it unlocks, by the same hand-off on the bucket's sweep flag
 * (rqs_st_bucket_unlock). Whichever side comes second frees the element
 * (elem->state). Lookups that walk a bucket skip such leftovers: their
 * storage may be freed and its address reused by another owner's.
 */
#include "storage/internal.h"

union st_empty_tab rqs_st_empty;

/* The tombstone (see internal.h): flags say "gone and cleaned" to anyone
 * who looks; its index is the shared empty one. */
union st_dead_local rqs_st_dead = {
	.l = {
		.flags = ST_GONE | ST_CLEANED,
		.tab = ST_EMPTY_TAB,
	},
};

int rqs_st_link_map(struct st_elem *e, struct rqspin_storage_map *m)
{
	struct st_bucket *b = st_bucket_of(m, e->local);
	struct st_elem *first;
	int ret = rqspin_lock(&b->lock);

	if (!st_lock_ok(ret))
		return ret;
	/* relaxed: map_destroy sets it before it takes this lock to sweep;
	 * if we got the lock after that, its unlock carries the store to
	 * us; if before, it finds e on the list. */
	if (RQS_UNLIKELY(atomic_load_explicit(&m->dying, memory_order_relaxed))) {
		rqs_st_bucket_unlock(b);
		return -EIDRM;
	}
	/* relaxed: published with e below (release). Here, under the bucket
	 * lock and after the dying check, not by the caller after we return:
	 * a map_destroy may unlink e as soon as we unlock, and its NULL must
	 * be the last store (a first element outlives its map, and lookups go
	 * by this field). */
	atomic_store_explicit(&e->map, m, memory_order_relaxed);
	first = atomic_load_explicit(&b->head, memory_order_relaxed);
	atomic_store_explicit(&e->bnext, first, memory_order_relaxed);
	e->bpprev = &b->head;
	if (first)
		first->bpprev = &e->bnext;
	/* release: iterators that load the head see e initialised. */
	atomic_store_explicit(&b->head, e, memory_order_release);
	rqs_st_bucket_unlock(b);
	return 0;
}

uint32_t rqs_st_unlink_map_locked(struct st_elem *e)
{
	struct st_elem *next = atomic_load_explicit(&e->bnext, memory_order_relaxed);

	/* relaxed: the successor was published when it was linked; walkers
	 * that reach it through this store need nothing new. e->bnext stays
	 * as it is, so a walker standing on e continues. */
	atomic_store_explicit(e->bpprev, next, memory_order_relaxed);
	if (next)
		next->bpprev = e->bpprev;
	e->bpprev = NULL;
	/* No index may match e against a later map at m's address. */
	atomic_store_explicit(&e->map, NULL, memory_order_relaxed);
	/* acq_rel: our unlink before the other side's free decision, theirs
	 * before ours (see reap_zombie and below). */
	return atomic_fetch_or_explicit(&e->state, ST_MAP_UNLINKED, memory_order_acq_rel);
}

/* Unlink and free the leftovers of owners' cleanups. Bucket lock held. */
static void bucket_sweep_locked(struct st_bucket *b)
{
	struct st_elem *e;

	/* acquire: pairs with the release of bucket_ask_sweep, so the
	 * storage-side bits set before any request we consume are seen. */
	if (!atomic_exchange_explicit(&b->sweep, 0, memory_order_acquire))
		return;
	e = atomic_load_explicit(&b->head, memory_order_relaxed);
	while (e) {
		struct st_elem *next = atomic_load_explicit(&e->bnext, memory_order_relaxed);

		/* relaxed: ordered by the exchange above. The storage side is
		 * done: e's storage may be freed; only e's own fields are
		 * read (rqs_st_free_elem_rcu reads e->local only for an embedded
		 * element, whose storage waits for it). */
		if (atomic_load_explicit(&e->state, memory_order_relaxed) & ST_STORAGE_UNLINKED) {
			rqs_st_unlink_map_locked(e);
			rqs_st_free_elem_rcu(e);
		}
		e = next;
	}
}

void rqs_st_bucket_unlock(struct st_bucket *b)
{
	for (;;) {
		rqspin_unlock(&b->lock);
		/* seq_cst fence: our unlock before our read of the flag; pairs
		 * with the fence in bucket_ask_sweep (the storage lock's
		 * hand-off, file comment). */
		atomic_thread_fence(memory_order_seq_cst);
		if (RQS_LIKELY(!atomic_load_explicit(&b->sweep, memory_order_relaxed)))
			return;
		/* Taken again (a waiter got in): its holder's unlock sweeps. */
		if (!rqspin_trylock(&b->lock))
			return;
		bucket_sweep_locked(b);
	}
}

/* e (storage side done) stays on b's list: have b's holder sweep it. */
static __attribute__((noinline, cold)) void bucket_ask_sweep(struct st_bucket *b)
{
	/* seq_cst store (release: the caller's storage-side OR before the
	 * request), then a seq_cst fence before our read of the lock word:
	 * pairs with the fence in rqs_st_bucket_unlock. */
	atomic_store_explicit(&b->sweep, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	if (rqspin_trylock(&b->lock)) {
		bucket_sweep_locked(b);
		rqs_st_bucket_unlock(b);
	}
}

/* The storage is gone and locked by us: unlink e, one of its elements
 * (the storage side now, the map side now or by the bucket's holder). */
static void cleanup_elem(struct st_local *l, struct st_elem *e)
{
	struct rqspin_storage_map *m;
	struct st_bucket *b;
	uint32_t st;

	/* Read before the storage side is marked: from then on a
	 * map_destroy may unlink and free e (after a grace period;
	 * we are in a read section, and so is the map, which
	 * map_destroy frees after one too). NULL: the map side is
	 * being unlinked, and its unlinker frees e. */
	m = atomic_load_explicit(&e->map, memory_order_relaxed);
	/* acq_rel: see rqs_st_unlink_map_locked. The slot itself is
	 * emptied below; until then only this lock holder reads it
	 * (a probe of a gone storage comes from a caller racing the
	 * owner's destruction, or a handler that destroyed it). */
	st = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED, memory_order_acq_rel);
	if (st & ST_MAP_UNLINKED) {
		rqs_st_free_elem_rcu(e);
		return;
	}
	if (!m)
		return;
	b = st_bucket_of(m, l);
	/* Tried once: owner destruction never waits. */
	if (rqspin_trylock(&b->lock)) {
		if (!(atomic_load_explicit(&e->state, memory_order_relaxed) & ST_MAP_UNLINKED)) {
			rqs_st_unlink_map_locked(e);
			rqs_st_free_elem_rcu(e); /* both sides done, by us */
		}
		rqs_st_bucket_unlock(b);
	} else {
		bucket_ask_sweep(b);
	}
}

/* The storage is gone and locked by us: unlink everything. */
static void local_cleanup(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);

	/* relaxed: FIRST_IN changes under the lock we hold. */
	if (atomic_fetch_and_explicit(&l->flags, ~ST_FIRST_IN, memory_order_relaxed) & ST_FIRST_IN)
		cleanup_elem(l, l->first);
	for (uint32_t i = 0; i <= t->mask; i++) {
		struct st_elem *e = atomic_load_explicit(&t->slot[i].elem, memory_order_relaxed);

		if (e)
			cleanup_elem(l, e);
	}
	rqs_st_tab_release_all(l);
}

void rqs_st_local_finish_gone(struct st_local *l)
{
	bool do_free = false;

	/* relaxed: a stale "not cleaned" only costs a lock attempt. */
	if (atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_CLEANED)
		return;
	/* Tried once: the holder sees ST_GONE when it unlocks. (A thread
	 * that died holding the lock never does: its storage then stays, as
	 * everything else it held would.) */
	if (!rqspin_trylock(&l->lock))
		return;
	if (!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_CLEANED)) {
		local_cleanup(l);
		/* acq_rel: see rqs_st_release_embedded. If the embedded element
		 * still waits for its map side, that side frees the storage. */
		do_free = !(atomic_fetch_or_explicit(&l->flags, ST_CLEANED, memory_order_acq_rel) &
			    ST_EMB_LIVE);
	}
	rqspin_unlock(&l->lock);
	/* Freed after a grace period: threads that still reach l (through
	 * an element, in map_destroy) lock it, see ST_CLEANED, and leave. */
	if (do_free)
		rqs_st_free_local_rcu(l);
}

bool rqs_st_local_unlock(struct st_local *l)
{
	rqspin_unlock(&l->lock);
	/* seq_cst fence: our unlock before our read of the flags; pairs with
	 * the fence in rqspin_storage_owner_destroy (file comment). */
	atomic_thread_fence(memory_order_seq_cst);
	if (RQS_LIKELY(!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_GONE)))
		return false;
	rqs_st_local_finish_gone(l);
	return true;
}

RQSPIN_API void rqspin_storage_owner_destroy(struct rqspin_storage_owner *owner)
{
	uintptr_t w;
	struct st_local *l;

	if (!owner)
		return;
	st_read_lock();
	/* acq_rel: we take over the storage published with release, and
	 * nobody will find it through the owner again; the tombstone makes
	 * every later creation on this owner fail (create_elem's CAS
	 * expects 0), from any thread or handler. */
	w = __atomic_exchange_n((uintptr_t *)&owner->storage_, ST_OWNER_DEAD, __ATOMIC_ACQ_REL);
	if (w && w != ST_OWNER_DEAD) {
		l = st_local_of(w);
		/* relaxed: iterators only use it to name the owner. */
		atomic_store_explicit(&l->owner, NULL, memory_order_relaxed);
		/* seq_cst RMW, then a seq_cst fence: ST_GONE before our first
		 * read of the lock word; pairs with the fence in
		 * rqs_st_local_unlock (the file comment has the argument). */
		atomic_fetch_or_explicit(&l->flags, ST_GONE, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		rqs_st_local_finish_gone(l);
	}
	st_read_unlock();
}
