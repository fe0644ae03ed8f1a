/* SPDX-License-Identifier: MIT */
/*
 * Slow paths of a heap's size classes: carving fresh objects, collecting
 * remote frees, switching pages, the partial-page lists, draining the
 * deferred list, giving back empty pages. Every function here runs with
 * exclusive use of the class it changes: its busy flag is held by the
 * caller or taken here, or the whole heap is claimed (exiting owner,
 * reaper).
 */
#include "alloc/alloc_internal.h"

#define CARVE_BYTES 4096u /* fresh objects linked per refill: one OS page */

/* Link up to CARVE_BYTES of never-used objects of pg onto its (empty) free
 * list, in address order. */
static ALLOC_FN void page_carve(struct page *pg)
{
	uint32_t bump = pg->bump, bs = pg->bsize;
	uint32_t n = CARVE_BYTES / bs;
	char *first = page_start(pg) + (size_t)bump * bs;
	struct block *head = pg->free;
	uint32_t i;

	if (n == 0)
		n = 1;
	if (n > pg->capacity - bump)
		n = pg->capacity - bump;
	san_carve(first, (size_t)n * bs);
	for (i = n; i-- > 0;) {
		struct block *b = (struct block *)(first + (size_t)i * bs);

		b->next = head;
		if (bs >= 16)
			b->canary = block_canary(b);
#if RQSPIN_ALLOC_DEBUG
		else
			tiny_mark_free(b);
#endif
		head = b;
	}
	page_free_set(pg, head);
	/* Read by other threads checking a pointer they free (monotonic). */
	__atomic_store_n(&pg->bump, bump + n, __ATOMIC_RELAXED);
}

/* Prepend the remote list in word x (pointer and count) to pg's free list. */
static ALLOC_FN void page_take_chain(struct page *pg, uintptr_t x)
{
	struct block *list = (struct block *)(x & XFREE_PTR_MASK), *tail;

	page_used_set(pg, pg->used - XFREE_COUNT(x));
	if (pg->free) {
		for (tail = list; tail->next; tail = tail->next)
			;
		tail->next = pg->free;
	}
	page_free_set(pg, list);
}

/* Take pg's remote frees, leaving its NOTIFIED bit as it is (the page may
 * be queued on the notify list; that entry is handled later). */
static ALLOC_FN bool page_collect(struct page *pg)
{
	uintptr_t x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);

	do {
		if (!(x & XFREE_PTR_MASK))
			return false;
		/* acquire: pairs with the release CAS of the remote frees, so
		 * the links and canaries they wrote are visible. */
	} while (!atomic_compare_exchange_weak_explicit(&pg->xfree, &x, x & XFREE_NOTIFIED,
							memory_order_acquire,
							memory_order_relaxed));
	page_take_chain(pg, x);
	return true;
}

static ALLOC_FN void partial_unlink(struct hclass *hc, struct page *pg)
{
	if (pg->prev)
		pg->prev->next = pg->next;
	else
		hc->partial = pg->next;
	if (pg->next)
		pg->next->prev = pg->prev;
	pg->next = pg->prev = NULL;
	pg->in_partial = 0;
}

static ALLOC_FN void partial_push(struct hclass *hc, struct page *pg)
{
	pg->prev = NULL;
	pg->next = hc->partial;
	if (hc->partial)
		hc->partial->prev = pg;
	hc->partial = pg;
	pg->in_partial = 1;
}

/* pg (not the current page) got free objects, or came off the notify
 * list: it becomes a partial page, or, if nothing of it is in use and no
 * remote free is pending, empty. A page that still has no free object
 * stays full (off the lists, its FULL flag set). */
ALLOC_FN void rqs_free_local_slow(struct heap *h, struct hclass *hc, struct page *pg)
{
	uintptr_t x;

	if (!pg->free)
		return;
	x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);
	/* It leaves the full state: remote frees need not queue it any more.
	 * relaxed: the flag publishes nothing (it only asks for a notice). */
	while ((x & XFREE_FULL) &&
	       !atomic_compare_exchange_weak_explicit(&pg->xfree, &x, x & ~XFREE_FULL,
						      memory_order_relaxed, memory_order_relaxed))
		;
	x &= ~XFREE_FULL;
	/* Every object the owner still counts as used waits on the remote
	 * list (remote frees came first and were too few to announce the
	 * page, then our frees brought the rest): the page is empty. Its
	 * list is dropped, not joined. acquire: the remote frees' writes to
	 * the objects happen before the page is reused or given back. The
	 * CAS fails only on a push, which no legitimate free can make now
	 * (nothing of the page is live); a queued page (NOTIFIED) is left
	 * to its notice. */
	while ((x & XFREE_PTR_MASK) && !(x & XFREE_NOTIFIED) && XFREE_COUNT(x) >= pg->used) {
		if (atomic_compare_exchange_weak_explicit(&pg->xfree, &x, 0, memory_order_acquire,
							  memory_order_relaxed)) {
			page_used_set(pg, 0);
			x = 0;
			break;
		}
	}
	/* relaxed: with used == 0 no object of pg is live, so no legitimate
	 * remote free can start after this load; a NOTIFIED bit still set
	 * means the page is queued and will be handled when dequeued. */
	if (pg->used == 0 && x == 0) {
		if (pg->in_partial)
			partial_unlink(hc, pg);
		rqs_page_retire(h, pg);
		return;
	}
	if (!pg->in_partial)
		partial_push(hc, pg);
}

/*
 * pg came off the notify list: clear NOTIFIED, and take its remote frees
 * when they matter now -- the page had no free object (it was full, or it
 * is the current page and ran dry), or they are all its objects (it is
 * empty and can go). Otherwise the list stays where it is, for the
 * refill that empties the page's free list (page_collect takes it whole,
 * without walking it, when the free list is empty).
 */
static ALLOC_FN void page_absorb_remote(struct heap *h, struct hclass *hc, struct page *pg)
{
	uintptr_t x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);

	for (;;) {
		bool take = (x & XFREE_PTR_MASK) &&
			    (!pg->free || (pg != hc->page && XFREE_COUNT(x) >= pg->used));

		if (take) {
			/* acquire: sees the remote frees' links and canaries.
			 * release: keeps our earlier read of pg->notify_next
			 * before this exchange; once the NOTIFIED bit is clear a
			 * remote free may queue pg again and rewrite that link.
			 * (A list on the word means FULL is clear: the remote
			 * free that pushed on it cleared it.) */
			if (atomic_compare_exchange_weak_explicit(&pg->xfree, &x, 0,
								  memory_order_acq_rel,
								  memory_order_relaxed)) {
				if (pg->free && XFREE_COUNT(x) >= pg->used)
					/* every object is free: the page is
					 * retired below, its lists are dropped,
					 * no need to join them */
					page_used_set(pg, 0);
				else
					page_take_chain(pg, x);
				break;
			}
		} else if (atomic_compare_exchange_weak_explicit(&pg->xfree, &x,
								 x & ~XFREE_NOTIFIED,
								 memory_order_release,
								 memory_order_relaxed)) {
			/* release: as above, for the link; nothing of the list
			 * is read, and FULL stays as it is. */
			break;
		}
	}
	if (pg != hc->page)
		rqs_free_local_slow(h, hc, pg);
}

/* The current page pg has no free object and nothing to carve: mark it
 * full before it leaves the lists, so that the next remote free queues it
 * on the notify list. False (and the page is usable again) if remote frees
 * arrived meanwhile: they are taken instead. */
static ALLOC_FN bool page_mark_full(struct page *pg)
{
	uintptr_t x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);

	while (!(x & XFREE_PTR_MASK)) {
		/* relaxed: the flag only asks the next remote free for a
		 * notice; it publishes nothing. A failed CAS (a push) makes us
		 * look again. */
		if (atomic_compare_exchange_weak_explicit(&pg->xfree, &x, x | XFREE_FULL,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	}
	return !page_collect(pg);
}

static ALLOC_FN void page_list_push(_Atomic(struct page *) *head, struct page *first,
				    struct page *last)
{
	struct page *old = atomic_load_explicit(head, memory_order_relaxed);

	do {
		atomic_store_explicit(&last->notify_next, old, memory_order_relaxed);
		/* release: the links are visible to the acquire exchange. */
	} while (!atomic_compare_exchange_weak_explicit(head, &old, first, memory_order_release,
							memory_order_relaxed));
}

ALLOC_FN void rqs_heap_process_notify(struct heap *h, unsigned held_cls)
{
	/* acquire: pairs with the release CAS in notify_push (links). */
	struct page *list = atomic_exchange_explicit(&h->notify, NULL, memory_order_acquire);
	struct page *keep = NULL, *keep_tail = NULL;

	while (list) {
		struct page *pg = list;
		unsigned c = pg->cls;
		struct hclass *hc = &h->cls[c];
		bool mine = c == held_cls;

		list = atomic_load_explicit(&pg->notify_next, memory_order_relaxed);
		if (!mine && busy_get(&hc->busy)) {
			/* The interrupted code is using this class: queue the
			 * page again (its NOTIFIED bit stays set, so nobody
			 * else touches its link). */
			atomic_store_explicit(&pg->notify_next, keep, memory_order_relaxed);
			if (!keep)
				keep_tail = pg;
			keep = pg;
			continue;
		}
		if (!mine)
			busy_set(&hc->busy);
		page_absorb_remote(h, hc, pg);
		if (!mine)
			busy_clear(&hc->busy);
	}
	if (keep)
		page_list_push(&h->notify, keep, keep_tail);
}

/* Free b into its page of heap h (already checked and marked free). */
static ALLOC_FN void free_into_page(struct heap *h, struct hclass *hc, struct page *pg,
				    struct block *b)
{
	struct block *old = pg->free;

	b->next = old;
	page_free_set(pg, b);
	page_used_set(pg, pg->used - 1);
	if (pg != hc->page && (!old || page_all_back(pg)))
		rqs_free_local_slow(h, hc, pg);
}

ALLOC_FN void rqs_heap_drain_deferred(struct heap *h, unsigned held_cls)
{
	/* acquire: pairs with the release CAS in free_deferred. */
	struct block *list = atomic_exchange_explicit(&h->deferred, NULL, memory_order_acquire);
	struct block *keep = NULL, *keep_tail = NULL;

	while (list) {
		struct block *b = list;
		struct page *pg = page_of((uintptr_t)b);
		unsigned c = pg->cls;
		struct hclass *hc = &h->cls[c];
		bool mine = c == held_cls;

		list = b->next;
		if (!mine && busy_get(&hc->busy)) {
			b->next = keep;
			if (!keep)
				keep_tail = b;
			keep = b;
			continue;
		}
		if (!mine)
			busy_set(&hc->busy);
		free_into_page(h, hc, pg, b);
		if (!mine)
			busy_clear(&hc->busy);
	}
	if (keep) {
		struct block *old = atomic_load_explicit(&h->deferred, memory_order_relaxed);

		do {
			keep_tail->next = old;
			/* release: as in free_deferred. */
		} while (!atomic_compare_exchange_weak_explicit(&h->deferred, &old, keep,
								memory_order_release,
								memory_order_relaxed));
	}
}

/* A page for class c: the heap's cache of empty pages, else the pool. */
static ALLOC_FN struct page *heap_page_get(struct heap *h, unsigned c)
{
	struct page *pg = NULL;

	if (!busy_get(&h->hbusy)) {
		busy_set(&h->hbusy);
		ALLOC_TEST_HOOK(HOOK_CACHE, c);
		if (h->ncache) {
			pg = h->cache[h->ncache - 1];
			__atomic_store_n(&h->ncache, h->ncache - 1, __ATOMIC_RELAXED);
		}
		busy_clear(&h->hbusy);
	}
	if (!pg)
		pg = rqs_pool_get();
	if (pg)
		rqs_page_init(pg, h, c);
	return pg;
}

ALLOC_FN struct block *rqs_class_alloc_slow(struct heap *h, struct hclass *hc, unsigned c)
{
	struct page *pg = hc->page;
	struct block *b;

	ALLOC_TEST_HOOK(HOOK_SLOW, c);
	if (atomic_load_explicit(&h->deferred, memory_order_relaxed))
		rqs_heap_drain_deferred(h, c);
	if (!pg->free && pg != &rqs_alloc_empty_page && !page_collect(pg) && pg->bump < pg->capacity)
		page_carve(pg);
	if (!pg->free && atomic_load_explicit(&h->notify, memory_order_relaxed))
		rqs_heap_process_notify(h, c);
	if (!pg->free && (pg == &rqs_alloc_empty_page || page_mark_full(pg))) {
		/* pg is full: it leaves the lists until a free into it (local,
		 * or remote through the notify list) makes it partial again. */
		pg = hc->partial;
		if (pg) {
			partial_unlink(hc, pg);
		} else {
			pg = heap_page_get(h, c);
			if (!pg)
				return NULL;
			page_carve(pg);
		}
		hc->page = pg;
	}
	b = pg->free;
#if RQSPIN_ALLOC_DEBUG
	if (c != 0 && b->canary != block_canary(b))
		rqs_alloc_corrupt("free object was modified (use after free?)", b);
	if (c == 0)
		tiny_mark_used(b);
#endif
	page_free_set(pg, b->next);
	page_used_set(pg, pg->used + 1);
	return b;
}

ALLOC_FN void rqs_page_retire(struct heap *h, struct page *pg)
{
	page_free_set(pg, NULL);
	page_used_set(pg, 0);
	pg->in_partial = 0;
	pg->next = pg->prev = NULL;
	__atomic_store_n(&pg->heap, OWNER_POOL, __ATOMIC_RELAXED); /* read by the statistics */
	atomic_fetch_sub_explicit(&rqs_alloc_gstats.pages_active, 1, memory_order_relaxed);
	/* The cache's count is read only once its flag is ours: a handler
	 * that ran between a check of the count and the flag could fill the
	 * cache under us. */
	if (heap_is_real(h) && !busy_get(&h->hbusy)) {
		busy_set(&h->hbusy);
		ALLOC_TEST_HOOK(HOOK_CACHE, pg->cls);
		if (h->ncache < HEAP_CACHE) {
			h->cache[h->ncache] = pg;
			__atomic_store_n(&h->ncache, h->ncache + 1, __ATOMIC_RELAXED);
			busy_clear(&h->hbusy);
			return;
		}
		busy_clear(&h->hbusy);
	}
	rqs_pool_put(pg);
}

/* Retire the partial pages of hc whose objects are all free, the last
 * ones freed by other threads after a free of ours (nothing queued such a
 * page: its remote frees wait on it, free_remote). Busy is held. */
static ALLOC_FN void partial_retire_empty(struct heap *h, struct hclass *hc)
{
	struct page *pg, *next;

	for (pg = hc->partial; pg; pg = next) {
		uintptr_t x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);

		next = pg->next;
		/* A queued page (NOTIFIED) is left to its notice. */
		if (!(x & XFREE_PTR_MASK) || (x & XFREE_NOTIFIED) || XFREE_COUNT(x) < pg->used)
			continue;
		/* acquire: the remote frees' writes to the objects come before
		 * whatever the page's next owner writes there. All objects are
		 * free, so no push can race with us: the CAS cannot fail but
		 * for a spurious reason, and then the page waits. */
		if (!atomic_compare_exchange_strong_explicit(&pg->xfree, &x, 0, memory_order_acquire,
							     memory_order_relaxed))
			continue;
		page_used_set(pg, 0);
		partial_unlink(hc, pg);
		rqs_page_retire(h, pg);
	}
}

ALLOC_FN size_t rqs_heap_collect_all(struct heap *h, bool release_current)
{
	size_t before = atomic_load_explicit(&rqs_alloc_gstats.madvise_calls, memory_order_relaxed);
	unsigned c;

	rqs_heap_drain_deferred(h, NO_CLASS);
	rqs_heap_process_notify(h, NO_CLASS);
	for (c = 0; c < NCLASSES; c++) {
		struct hclass *hc = &h->cls[c];
		struct page *pg;

		if (busy_get(&hc->busy))
			continue;
		/* The current page is read under the flag: a handler that ran
		 * before we set it may have released that page already. */
		busy_set(&hc->busy);
		partial_retire_empty(h, hc);
		pg = hc->page;
		if (pg != &rqs_alloc_empty_page) {
			page_collect(pg);
			if (release_current && pg->used == 0 &&
			    atomic_load_explicit(&pg->xfree, memory_order_relaxed) == 0) {
				hc->page = &rqs_alloc_empty_page;
				rqs_page_retire(h, pg);
			}
		}
		busy_clear(&hc->busy);
	}
	rqs_heap_flush_cache(h);
	/* A heap collected whole (its thread exited, or a reaper or a trim
	 * took it) retires no more pages soon: what it gave the pool beyond
	 * the pages kept for good goes back now, not after the decay. */
	rqs_pool_shrink();
	return (atomic_load_explicit(&rqs_alloc_gstats.madvise_calls, memory_order_relaxed) - before) *
	       PAGE_SIZE;
}
