/* SPDX-License-Identifier: MIT */
/*
 * Linking elements into buckets, and the no-fail teardown of an owner's
 * storage.
 *
 * Owner destruction cannot fail and must not wait for other threads (it is
 * async-signal-safe: its handler may have interrupted the very code that
 * holds the owner's lock). It marks the storage ST_GONE and tries the lock;
 * if that fails, whoever holds the lock does the cleanup when it releases
 * it (st_local_unlock). The hand-off cannot be lost: the destroyer stores
 * ST_GONE then reads the lock word, a holder stores the unlock then reads
 * the flags, each with a seq_cst fence in between (store-buffering with
 * fences): at least one of them sees the other's store. A destroyer that
 * sees the lock word released takes the lock and cleans up itself; a holder
 * that sees ST_GONE takes the lock again and cleans up. ST_CLEANED (set
 * under the lock) makes the cleanup happen once. This replaces the
 * kernel's wait on owner_refcnt and its possible 176-byte leak.
 *
 * Per element, the cleanup unlinks the storage side (under the storage lock
 * it holds) and tries the map side (bucket lock, nested in the right order);
 * when the bucket lock fails, map_destroy, which retries until it gets
 * every bucket lock, finishes that side. Whichever side comes second frees
 * the element (elem->state).
 */
#include "storage/internal.h"

int st_link_map(struct st_elem *e, struct rqspin_storage_map *m)
{
	struct st_bucket *b = st_bucket_of(m, e->local);
	struct st_elem *first;
	int ret = rqspin_lock(&b->lock);

	if (!st_lock_ok(ret))
		return ret;
	first = atomic_load_explicit(&b->head, memory_order_relaxed);
	atomic_store_explicit(&e->bnext, first, memory_order_relaxed);
	e->bpprev = &b->head;
	if (first)
		first->bpprev = &e->bnext;
	/* release: iterators that load the head see e initialised. */
	atomic_store_explicit(&b->head, e, memory_order_release);
	rqspin_unlock(&b->lock);
	return 0;
}

uint32_t st_unlink_map_locked(struct rqspin_storage_map *m, struct st_elem *e)
{
	struct st_elem *next = atomic_load_explicit(&e->bnext, memory_order_relaxed);

	(void)m;
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

/* The storage is gone and locked by us: unlink everything. */
static void local_cleanup(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);

	for (uint32_t i = 0; i <= t->mask; i++) {
		struct st_elem *e = atomic_load_explicit(&t->slot[i].elem, memory_order_relaxed);
		struct rqspin_storage_map *m;
		uint32_t st;

		if (!e)
			continue;
		/* acquire: if map_destroy already did the map side (and
		 * cleared map), we see its state bit. */
		st = atomic_load_explicit(&e->state, memory_order_acquire);
		m = atomic_load_explicit(&e->map, memory_order_relaxed);
		if (!(st & ST_MAP_UNLINKED) && m) {
			/* m stays allocated: map_destroy frees it only after
			 * a grace period, and we are in a read section. */
			struct st_bucket *b = st_bucket_of(m, l);

			if (st_lock_ok(rqspin_lock(&b->lock))) {
				if (!(atomic_load_explicit(&e->state, memory_order_relaxed) &
				      ST_MAP_UNLINKED))
					st_unlink_map_locked(m, e);
				rqspin_unlock(&b->lock);
			}
		}
		/* acq_rel: see st_unlink_map_locked. The slot itself is
		 * emptied below; until then only this lock holder reads it
		 * (probes of a gone storage are misuse, and harmless). */
		st = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED, memory_order_acq_rel);
		if (st & ST_MAP_UNLINKED)
			st_free_elem_rcu(e);
	}
	st_tab_release_all(l);
}

void st_local_finish_gone(struct st_local *l)
{
	bool do_free = false;

	/* relaxed: a stale "not cleaned" only costs a lock attempt. */
	if (atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_CLEANED)
		return;
	if (!st_lock_ok(rqspin_lock(&l->lock)))
		return; /* the holder sees ST_GONE when it unlocks */
	if (!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_CLEANED)) {
		local_cleanup(l);
		/* acq_rel: see st_release_embedded. If the embedded element
		 * still waits for its map side, map_destroy frees the storage. */
		do_free = !(atomic_fetch_or_explicit(&l->flags, ST_CLEANED, memory_order_acq_rel) &
			    ST_EMB_LIVE);
	}
	rqspin_unlock(&l->lock);
	/* Freed after a grace period: threads that still reach l (through
	 * an element, in map_destroy) lock it, see ST_CLEANED, and leave. */
	if (do_free)
		st_free_local_rcu(l);
}

void st_local_unlock(struct st_local *l)
{
	rqspin_unlock(&l->lock);
	/* seq_cst fence: our unlock before our read of the flags; pairs with
	 * the fence in rqspin_storage_owner_destroy (file comment). */
	atomic_thread_fence(memory_order_seq_cst);
	if (ST_UNLIKELY(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_GONE))
		st_local_finish_gone(l);
}

RQSPIN_API void rqspin_storage_owner_destroy(struct rqspin_storage_owner *owner)
{
	struct st_local *l;

	if (!owner)
		return;
	st_read_lock();
	/* acq_rel: we take over the storage published with release, and
	 * nobody will find it through the owner again. */
	l = st_local_of(__atomic_exchange_n((uintptr_t *)&owner->storage_, 0, __ATOMIC_ACQ_REL));
	if (l) {
		/* relaxed: iterators only use it to name the owner. */
		atomic_store_explicit(&l->owner, NULL, memory_order_relaxed);
		/* seq_cst RMW, then a seq_cst fence: ST_GONE before our first
		 * read of the lock word; pairs with the fence in
		 * st_local_unlock (the file comment has the argument). */
		atomic_fetch_or_explicit(&l->flags, ST_GONE, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		st_local_finish_gone(l);
	}
	st_read_unlock();
}
