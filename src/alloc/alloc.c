/* SPDX-License-Identifier: MIT */
/*
 * Any-context allocator: rqspin_malloc_nolock / rqspin_free_nolock.
 *
 * Design
 * ======
 * Layout. Small objects (8 B .. 16 KiB, 37 size classes: 8, 16..128 by 16,
 * then four classes per doubling) live in 64 KiB *pages*, one size class per
 * page, objects packed from the page start (so power-of-two classes are
 * naturally aligned). Pages are grouped in 4 MiB *segments* aligned to
 * 4 MiB; page 0 of a segment holds the segment header with the 64 page
 * descriptors. From any object address, `addr & ~(4 MiB-1)` is its segment
 * and bits 16..21 its page: free needs no lookup table. A one-bit-per-4-MiB
 * segment map (8 MiB of reserved, lazily touched address space for 48-bit
 * addresses) says whether an address is in one of our segments, so a
 * foreign pointer is recognised without reading its memory. Segments are
 * never unmapped (so any page descriptor stays readable for lock-free
 * readers); empty pages give their memory back with madvise(MADV_DONTNEED).
 * Larger objects get their own mapping with a 64-byte header in front
 * (large.c).
 *
 * Heaps. Each thread owns a heap (heap.c): per size class a current page, a
 * list of partly free pages, counters and a *busy* flag. Allocation pops
 * the current page's free list; a local free pushes onto its page's free
 * list. Neither uses an atomic read-modify-write: the busy flag, set with a
 * plain store and a signal fence around the class's critical section, is
 * enough against the only other party that can touch the class -- a signal
 * handler of the same thread, which runs to completion inside our section.
 *
 * Nesting (a handler calls us while the interrupted code is inside us). The
 * handler finds the class busy:
 *   - alloc takes the next size class that keeps the alignment (its own
 *     busy flag; for a power-of-two class the next power of two) if that
 *     is free, else the shared *reserve* (reserve.c): per class a lock-free stack of
 *     objects whose head packs a 32-bit object index and a 32-bit ABA tag
 *     in one 64-bit word; it grows from the page pool, so it fails only
 *     when memory is exhausted (the kernel's kmalloc_nolock "retry in the
 *     next bucket", then a pool instead of -EBUSY);
 *   - free pushes the object on the heap's atomic *deferred* list (a
 *     lock-free push; the owner takes the whole list with one exchange on
 *     its next free, its next allocation that refills, a trim or its
 *     exit, and completes the frees whose class is not busy then). Free
 *     never fails.
 *   Anything shared by all classes of a heap (its cache of empty pages) has
 *   its own busy flag; a nested call that finds it busy uses the shared
 *   pool instead.
 *
 * Other threads. A free of an object owned by another heap pushes it on
 * the owning page's atomic remote list (lock-free push; the owner takes
 * all with an exchange). The list word also counts its objects in its top
 * 16 bits (objects live below 2^48), so taking a list costs no walk over
 * it. The owner takes the list when the page's own free list runs dry
 * (the list becomes the free list, no walk). Only a page that the owner
 * must hear about is queued on the owning heap's atomic notify list: one
 * that the owner left full (it set a FULL bit in the word when the page
 * left its lists), or one that this free may have emptied (the pending
 * count reaches the page's used count, read as a hint). The push that
 * queues it sets a NOTIFIED bit in the same word, so nobody queues it
 * twice; a page whose NOTIFIED bit is set is never recycled, so the late
 * queueing is safe. Dequeued, a full page takes its list and becomes
 * partial, an empty one is retired, any other just clears NOTIFIED. The
 * owner's free into a page other than its current one compares the
 * page's used count with the list's count, so the free that brings back
 * the last objects of a page whose others came remotely retires it.
 *
 * Thread exit. A pthread key destructor (key created by a constructor)
 * collects what can be collected, returns empty pages and marks the heap
 * abandoned. A new thread adopts an abandoned heap with a CAS before it
 * creates a new one. A remote free that queues a page of an abandoned heap
 * reaps that heap (claims it with a CAS, collects, returns the empty
 * pages, abandons it again), so the memory of exited threads goes back as
 * their objects come back; so does a thread that needs memory while
 * abandoned heaps have pending remote frees, and rqspin_alloc_trim().
 * After its destructor ran, a thread borrows an abandoned heap per call.
 * The key is used only where pthread_setspecific allocates nothing (glibc:
 * keys below 32), since a handler may make a thread's first call; without
 * it, a heap whose holder's thread id is gone is taken over instead
 * (heap.c).
 *
 * Empty pages. A page that becomes empty (and is not its class's current
 * page) goes to the heap's cache of 4 pages, then to the shared pool
 * (pool.c: two lock-free stacks of page ids with 40-bit ABA tags, "dirty"
 * = still resident and "clean" = given back). The dirty stack keeps 64
 * pages (4 MiB) for good and up to 256 (16 MiB) while pages keep being
 * retired; the pages beyond 64 are madvised after a second above it, or
 * at once when a thread exits or on a trim.
 * The current page is never released on a free, and pages are recycled
 * from the caches first, so an alloc/free loop at a page boundary does no
 * system calls.
 *
 * Bad pointers. Object starts are checked against the page geometry (a
 * multiply by the reciprocal of the object size), free objects of 16 bytes
 * or more carry an address-keyed canary in their second word (a second
 * free finds it), and a page that is free or a segment header is no valid
 * target. Debug builds abort with a message; release builds ignore the
 * call and count it (report.c). Debug builds also check the canary when
 * they reuse an object, which catches writes after free.
 *
 * Sanitizers: free objects are ASan-poisoned and announced to Valgrind
 * (sanitize.h). errno: only the system-call wrappers can change it, and
 * they restore it.
 *
 * Memory orders are explained where they are used; the fast paths below
 * use none beyond relaxed loads and stores and signal fences.
 */
#include <string.h>

#include "alloc/alloc_internal.h"

const uint32_t rqs_alloc_class_size[NCLASSES] = {
	8,     16,    32,    48,    64,    80,    96,    112,   128,  160,
	192,   224,   256,   320,   384,   448,   512,   640,   768,  896,
	1024,  1280,  1536,  1792,  2048,  2560,  3072,  3584,  4096, 5120,
	6144,  7168,  8192,  10240, 12288, 14336, 16384,
};

const uint8_t rqs_alloc_class_of8[CLASS_TAB_MAX / 8 + 1] = {
	0,  0,  1,  2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,
	8,  9,  9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12,
	12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14,
	14, 15, 15, 15, 15, 15, 15, 15, 15, 16, 16, 16, 16, 16, 16, 16,
	16, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17,
	17, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18,
	18, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19,
	19, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
	20,
};

#ifdef ALLOC_VALGRIND
/* The largest request that the fast entry serves: SMALL_MAX once the
 * load-time constructor (alloc_init) has seen that Valgrind does not run,
 * 0 before and under Valgrind, so the fast entry needs no load of the
 * Valgrind flag. Written before main, read only after (like
 * rqspin__valgrind): a plain variable. */
size_t rqs_alloc_fast_max;
#endif

/* Local frees take the general path when a sanitizer watches: under
 * Valgrind rqs_alloc_fast_max is 0 (also before the constructor, when the
 * general path is merely slower), a hidden variable, so the test needs no
 * load of the exported flag's address. */
#if defined(ALLOC_ASAN)
#define SAN_FREE_GENERAL 1
#elif defined(ALLOC_VALGRIND)
#define SAN_FREE_GENERAL (rqs_alloc_fast_max == 0)
#else
#define SAN_FREE_GENERAL 0
#endif

void rqs_alloc_init_fast(void)
{
#if RQSPIN_ALLOC_DEBUG
	for (size_t s = 0; s <= CLASS_TAB_MAX; s++)
		if (size_to_class(s) != size_to_class_calc(s))
			rqs_alloc_corrupt("size class table", (void *)s);
#endif
#ifdef ALLOC_VALGRIND
	rqs_alloc_fast_max = rqspin__valgrind ? 0 : SMALL_MAX;
#endif
}

struct page rqs_alloc_empty_page;

/* Hand object b of size bs to the user: the general case (flags, or a
 * sanitizer is watching). */
static ALLOC_FN __attribute__((noinline)) void *finish_slow(struct block *b, uint32_t bs,
							     unsigned flags)
{
	size_t n = san_slot_usable(bs);

	san_alloc(b, n, bs, (flags & RQSPIN_ALLOC_ZERO) != 0);
	/* Clear the canary so that one free of this object is not taken for
	 * a second one (after san_alloc: memcheck then sees it as written). */
	if (bs >= 16)
		b->canary = 0;
	if (flags & RQSPIN_ALLOC_ZERO)
		memset(b, 0, n);
	return b;
}

#ifdef ALLOC_VALGRIND
/* Under Valgrind: the request grown by the memcheck redzone (sanitize.h),
 * at least 16 usable bytes (the canary is cleared after the object is
 * announced), keeping a power-of-two class's alignment: such a request is
 * grown to the next power of two (all of them up to 16 KiB are classes).
 * Larger than SMALL_MAX: the caller maps it as a large object instead. */
static ALLOC_FN __attribute__((noinline)) size_t redzoned(size_t size)
{
	size_t bs = rqs_alloc_class_size[size_to_class(size)];
	size_t need = (size > 16 ? size : 16) + SAN_REDZONE;
	size_t p2 = 16;

	if (bs & (bs - 1))
		return need;
	while (p2 < need)
		p2 <<= 1;
	return p2;
}
#endif

static inline ALLOC_FN void *finish(struct block *b, uint32_t bs, unsigned flags)
{
	if (RQS_UNLIKELY(flags != 0 || SAN_ACTIVE))
		return finish_slow(b, bs, flags);
	if (bs >= 16)
		b->canary = 0;
	return b;
}

static inline ALLOC_FN void check_reused(const struct block *b, unsigned c)
{
#if RQSPIN_ALLOC_DEBUG
	if (c != 0 && b->canary != block_canary(b))
		rqs_alloc_corrupt("free object was modified (use after free?)", b);
	if (c == 0)
		tiny_mark_used(b);
#else
	(void)b;
	(void)c;
#endif
}

/* One allocation from class c; its busy flag is held and released here. */
static ALLOC_FN struct block *class_alloc_held(struct heap *h, struct hclass *hc, unsigned c)
{
	struct page *pg = hc->page;
	struct block *b = pg->free;

	if (RQS_LIKELY(b != NULL)) {
		check_reused(b, c);
		page_free_set(pg, b->next);
		page_used_set(pg, pg->used + 1);
	} else {
		b = rqs_class_alloc_slow(h, hc, c);
	}
	busy_clear(&hc->busy);
	return b;
}

/* One allocation from class c of heap h, whose busy flag is clear. */
static ALLOC_FN struct block *class_alloc(struct heap *h, unsigned c)
{
	struct hclass *hc = &h->cls[c];

	busy_set(&hc->busy);
	return class_alloc_held(h, hc, c);
}

/* The current page has no free object (busy is held). */
static ALLOC_FN __attribute__((noinline)) void *alloc_refill(struct heap *h, struct hclass *hc,
							      unsigned c, unsigned flags)
{
	struct block *b = class_alloc_held(h, hc, c);

	return b ? finish(b, rqs_alloc_class_size[c], flags) : NULL;
}

/* The class that stands in for class c when c is busy: the next one up
 * whose objects keep c's documented alignment (the class size for a
 * power of two, else 16 bytes), so for a power-of-two class the next power
 * of two. NCLASSES if there is none (the reserve serves). */
static unsigned nested_class(unsigned c)
{
	uint32_t s = rqs_alloc_class_size[c];
	uint32_t align = (s & (s - 1)) == 0 ? s : 16;
	unsigned n;

	for (n = c + 1; n < NCLASSES; n++)
		if (rqs_alloc_class_size[n] % align == 0)
			break;
	return n;
}

/* A signal handler interrupted this thread inside class c. */
static ALLOC_FN __attribute__((noinline)) void *alloc_nested(struct heap *h, unsigned c,
							      unsigned flags)
{
	unsigned n = nested_class(c);
	struct block *b;

	count_shared(&h->nnested, 1);
	if (n < NCLASSES && !busy_get(&h->cls[n].busy)) {
		b = class_alloc(h, n);
		if (b) {
			count_shared(&h->nnext, 1);
			return finish(b, rqs_alloc_class_size[n], flags);
		}
	}
	b = rqs_reserve_alloc(c);
	return b ? finish(b, rqs_alloc_class_size[c], flags) : NULL;
}

static inline ALLOC_FN __attribute__((always_inline)) void *malloc_small(size_t size,
								     unsigned flags, bool san);

/* No usable heap yet (first call of the thread) or any more (exited). */
static ALLOC_FN __attribute__((noinline)) void *alloc_noheap(size_t size, unsigned c,
							      unsigned flags)
{
	struct heap *h = rqs_alloc_tls_heap;
	struct block *b = NULL;
	bool adopted;

	/* size is already grown by the redzone, if any. */
	if (h == NULL && heap_is_real(rqs_heap_attach()))
		return malloc_small(size, flags, SAN_ACTIVE);
	/* After this thread's exit destructor (or with no heap to be had):
	 * borrow an abandoned heap for this one call. */
	h = rqs_heap_claim(&adopted);
	if (h) {
		b = class_alloc(h, c);
		rqs_heap_release(h);
	}
	if (!b)
		b = rqs_reserve_alloc(c);
	return b ? finish(b, rqs_alloc_class_size[c], flags) : NULL;
}

/* A request of at most SMALL_MAX bytes. san: SAN_ACTIVE, or a value the
 * caller knows it has (the fast entry: no load of the Valgrind flag). */
static inline ALLOC_FN __attribute__((always_inline)) void *malloc_small(size_t size,
								     unsigned flags, bool san)
{
	struct heap *h = rqs_alloc_tls_heap;
	struct hclass *hc;
	struct page *pg;
	struct block *b, *next;
	unsigned c;

	c = size_to_class(size);
	if (RQS_UNLIKELY(!heap_is_real(h)))
		return alloc_noheap(size, c, flags);
	hc = &h->cls[c];
	if (RQS_UNLIKELY(busy_get(&hc->busy)))
		return alloc_nested(h, c, flags);
	busy_set(&hc->busy);
	ALLOC_TEST_HOOK(HOOK_ALLOC, c);
	pg = hc->page;
	b = pg->free;
	if (RQS_UNLIKELY(b == NULL))
		return alloc_refill(h, hc, c, flags);
	check_reused(b, c);
	next = b->next;
	page_free_set(pg, next);
	/* The next allocation of this class reads that object's link: with
	 * many classes in use or a large working set it is no longer in the
	 * cache by then (the load missed in most churn-like allocations). A
	 * prefetch never faults, NULL included. Not for objects of 4 KiB and
	 * more: the next one is on another 4 KiB page, often one never
	 * touched, and the prefetch there made the 4 KiB malloc+free pair
	 * 1.7x slower (9.0 against 5.2 ns, medians of seven processes). The
	 * bound folds to a constant. */
	if (c < size_to_class_calc(4096))
		__builtin_prefetch(next, 0, 3);
	page_used_set(pg, pg->used + 1);
	busy_clear(&hc->busy);
	if (RQS_UNLIKELY(flags != 0 || san))
		return finish_slow(b, rqs_alloc_class_size[c], flags);
	if (c != 0)
		b->canary = 0;
	return b;
}

#ifdef ALLOC_VALGRIND
/* Under Valgrind: a slot with a redzone, announced with the exact size
 * (rqs_san_exact), so memcheck reports any byte past the request. */
static ALLOC_FN __attribute__((noinline)) void *malloc_redzoned(size_t size, unsigned flags)
{
	size_t grown = redzoned(size);
	void *b;

	if (grown > SMALL_MAX)
		return rqs_large_alloc(size, flags);
	b = malloc_small(grown, flags, true);
	if (b)
		rqs_san_exact(b, size, page_of((uintptr_t)b)->bsize);
	return b;
}
#endif

#ifdef ALLOC_VALGRIND
/* Larger than rqs_alloc_fast_max: a large object, Valgrind, or a call before
 * the load-time constructor. */
static ALLOC_FN __attribute__((noinline)) void *malloc_entry_slow(size_t size, unsigned flags)
{
	if (size > SMALL_MAX)
		return rqs_large_alloc(size, flags);
	if (rqspin__valgrind != 0)
		return malloc_redzoned(size, flags);
	/* A zero-size request comes here too: under ASan it must still be
	 * announced (unpoisoned) like any other object. */
#ifdef ALLOC_ASAN
	return malloc_small(size, flags, true);
#else
	return malloc_small(size, flags, false);
#endif
}
#endif

RQSPIN_API ALLOC_FN void *rqspin_malloc_nolock(size_t size, unsigned flags)
{
#ifdef ALLOC_VALGRIND
	/* size - 1: a zero-size request takes the slow path too, where under
	 * Valgrind it gets a described, redzoned object (with
	 * rqs_alloc_fast_max 0, "size > 0" would let it through). */
	if (RQS_UNLIKELY(size - 1 >= rqs_alloc_fast_max))
		return malloc_entry_slow(size, flags);
#else
	if (RQS_UNLIKELY(size > SMALL_MAX))
		return rqs_large_alloc(size, flags);
#endif
	/* Valgrind is not running (checked above): only ASan watches. */
#ifdef ALLOC_ASAN
	return malloc_small(size, flags, true);
#else
	return malloc_small(size, flags, false);
#endif
}

/* Is b a live object of pg? Reports and returns false if not. */
static inline ALLOC_FN bool free_check(const struct page *pg, const struct block *b)
{
	if (RQS_UNLIKELY(page_block_index(pg, (uintptr_t)b) == UINT32_MAX)) {
		rqs_alloc_bad_pointer("free of a pointer that is not the start of an object", b);
		return false;
	}
	san_free_peek(b);
	if (RQS_UNLIKELY(pg->bsize >= 16 && b->canary == block_canary(b))) {
		rqs_alloc_bad_pointer("double free", b);
		return false;
	}
	/* Debug builds: the 8-byte class's free bit (set here, for good,
	 * unless this is a double free). */
	if (RQSPIN_ALLOC_DEBUG && pg->bsize < 16 && !tiny_mark_free(b)) {
		rqs_alloc_bad_pointer("double free", b);
		return false;
	}
	return true;
}

/* Mark b free: sanitizers and canary. Its link is written by the caller
 * before it is published anywhere. */
static inline ALLOC_FN void free_mark(struct block *b, uint32_t bs)
{
	san_free(b, bs, bs < 16 ? bs : 16);
	if (bs >= 16)
		b->canary = block_canary(b);
}

/* A handler freed into a class that the interrupted code is using. */
static ALLOC_FN __attribute__((noinline)) void free_deferred(struct heap *h, struct page *pg,
							      struct block *b)
{
	struct block *head;

	if (!free_check(pg, b))
		return;
	free_mark(b, pg->bsize);
	head = atomic_load_explicit(&h->deferred, memory_order_relaxed);
	do {
		b->next = head;
		/* release: the link, the canary and the poisoning are visible
		 * to whoever takes the list (acquire exchange in the drain). */
	} while (!atomic_compare_exchange_weak_explicit(&h->deferred, &head, b,
							memory_order_release,
							memory_order_relaxed));
	count_shared(&h->ndeferred, 1);
}

/* Queue pg on its owner's notify list (we set its NOTIFIED bit, so nobody
 * else queues it until the owner has taken it off and cleared the bit). */
static ALLOC_FN void notify_push(struct heap *owner, struct page *pg)
{
	struct page *head = atomic_load_explicit(&owner->notify, memory_order_relaxed);

	do {
		atomic_store_explicit(&pg->notify_next, head, memory_order_relaxed);
		/* release: the link is visible to the owner's acquire exchange. */
	} while (!atomic_compare_exchange_weak_explicit(&owner->notify, &head, pg,
							memory_order_release,
							memory_order_relaxed));
}

/* b belongs to a page that is not ours (or we have no heap). */
static ALLOC_FN __attribute__((noinline)) void free_remote(struct heap *me, struct page *pg,
							    struct block *b)
{
	struct heap *owner = pg->heap;
	unsigned c = pg->cls;
	uintptr_t x, n;
	bool queue;

	if (owner == OWNER_RESERVE) {
		rqs_reserve_free(pg, b);
		return;
	}
	if (RQS_UNLIKELY(!heap_is_real(owner))) {
		rqs_alloc_bad_pointer("free of a pointer into a free page (double free?)", b);
		return;
	}
	if (!free_check(pg, b))
		return;
	x = atomic_load_explicit(&pg->xfree, memory_order_relaxed);
	/* An 8-byte object has no room for a canary: a second free is
	 * recognised when the object is the last one freed into its page,
	 * here or by the owner (the head of the remote list, or of the
	 * owner's list). Pushed again, it would link to itself. Relaxed: a
	 * legitimate free of b comes after b's allocation, which came after
	 * any store that put b at either head (the owner took it off its
	 * list, or took the remote list, first), so neither load can show b
	 * then; a stale head only misses a double free. */
	if (pg->bsize < 16 && ((x & XFREE_PTR_MASK) == (uintptr_t)b ||
			       __atomic_load_n(&pg->free, __ATOMIC_RELAXED) == b)) {
		rqs_alloc_bad_pointer("double free", b);
		return;
	}
	free_mark(b, pg->bsize);
	ALLOC_TEST_HOOK(HOOK_REMOTE, c);
	do {
		/* b pushed by another thread meanwhile: a concurrent double
		 * free (not always caught), but never a self-loop. */
		if (RQS_UNLIKELY((x & XFREE_PTR_MASK) == (uintptr_t)b)) {
			rqs_alloc_bad_pointer("double free", b);
			return;
		}
		n = (x >> XFREE_CNT_SHIFT) + 1;
		/*
		 * Queue the page on the owner's notify list only when the owner
		 * needs to hear of it: it left the page full (FULL), or this
		 * free may be the page's last live object (used is read as a
		 * hint: a stale value costs a needless notice, or leaves an
		 * empty partial page to be found when the owner refills from
		 * it). Other remote frees just wait on the page: the owner
		 * takes them when its free list runs dry.
		 */
		queue = !(x & XFREE_NOTIFIED) &&
			((x & XFREE_FULL) || n >= __atomic_load_n(&pg->used, __ATOMIC_RELAXED));
		b->next = (struct block *)(x & XFREE_PTR_MASK);
		/* release: b's link and canary are visible to the owner, whose
		 * exchange/CAS on xfree acquires (every push is an RMW, so the
		 * owner synchronises with all pushers before it). FULL is
		 * cleared: the page has a free object now. */
	} while (!atomic_compare_exchange_weak_explicit(
		&pg->xfree, &x,
		(uintptr_t)b | (queue ? XFREE_NOTIFIED : (x & XFREE_NOTIFIED)) |
			(n << XFREE_CNT_SHIFT),
		memory_order_release, memory_order_relaxed));
	if (queue) {
		notify_push(owner, pg);
		/* The owner has exited: nobody would look at its notify list
		 * until a new thread adopts the heap, and the pages of the
		 * objects coming back would stay resident. Collect it now
		 * (once per page per batch of frees: only the free that
		 * queued the page). */
		if (RQS_UNLIKELY(atomic_load_explicit(&owner->state, memory_order_relaxed) ==
			     HEAP_ABANDONED))
			rqs_heap_reap_one(owner);
	}
	/* Count on our own heap (a thread that only frees gets one too), so
	 * the counter is not a cache line shared with other threads. */
	if (me == NULL)
		me = rqs_heap_attach();
	if (heap_is_real(me)) {
		struct hclass *mc = &me->cls[c];

		if (!busy_get(&mc->busy)) {
			busy_set(&mc->busy);
			count_owner(&mc->nremote, 1);
			busy_clear(&mc->busy);
		} else {
			count_shared(&mc->nremote_nested, 1);
		}
	} else {
		count_shared(&rqs_alloc_gstats.remote_noheap[c], 1);
	}
}

/* The rest of a local free after the object is on its page's list: the
 * page changed state, or deferred frees wait (busy is held). */
static ALLOC_FN __attribute__((noinline)) void free_local_tail(struct heap *h, struct hclass *hc,
								struct page *pg, struct block *old)
{
	/* A full page got a free object, or every object of a page is back. */
	if (pg != hc->page && (!old || page_all_back(pg)))
		rqs_free_local_slow(h, hc, pg);
	busy_clear(&hc->busy);
	if (atomic_load_explicit(&h->deferred, memory_order_relaxed) != NULL)
		rqs_heap_drain_deferred(h, NO_CLASS);
}

/* A local free with checks that failed, or sanitizers watching (busy is
 * held). */
static ALLOC_FN __attribute__((noinline)) void free_local_general(struct heap *h,
								   struct hclass *hc,
								   struct page *pg, struct block *b)
{
	struct block *old;

	if (!free_check(pg, b)) {
		busy_clear(&hc->busy);
		return;
	}
	/* The last object freed into the page, by us or (an 8-byte object,
	 * which has no canary) remotely: see free_remote. */
	if (pg->free == b ||
	    (pg->bsize < 16 && (atomic_load_explicit(&pg->xfree, memory_order_relaxed) &
				XFREE_PTR_MASK) == (uintptr_t)b)) {
		rqs_alloc_bad_pointer("double free", b);
		busy_clear(&hc->busy);
		return;
	}
	free_mark(b, pg->bsize);
	old = pg->free;
	b->next = old;
	page_free_set(pg, b);
	page_used_set(pg, pg->used - 1);
	free_local_tail(h, hc, pg, old);
}

/* Not in a segment: a large object, NULL or a bad pointer. */
static ALLOC_FN __attribute__((noinline)) void free_not_small(void *p)
{
	if (p)
		rqs_large_free(p);
}

RQSPIN_API ALLOC_FN void rqspin_free_nolock(void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct block *b = p, *old;
	struct heap *h;
	struct hclass *hc;
	struct page *pg;
	unsigned c;

	if (RQS_UNLIKELY(!seg_is_ours(a))) {
		free_not_small(p);
		return;
	}
	pg = page_of(a);
	/* One register for pg: left alone, the compiler rebuilds the
	 * address from the segment and the page index for several of the
	 * accesses below, which costs registers (and saves of them). */
	__asm__("" : "+r"(pg));
	h = rqs_alloc_tls_heap;
	if (RQS_UNLIKELY(pg->heap != h)) {
		free_remote(h, pg, b);
		return;
	}
	c = pg->cls;
	hc = &h->cls[c];
	if (RQS_UNLIKELY(busy_get(&hc->busy))) {
		free_deferred(h, pg, b);
		return;
	}
	busy_set(&hc->busy);
	ALLOC_TEST_HOOK(HOOK_FREE, c);
	old = pg->free;
	/* old == b: a second free right after the first. The 8-byte class
	 * has no room for a canary: the head of the page's remote list is
	 * the other object whose second free can be told (see free_remote);
	 * debug builds check its free bits on the general path. */
	if (RQS_UNLIKELY(page_block_index(pg, a) == UINT32_MAX || old == b || SAN_FREE_GENERAL ||
		     (c == 0 && (RQSPIN_ALLOC_DEBUG ||
				 (atomic_load_explicit(&pg->xfree, memory_order_relaxed) &
				  XFREE_PTR_MASK) == a))))
		goto general;
	if (c != 0) {
		uint64_t k = block_canary(b);

		if (RQS_UNLIKELY(b->canary == k))
			goto general;
		b->canary = k;
	}
	b->next = old;
	page_free_set(pg, b);
	page_used_set(pg, pg->used - 1);
	if (RQS_UNLIKELY((pg != hc->page && (!old || page_all_back(pg))) ||
		     atomic_load_explicit(&h->deferred, memory_order_relaxed) != NULL)) {
		free_local_tail(h, hc, pg, old);
		return;
	}
	busy_clear(&hc->busy);
	return;
general:
	free_local_general(h, hc, pg, b);
}

RQSPIN_API ALLOC_FN size_t rqspin_malloc_usable_size(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	const struct page *pg;
	const struct block *b = p;

	if (!p)
		return 0;
	if (!seg_is_ours(a))
		return rqs_large_usable_size(p);
	pg = page_of(a);
	if (!heap_is_real(pg->heap) && pg->heap != OWNER_RESERVE) {
		rqs_alloc_bad_pointer("usable_size of a pointer into a free page", p);
		return 0;
	}
	if (page_block_index(pg, a) == UINT32_MAX) {
		rqs_alloc_bad_pointer("usable_size of a pointer that is not the start of an object", p);
		return 0;
	}
	if ((pg->bsize >= 16 && b->canary == block_canary(b)) ||
	    (RQSPIN_ALLOC_DEBUG && pg->bsize < 16 && tiny_is_free(b))) {
		rqs_alloc_bad_pointer("usable_size of a freed object", p);
		return 0;
	}
	return san_usable(p, pg->bsize);
}
