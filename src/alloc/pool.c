/* SPDX-License-Identifier: MIT */
/*
 * Segments and the shared pool of empty pages.
 *
 * A segment is 4 MiB, aligned to 4 MiB, mapped once and never unmapped:
 * page 0 holds the header (page descriptors), pages 1..63 hold objects.
 * Segments are numbered; page ids are segment * 64 + page, so a page fits
 * in 22 bits and a lock-free stack head packs (tag << 24 | id + 1) into 64
 * bits: the 40-bit tag changes on every push and pop, which defeats ABA
 * without a 16-byte CAS. A popper may read the link of a page that another
 * thread has popped meanwhile; the descriptor is never unmapped, and the
 * changed tag fails its CAS.
 *
 * Two stacks: "dirty" pages are still resident, "clean" ones have been
 * given back to the OS (madvise) or never touched. Pages are taken dirty
 * first. The dirty stack keeps POOL_DIRTY_KEEP pages for good and up to
 * POOL_DIRTY_MAX while the program keeps retiring pages: pages beyond
 * KEEP are given back once the stack has stayed above KEEP for
 * POOL_DECAY_NS (a few per retire, by whoever retires), at once when a
 * heap is collected (thread exit, reaping, rqspin_alloc_trim), and a page
 * that would make the stack exceed MAX is given back before it is pushed.
 */
#include <errno.h>
#include <sys/mman.h>
#include <time.h>

#include "alloc/alloc_internal.h"
#include "valgrind/vg.h"

/* 4 MiB of resident empty pages kept for good, shared. At 2 MiB, larson-like
 * loads (random sizes, random frees by other threads) gave a page back and
 * faulted it in again for most page switches: each madvise costs a TLB
 * shootdown. Up to 16 MiB while pages keep being retired: with a fixed 4
 * MiB the churn suite's four threads madvised about 200 pages per run and
 * faulted them in again (about 12% of its CPU time, page faults and TLB
 * shootdowns); with 16 MiB, 4 madvises. The decay is jemalloc's idea (its
 * dirty pages decay over 10 s); one second here. */
#define POOL_DIRTY_KEEP 64u
#define POOL_DIRTY_MAX 256u
#define POOL_DECAY_NS 1000000000ull
#define POOL_PURGE_BATCH 8u
#define ID_BITS 24u
#define ID_MASK ((1ull << ID_BITS) - 1)
#define REAP_PER_REFILL 4u

_Static_assert((uint64_t)MAX_SEGS * PAGES_PER_SEG < ID_MASK, "page ids must fit the stack head");

_Atomic uint64_t rqs_alloc_segmap[SEG_UNITS / 64];
static _Atomic(struct segment *) segtab[MAX_SEGS];
static _Atomic uint32_t seg_bump;
static _Atomic uint64_t pool_dirty_head, pool_clean_head;
/* CLOCK_MONOTONIC_COARSE time at which the dirty stack was first seen
 * above POOL_DIRTY_KEEP by a retire; 0 while it is not above. Relaxed
 * everywhere: it only decides when to give memory back. */
static _Atomic uint64_t pool_over_since;

void rqs_segmap_init(void)
{
	/* Changed with atomics only, like our mappings (os_map_flags). */
	vg_private(rqs_alloc_segmap, sizeof(rqs_alloc_segmap));
}

static struct page *page_by_id(uint32_t id)
{
	/* relaxed: the id came from a stack head that we read with acquire,
	 * and the segment was published before any of its pages was pushed. */
	struct segment *seg = atomic_load_explicit(&segtab[id / PAGES_PER_SEG], memory_order_relaxed);

	return &seg->pages[id % PAGES_PER_SEG];
}

static void stack_push(_Atomic uint64_t *head, struct page *first, struct page *last)
{
	uint64_t old = atomic_load_explicit(head, memory_order_relaxed), next;

	do {
		atomic_store_explicit(&last->pool_next, (uint32_t)(old & ID_MASK), memory_order_relaxed);
		next = (((old >> ID_BITS) + 1) << ID_BITS) | (first->id + 1);
		/* release: the pages' descriptors (reset by their last owner)
		 * and links are visible to the popper's acquire. */
	} while (!atomic_compare_exchange_weak_explicit(head, &old, next, memory_order_release,
							memory_order_relaxed));
}

static struct page *stack_pop(_Atomic uint64_t *head)
{
	/* acquire (load and failed CAS): the descriptor of the page named by
	 * the head, and its link, were written before it was pushed. */
	uint64_t old = atomic_load_explicit(head, memory_order_acquire), next;
	struct page *pg;

	do {
		uint32_t id1 = (uint32_t)(old & ID_MASK);

		if (!id1)
			return NULL;
		pg = page_by_id(id1 - 1);
		next = (((old >> ID_BITS) + 1) << ID_BITS) |
		       atomic_load_explicit(&pg->pool_next, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak_explicit(head, &old, next, memory_order_acquire,
							memory_order_acquire));
	return pg;
}

void rqs_pool_count_live(int64_t live[NCLASSES])
{
	uint32_t n = atomic_load_explicit(&seg_bump, memory_order_relaxed);
	uint32_t i, p;

	if (n > MAX_SEGS)
		n = MAX_SEGS;
	for (i = 0; i < n; i++) {
		/* acquire: pairs with the release store that published the
		 * segment's initialised header. */
		struct segment *seg = atomic_load_explicit(&segtab[i], memory_order_acquire);

		if (!seg)
			continue;
		for (p = 1; p < PAGES_PER_SEG; p++) {
			struct page *pg = &seg->pages[p];

			/* relaxed: a snapshot for monitoring; the owners change
			 * these fields with relaxed stores meanwhile. Remote
			 * frees not yet taken by the owner are not in use. */
			if (!heap_is_real(__atomic_load_n(&pg->heap, __ATOMIC_RELAXED)))
				continue;
			live[__atomic_load_n(&pg->cls, __ATOMIC_RELAXED)] +=
				(int64_t)__atomic_load_n(&pg->used, __ATOMIC_RELAXED) -
				(int64_t)XFREE_COUNT(atomic_load_explicit(&pg->xfree,
									  memory_order_relaxed));
		}
	}
}

/* Map a new segment; return its page 1 and push the others as clean. */
static struct page *segment_new(void)
{
	_Atomic uint64_t *map = rqs_alloc_segmap;
	uint32_t idx, i;
	uintptr_t raw, base, u;
	struct segment *seg;

	/* Twice the size, then trim to a 4 MiB-aligned 4 MiB. */
	raw = (uintptr_t)rqs_os_map(2 * SEG_SIZE);
	if (!raw)
		return NULL;
	base = (raw + SEG_MASK) & ~SEG_MASK;
	if (base > raw)
		rqs_os_unmap((void *)raw, base - raw);
	rqs_os_unmap((void *)(base + SEG_SIZE), raw + SEG_SIZE - base);
	u = base >> SEG_SHIFT;
	/* The index only for a mapping we keep: a failed attempt (no
	 * memory, or an address past the map) must not use one up, or a
	 * process that once ran out of memory could never map a segment
	 * again. Never past MAX_SEGS, so the count cannot wrap. relaxed:
	 * the index only has to be unique; the segment is published with
	 * segtab's release store below. */
	idx = atomic_load_explicit(&seg_bump, memory_order_relaxed);
	do {
		if (u >= SEG_UNITS || idx >= MAX_SEGS) {
			rqs_os_unmap((void *)base, SEG_SIZE);
			return NULL;
		}
	} while (!atomic_compare_exchange_weak_explicit(&seg_bump, &idx, idx + 1,
							memory_order_relaxed, memory_order_relaxed));
	seg = (struct segment *)base;
	seg->magic = SEG_MAGIC ^ base;
	seg->idx = idx;
	seg->pages[0].heap = OWNER_HEADER;
	for (i = 1; i < PAGES_PER_SEG; i++) {
		struct page *pg = &seg->pages[i];

		pg->id = idx * PAGES_PER_SEG + i;
		pg->heap = OWNER_POOL;
		atomic_store_explicit(&pg->clean, 1, memory_order_relaxed);
		if (i >= 2 && i + 1 < PAGES_PER_SEG)
			atomic_store_explicit(&pg->pool_next, pg->id + 2, memory_order_relaxed);
	}
	/* release: a thread that finds the page or the segment bit sees the
	 * initialised header. */
	atomic_store_explicit(&segtab[idx], seg, memory_order_release);
	atomic_fetch_or_explicit(&map[u / 64], 1ull << (u % 64), memory_order_release);
	count_shared(&rqs_alloc_gstats.segments, 1);
	count_shared(&rqs_alloc_gstats.pool_clean, PAGES_PER_SEG - 2);
	stack_push(&pool_clean_head, &seg->pages[2], &seg->pages[PAGES_PER_SEG - 1]);
	return &seg->pages[1];
}

struct page *rqs_pool_get(void)
{
	struct page *pg;
	int round;

	for (round = 0; round < 2; round++) {
		pg = stack_pop(&pool_dirty_head);
		if (pg) {
			/* Back at KEEP: a later excursion above it decays anew. */
			if (atomic_fetch_sub_explicit(&rqs_alloc_gstats.pool_dirty, 1,
						      memory_order_relaxed) <= POOL_DIRTY_KEEP + 1)
				atomic_store_explicit(&pool_over_since, 0, memory_order_relaxed);
			return pg;
		}
		pg = stack_pop(&pool_clean_head);
		if (pg) {
			atomic_fetch_sub_explicit(&rqs_alloc_gstats.pool_clean, 1, memory_order_relaxed);
			return pg;
		}
		/* Before mapping more: pages that other threads freed into
		 * heaps of exited threads, and the pages of a few heaps whose
		 * holder may have died without an exit notice. */
		if (round == 0 &&
		    rqs_heap_reap_abandoned(REAP_PER_REFILL) + rqs_heap_reap_dead(REAP_PER_REFILL) == 0 &&
		    !atomic_load_explicit(&pool_dirty_head, memory_order_relaxed) &&
		    !atomic_load_explicit(&pool_clean_head, memory_order_relaxed))
			break;
	}
	return segment_new();
}

static void page_decommit(struct page *pg)
{
	int e = errno;

	madvise(page_start(pg), PAGE_SIZE, MADV_DONTNEED);
	errno = e;
	count_shared(&rqs_alloc_gstats.madvise_calls, 1);
}

static void push_clean(struct page *pg)
{
	page_decommit(pg);
	atomic_store_explicit(&pg->clean, 1, memory_order_relaxed);
	count_shared(&rqs_alloc_gstats.pool_clean, 1);
	stack_push(&pool_clean_head, pg, pg);
}

/* Give back dirty pages while the stack holds more than keep, at most max
 * of them; returns the bytes given back. One page at a time: each is ours
 * while we madvise it. The count is a snapshot: with pushes and pops
 * racing, a few pages more or less go. */
static size_t pool_purge(uint64_t keep, uint64_t max)
{
	size_t n = 0;
	struct page *pg;

	while (max-- > 0 &&
	       atomic_load_explicit(&rqs_alloc_gstats.pool_dirty, memory_order_relaxed) > keep &&
	       (pg = stack_pop(&pool_dirty_head)) != NULL) {
		atomic_fetch_sub_explicit(&rqs_alloc_gstats.pool_dirty, 1, memory_order_relaxed);
		push_clean(pg);
		n += PAGE_SIZE;
	}
	return n;
}

/* The dirty stack is above KEEP: start its clock, or, once it has stayed
 * above for POOL_DECAY_NS, give back a batch. clock_gettime is
 * async-signal-safe (POSIX), and with the coarse clock a vDSO read. */
static void pool_decay(void)
{
	uint64_t since = atomic_load_explicit(&pool_over_since, memory_order_relaxed), now;
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return;
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1; /* never 0 */
	if (!since) {
		atomic_compare_exchange_strong_explicit(&pool_over_since, &since, now,
							memory_order_relaxed, memory_order_relaxed);
		return;
	}
	if (now - since < POOL_DECAY_NS)
		return;
	pool_purge(POOL_DIRTY_KEEP, POOL_PURGE_BATCH);
	if (atomic_load_explicit(&rqs_alloc_gstats.pool_dirty, memory_order_relaxed) <=
	    POOL_DIRTY_KEEP)
		atomic_store_explicit(&pool_over_since, 0, memory_order_relaxed);
}

void rqs_pool_put(struct page *pg)
{
	uint64_t dirty = atomic_load_explicit(&rqs_alloc_gstats.pool_dirty, memory_order_relaxed);

	if (dirty >= POOL_DIRTY_MAX) {
		push_clean(pg);
		return;
	}
	atomic_store_explicit(&pg->clean, 0, memory_order_relaxed);
	count_shared(&rqs_alloc_gstats.pool_dirty, 1);
	stack_push(&pool_dirty_head, pg, pg);
	if (dirty + 1 > POOL_DIRTY_KEEP)
		pool_decay();
}

size_t rqs_pool_shrink(void)
{
	size_t n = pool_purge(POOL_DIRTY_KEEP, POOL_DIRTY_MAX);

	if (atomic_load_explicit(&rqs_alloc_gstats.pool_dirty, memory_order_relaxed) <=
	    POOL_DIRTY_KEEP)
		atomic_store_explicit(&pool_over_since, 0, memory_order_relaxed);
	return n;
}

size_t rqs_pool_trim(void)
{
	size_t n = pool_purge(0, atomic_load_explicit(&rqs_alloc_gstats.pool_dirty,
						       memory_order_relaxed) + 16);

	atomic_store_explicit(&pool_over_since, 0, memory_order_relaxed);
	return n;
}

ALLOC_FN void rqs_page_init(struct page *pg, struct heap *owner, unsigned c)
{
	uint32_t bs = rqs_alloc_class_size[c];

	/* relaxed stores: the statistics read both while we run
	 * (rqs_pool_count_live). */
	__atomic_store_n(&pg->heap, owner, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->cls, (uint8_t)c, __ATOMIC_RELAXED);
	pg->bsize = bs;
	pg->recip = (uint32_t)(((1ull << 32) + bs - 1) / bs);
	pg->capacity = (uint32_t)(PAGE_SIZE / bs);
#if RQSPIN_ALLOC_DEBUG
	if (c == 0) {
		/* the free bits of the 8-byte class (alloc_internal.h) */
		pg->capacity = (uint32_t)((PAGE_SIZE - TINY_MAP_BYTES) / bs);
		/* Word stores, not memset: the words may be poisoned for
		 * AddressSanitizer (free objects of the page's last class),
		 * which intercepts memset even here. */
		_Atomic uint64_t *w = (_Atomic uint64_t *)(page_start(pg) + PAGE_SIZE -
							   TINY_MAP_BYTES);

		for (unsigned i = 0; i < TINY_MAP_BYTES / 8; i++)
			atomic_store_explicit(&w[i], 0, memory_order_relaxed);
	}
#endif
	__atomic_store_n(&pg->bump, 0, __ATOMIC_RELAXED);
	page_used_set(pg, 0);
	page_free_set(pg, NULL);
	pg->in_partial = 0;
	pg->next = pg->prev = NULL;
	atomic_fetch_add_explicit(&rqs_alloc_gstats.pages_active, 1, memory_order_relaxed);
}
