/* SPDX-License-Identifier: MIT */
/*
 * The shared reserve: where a signal handler allocates when the
 * interrupted code is using both its size class and the next one (and
 * where a thread allocates that cannot get a heap at all).
 *
 * Per size class one lock-free stack of objects. An object is named by a
 * 25-bit id (reserve page number << 13 | index in the page), so the stack
 * head packs (32-bit tag << 32 | id + 1) into 64 bits and needs no 16-byte
 * CAS; the tag changes on every push and pop (ABA). A free object holds
 * the id + 1 of the next one in its first 4 bytes. A popper may read that
 * word after another thread popped the object and gave it to a user: the
 * value is garbage then, but the memory stays mapped (reserve pages are
 * never given back) and the changed tag fails the CAS.
 *
 * The reserve grows a page at a time from the pool, so it fails only when
 * memory is exhausted (or past 2^18 pages, 16 GiB, of reserve: the ids'
 * 31 bits). Its pages stay with it: their number is bounded by the peak
 * of nested demand. (A cap of 4096 pages, 256 MiB, let a handler that
 * kept 16 KiB objects get NULL with the machine's memory free.)
 */
#include "alloc/alloc_internal.h"

#define RES_MAX_PAGES (1u << 18)
#define RES_IDX_BITS 13u
#define RES_IDX_MASK ((1u << RES_IDX_BITS) - 1)
_Static_assert((uint64_t)RES_MAX_PAGES << RES_IDX_BITS < UINT32_MAX, "ids + 1 fit the stack head's 32 bits");
_Static_assert(PAGE_SIZE / 8 <= 1u << RES_IDX_BITS, "a page's objects fit the index bits");

static _Atomic(struct page *) rpages[RES_MAX_PAGES];
static _Atomic uint32_t rcount;
static _Atomic uint64_t rhead[NCLASSES];

static struct block *rblock(uint32_t id)
{
	/* acquire: pairs with the release store that published the page
	 * (which happened before any of its ids was pushed). */
	struct page *pg = atomic_load_explicit(&rpages[id >> RES_IDX_BITS], memory_order_acquire);

	return (struct block *)(page_start(pg) + (size_t)(id & RES_IDX_MASK) * pg->bsize);
}

static inline ALLOC_FN void link_set(struct block *b, uint32_t v)
{
	__atomic_store_n((uint32_t *)b, v, __ATOMIC_RELAXED);
}

/* The possibly stale read described above. Not a synchronising access:
 * ThreadSanitizer would report the (harmless) race with the user of an
 * object popped meanwhile. */
#ifdef RQS_TSAN
__attribute__((no_sanitize("thread")))
#endif
static ALLOC_FN __attribute__((noinline)) uint32_t
link_peek(const struct block *b)
{
	return *(const volatile uint32_t *)b;
}

static ALLOC_FN void push_chain(unsigned c, uint32_t first_id, struct block *last)
{
	uint64_t old = atomic_load_explicit(&rhead[c], memory_order_relaxed), next;

	do {
		link_set(last, (uint32_t)old);
		next = (((old >> 32) + 1) << 32) | (first_id + 1);
		/* release: the links, canaries and poisoning are visible to
		 * the popper's acquire. */
	} while (!atomic_compare_exchange_weak_explicit(&rhead[c], &old, next,
							memory_order_release,
							memory_order_relaxed));
}

static ALLOC_FN bool reserve_grow(unsigned c)
{
	struct page *pg = rqs_pool_get();
	uint32_t rno, i, bs, cap, base;

	if (!pg)
		return false;
	/* A CAS, not an add: failed adds past the cap would wrap the count
	 * (relaxed: the page is published by the release store below). */
	rno = atomic_load_explicit(&rcount, memory_order_relaxed);
	do {
		if (rno >= RES_MAX_PAGES) {
			rqs_pool_put(pg);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(&rcount, &rno, rno + 1, memory_order_relaxed,
							memory_order_relaxed));
	rqs_page_init(pg, OWNER_RESERVE, c);
	pg->rno = rno;
	bs = pg->bsize;
	cap = pg->capacity;
	__atomic_store_n(&pg->bump, cap, __ATOMIC_RELAXED);
	base = rno << RES_IDX_BITS;
	san_carve(page_start(pg), (size_t)cap * bs);
	for (i = 0; i < cap; i++) {
		struct block *b = (struct block *)(page_start(pg) + (size_t)i * bs);

		link_set(b, i + 1 < cap ? base + i + 2 : 0);
		if (bs >= 16)
			b->canary = block_canary(b);
#if RQSPIN_ALLOC_DEBUG
		else
			tiny_mark_free(b);
#endif
	}
	/* release: see rblock. */
	atomic_store_explicit(&rpages[rno], pg, memory_order_release);
	count_shared(&rqs_alloc_gstats.reserve_pages, 1);
	push_chain(c, base, (struct block *)(page_start(pg) + (size_t)(cap - 1) * bs));
	return true;
}

ALLOC_FN struct block *rqs_reserve_alloc(unsigned c)
{
	for (;;) {
		/* acquire (load and failed CAS): the object named by the head
		 * and its link were written before it was pushed. */
		uint64_t old = atomic_load_explicit(&rhead[c], memory_order_acquire);

		while ((uint32_t)old != 0) {
			struct block *b = rblock((uint32_t)old - 1);
			uint64_t next = (((old >> 32) + 1) << 32) | link_peek(b);

			if (atomic_compare_exchange_weak_explicit(&rhead[c], &old, next,
								  memory_order_acquire,
								  memory_order_acquire)) {
#if RQSPIN_ALLOC_DEBUG
				if (c != 0 && b->canary != block_canary(b))
					rqs_alloc_corrupt("free object was modified (use after free?)", b);
				if (c == 0)
					tiny_mark_used(b);
#endif
				count_shared(&rqs_alloc_gstats.reserve_allocs, 1);
				count_shared(&rqs_alloc_gstats.reserve_cls[c], 1);
				return b;
			}
		}
		if (!reserve_grow(c))
			return NULL;
	}
}

ALLOC_FN void rqs_reserve_free(struct page *pg, struct block *b)
{
	uint32_t idx = page_block_index(pg, (uintptr_t)b);
	uint32_t bs = pg->bsize;

	if (idx == UINT32_MAX) {
		rqs_alloc_bad_pointer("free of a pointer that is not the start of an object", b);
		return;
	}
	if ((bs >= 16 && b->canary == block_canary(b)) ||
	    (RQSPIN_ALLOC_DEBUG && bs < 16 && !tiny_mark_free(b))) {
		rqs_alloc_bad_pointer("double free", b);
		return;
	}
	san_free(b, bs, bs < 16 ? bs : 16);
	if (bs >= 16)
		b->canary = block_canary(b);
	count_shared(&rqs_alloc_gstats.reserve_frees, 1);
	count_shared(&rqs_alloc_gstats.reserve_cls_free[pg->cls], 1);
	push_chain(pg->cls, (pg->rno << RES_IDX_BITS) | idx, b);
}
