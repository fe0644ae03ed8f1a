/* SPDX-License-Identifier: MIT */
/*
 * Allocator internals shared by the files of src/alloc/. The design is
 * described at the top of alloc.c; this header holds the data structures
 * and the small inline helpers the fast paths need.
 */
#ifndef RQSPIN_ALLOC_INTERNAL_H
#define RQSPIN_ALLOC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rqspin/alloc.h>
#include "common/compiler.h"
#include "common/os.h"
#include "common/table.h"
#include <rqspin/static/lock_word.h> /* rqspin__valgrind */

#include "alloc/sanitize.h"


/* Debug checks: on unless NDEBUG; a test flavour forces them on. */
#ifndef RQSPIN_ALLOC_DEBUG
#ifdef NDEBUG
#define RQSPIN_ALLOC_DEBUG 0
#else
#define RQSPIN_ALLOC_DEBUG 1
#endif
#endif

/* ---- geometry ------------------------------------------------------------- */

#define PAGE_SHIFT 16u                 /* 64 KiB pages: one size class each */
#define PAGE_SIZE (1ul << PAGE_SHIFT)
#define SEG_SHIFT 22u                  /* 4 MiB segments, aligned to their size */
#define SEG_SIZE (1ul << SEG_SHIFT)
#define SEG_MASK (SEG_SIZE - 1)
#define PAGES_PER_SEG (SEG_SIZE / PAGE_SIZE) /* 64; page 0 holds the header */
#define MAX_SEGS (1u << 16)            /* 256 GiB of small objects */
#define VA_BITS 48u                    /* user addresses below 2^48 */
#define SEG_UNITS (1ul << (VA_BITS - SEG_SHIFT)) /* bits in the segment map */

#define NCLASSES RQSPIN_ALLOC_NCLASSES
#define SMALL_MAX RQSPIN_ALLOC_SMALL_MAX
#define NO_CLASS 0xffu

/* Large objects: header at the start of their mapping, object 64 bytes in. */
#define LARGE_HDR 64u
#define LARGE_MAGIC 0x6c617267652d7271ull
#define SEG_MAGIC 0x7365676d656e7451ull

/* ---- blocks --------------------------------------------------------------- */

/*
 * A free block. Objects of 16 bytes or more also carry a canary in their
 * second word while free, so that a second free of the same object can be
 * recognised (a live object has 0 there until the user writes it, and the
 * canary depends on the address, so user data matches it only by
 * deliberate forgery). 8-byte objects have no room for it.
 */
struct block {
	struct block *next;
	uint64_t canary;
};

#define CANARY_KEY 0x9e3779b97f4a7c15ull
static inline uint64_t block_canary(const struct block *b)
{
	return CANARY_KEY ^ (uint64_t)(uintptr_t)b;
}

/* ---- pages and segments --------------------------------------------------- */

struct heap;

/* Special values of page.heap (real heaps are mapped, far above these). */
#define OWNER_POOL ((struct heap *)(uintptr_t)2)    /* empty page, in a cache */
#define OWNER_RESERVE ((struct heap *)(uintptr_t)3) /* the shared reserve */
#define OWNER_HEADER ((struct heap *)(uintptr_t)4)  /* page 0 of a segment */
/* Thread-local heap pointer before the first call / after thread exit. */
#define TLS_EXITED ((struct heap *)(uintptr_t)1)

static inline bool heap_is_real(const struct heap *h)
{
	return (uintptr_t)h > 4;
}

/* Remote-free list word: count << 48 | block pointer | FULL | NOTIFIED.
 * NOTIFIED: the page is on, or is about to be pushed on, its heap's notify
 * list. FULL: the owner left the page with no free object (it is on no
 * list of the heap), so the next remote free must queue it. Objects live
 * below 2^48 (segments above are refused) and are 8-byte aligned, so the
 * top 16 bits count the objects on the list (at most 8192): the owner takes
 * a list without walking it to count. */
#define XFREE_NOTIFIED ((uintptr_t)1)
#define XFREE_FULL ((uintptr_t)2)
#define XFREE_CNT_SHIFT 48
#define XFREE_PTR_MASK ((((uintptr_t)1 << XFREE_CNT_SHIFT) - 1) & ~(uintptr_t)7)
#define XFREE_COUNT(x) ((uint32_t)((x) >> XFREE_CNT_SHIFT))
_Static_assert(VA_BITS <= XFREE_CNT_SHIFT, "object addresses must leave room for the count");

/*
 * Page descriptor, in the segment header. The first cache line belongs to
 * the owner (the heap's thread, its signal handlers under the class busy
 * flag, or a thread that claimed the abandoned heap); the second holds what
 * other threads write.
 */
struct page {
	struct block *free;    /* local free list */
	struct heap *heap;     /* owner, or OWNER_* */
	uint32_t used;         /* objects handed out and not yet freed back here
				  (written by the owner only, with page_used_set;
				  read by remote frees as a hint) */
	uint32_t bump;         /* objects carved so far (the rest never touched) */
	uint32_t bsize;        /* object size */
	uint32_t recip;        /* ceil(2^32 / bsize): offset -> index without a division */
	uint8_t cls;
	uint8_t in_partial;
	uint8_t pad_[2];
	uint32_t capacity;     /* objects that fit */
	uint32_t id;           /* segment index * 64 + page index */
	uint32_t rno;          /* reserve page number (reserve pages only) */
	struct page *next;     /* partial list of the heap's class */
	struct page *prev;
	/* ---- shared line ---- */
	_Atomic uintptr_t xfree __attribute__((aligned(64))); /* remote frees | NOTIFIED */
	_Atomic(struct page *) notify_next; /* link in heap.notify */
	_Atomic uint32_t pool_next;         /* link in a pool stack: id + 1, 0 = end */
	_Atomic uint32_t clean;             /* in the pool: contents given back to the OS */
} __attribute__((aligned(64)));

struct segment {
	uint64_t magic; /* SEG_MAGIC ^ address */
	uint32_t idx;
	struct page pages[PAGES_PER_SEG] __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct segment) <= PAGE_SIZE, "segment header must fit page 0");
_Static_assert(sizeof(struct page) == 128, "page descriptor: one owner line, one shared line");
_Static_assert(PAGE_SIZE / 8 <= (1u << 13), "reserve block index is 13 bits");

/* The owner changes used with a relaxed atomic store (a plain mov): remote
 * frees read it, as a hint only, to tell when their free may empty the
 * page (free_remote). */
static inline void page_used_set(struct page *pg, uint32_t v)
{
	__atomic_store_n(&pg->used, v, __ATOMIC_RELAXED);
}

/* The owner changes the local free list's head with a relaxed atomic
 * store (a plain mov) too: a remote free of an 8-byte object reads it to
 * recognise a second free of the object the owner freed last
 * (free_remote). */
static inline void page_free_set(struct page *pg, struct block *b)
{
	__atomic_store_n(&pg->free, b, __ATOMIC_RELAXED);
}

/* After an owner's free into pg: may every object of pg be back? The
 * objects it still counts as used may all wait on its remote list (remote
 * frees announce a page only when they may empty it by themselves). Also
 * true when nothing is used. relaxed: a hint; rqs_free_local_slow decides
 * with a CAS on the list word. */
static inline bool page_all_back(const struct page *pg)
{
	return pg->used <= XFREE_COUNT(atomic_load_explicit(&pg->xfree, memory_order_relaxed));
}

/* Segment map: one bit per 4 MiB of address space, set for our segments.
 * Lets free recognise a foreign pointer without touching its memory. A
 * static array (8 MiB of .bss: address space only, a page of it becomes
 * resident when a segment in its 128 GiB range is created), so free
 * finds it without loading a pointer first. */
extern _Atomic uint64_t rqs_alloc_segmap[SEG_UNITS / 64];

static inline bool seg_is_ours(uintptr_t a)
{
	uintptr_t u = a >> SEG_SHIFT;

	/* relaxed: a pointer into a segment reached the caller after the
	 * segment was created (through whatever handed the object over),
	 * so its bit is already visible; for any other pointer the answer
	 * is "no" whatever we read. */
	if (RQS_UNLIKELY(u >= SEG_UNITS))
		return false;
	return (atomic_load_explicit(&rqs_alloc_segmap[u >> 6], memory_order_relaxed) >> (u & 63)) & 1;
}

static inline struct page *page_of(uintptr_t a)
{
	struct segment *seg = (struct segment *)(a & ~SEG_MASK);

	return &seg->pages[(a >> PAGE_SHIFT) & (PAGES_PER_SEG - 1)];
}

/* First byte of the page that pg describes. */
static inline char *page_start(const struct page *pg)
{
	uintptr_t seg = (uintptr_t)pg & ~SEG_MASK;

	return (char *)(seg + (uintptr_t)(pg - ((const struct segment *)seg)->pages) * PAGE_SIZE);
}

/* Index of the object at a, or UINT32_MAX when a is not the start of a
 * carved object of pg. bump is read atomically: a thread freeing into
 * another heap's page reads it while the owner may carve (it only grows,
 * and a live object is below any value read after its allocation). */
static inline uint32_t page_block_index(const struct page *pg, uintptr_t a)
{
	uint64_t off = a & (PAGE_SIZE - 1); /* pg = page_of(a): pages are aligned */
	uint64_t m = off * pg->recip;
	uint32_t idx = (uint32_t)(m >> 32);

	/* One multiply gives both: for offsets and sizes below 2^16, the
	 * high half of off * ceil(2^32 / bsize) is off / bsize and the low
	 * half is below the reciprocal exactly when bsize divides off
	 * (checked for every class and offset when this was written). */
	if (RQS_UNLIKELY(idx >= __atomic_load_n(&pg->bump, __ATOMIC_RELAXED) ||
		     (uint32_t)m >= pg->recip))
		return UINT32_MAX;
	return idx;
}

/*
 * Debug builds: free bits of the 8-byte class, which has no room for a
 * canary. Its pages keep one bit per object in their last KiB (which is
 * never handed out: the capacity is cut short), set while the object is
 * free (never carved counts as not free: index checks catch those). A
 * free sets the bit with an atomic OR and reports a double free if it was
 * set already; an allocation clears it. Relaxed: the bits only detect
 * misuse; a legitimate free of an object is ordered after its allocation
 * by whatever handed the object over.
 */
#define TINY_MAP_BYTES (RQSPIN_ALLOC_DEBUG ? 1024u : 0u)

static inline ALLOC_FN _Atomic uint64_t *tiny_word(const void *b, uint64_t *bit)
{
	uintptr_t a = (uintptr_t)b;
	uintptr_t i = (a & (PAGE_SIZE - 1)) >> 3;

	*bit = 1ull << (i & 63);
	return (_Atomic uint64_t *)((a & ~(PAGE_SIZE - 1)) + PAGE_SIZE - TINY_MAP_BYTES) + (i >> 6);
}

/* Mark an 8-byte object free; false if it was free already. */
static inline ALLOC_FN bool tiny_mark_free(const void *b)
{
	uint64_t bit;
	_Atomic uint64_t *w = tiny_word(b, &bit);

	return !(atomic_fetch_or_explicit(w, bit, memory_order_relaxed) & bit);
}

static inline ALLOC_FN void tiny_mark_used(const void *b)
{
	uint64_t bit;
	_Atomic uint64_t *w = tiny_word(b, &bit);

	atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
}

static inline ALLOC_FN bool tiny_is_free(const void *b)
{
	uint64_t bit;
	_Atomic uint64_t *w = tiny_word(b, &bit);

	return (atomic_load_explicit(w, memory_order_relaxed) & bit) != 0;
}

/* ---- size classes --------------------------------------------------------- */

extern const uint32_t rqs_alloc_class_size[NCLASSES];

/* 8 | 16..128 step 16 | then 4 classes per doubling up to 16 KiB. */
static inline unsigned size_to_class_calc(size_t s)
{
	unsigned b;

	if (s <= 128)
		return s <= 8 ? 0 : (unsigned)((s + 15) >> 4);
	s--;
	b = 63u - (unsigned)__builtin_clzl(s);
	return 9u + (b - 7u) * 4u + (unsigned)((s >> (b - 2u)) & 3u);
}

/* Class of the sizes up to 1024 by 8-byte steps: every class boundary up
 * to there is a multiple of 8, so index (s + 7) / 8 names one class. The
 * table is size_to_class_calc's (checked at load in debug builds). */
#define CLASS_TAB_MAX 1024u
extern const uint8_t rqs_alloc_class_of8[CLASS_TAB_MAX / 8 + 1];

static inline unsigned size_to_class(size_t s)
{
	if (RQS_LIKELY(s <= CLASS_TAB_MAX))
		return rqs_alloc_class_of8[(s + 7) >> 3];
	return size_to_class_calc(s);
}

/* ---- heaps ---------------------------------------------------------------- */

struct hclass {
	struct page *page;     /* current page (never NULL: &rqs_alloc_empty_page) */
	struct page *partial;  /* other pages with local free objects */
	uint32_t busy;         /* this class's structures are being changed */
	uint32_t pad_;
	/* Objects of this class owned by other heaps that this thread freed
	 * (statistics only): counted by the owner (load + store under the
	 * busy flag), or, when a handler finds the class busy, with an
	 * atomic add on the second counter. Live objects are not counted
	 * per call: the statistics sum the pages' used counts. */
	_Atomic uint64_t nremote;
	_Atomic uint64_t nremote_nested;
	uint64_t pad2_[2];
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct hclass) == 64, "one cache line per class");

#define HEAP_CACHE 4 /* empty pages a heap keeps before the shared pool */

/*
 * Heap lifecycle (heap.c):
 *
 *   FRESH --(first claimer: bump)--> OWNED
 *   ABANDONED --(a thread without a heap: CAS)--> OWNED   (adopted)
 *   OWNED --(owner exits, nothing in progress: release store)--> ABANDONED
 *   OWNED --(owner exits in the middle of an operation, e.g. from a
 *            handler that interrupted the allocator)--> LOST
 *   OWNED --(owner found gone without its exit hook: tid CAS)--> OWNED by
 *            the finder, or LOST when an operation was in progress
 *   OWNED --(fork child, heaps of threads that did not survive)-->
 *            ABANDONED, or LOST when an operation was in progress
 * LOST heaps are never adopted (their lists may be half-updated): their
 * memory stays mapped, unused. Nothing here is ever unmapped.
 */
enum heap_state { HEAP_FRESH = RQS_TABLE_FRESH, HEAP_OWNED, HEAP_ABANDONED };

struct heap {
	struct hclass cls[NCLASSES];
	/* ---- the owner's line: its thread and that thread's handlers (a
	 * local free reads deferred every time) ---- */
	_Atomic(struct block *) deferred; /* nested frees into busy classes */
	uint32_t hbusy;                   /* the empty-page cache is being changed */
	uint32_t ncache;
	uint32_t idx;
	struct page *cache[HEAP_CACHE];
	_Atomic uint64_t nnested, nnext, ndeferred;
	/* ---- what other threads write: remote frees push pages here, so
	 * it must not share the owner's line ---- */
	_Atomic(struct page *) notify __attribute__((aligned(64))); /* pages with new remote frees */
	_Atomic uint32_t state;
	/* Thread id of the thread holding the heap (0 while nobody does):
	 * without a thread-exit key (heap.c) it tells a heap whose owner has
	 * died. */
	_Atomic int32_t owner_tid;
} __attribute__((aligned(64)));

/* The calling thread's heap: NULL before its first call, TLS_EXITED after
 * its exit destructor ran, else a real heap. */
extern __thread struct heap *rqs_alloc_tls_heap __attribute__((tls_model("initial-exec")));

/* A page descriptor with nothing in it: the current page of every class of
 * a new heap, so the fast path needs no NULL check. */
extern struct page rqs_alloc_empty_page;

/*
 * The busy flag works like a lock against this thread's own signal
 * handlers: only this thread (or a thread that claimed the heap
 * exclusively) writes it. A handler runs to completion before the
 * interrupted code resumes, so a plain load and store are enough; the
 * signal fences keep the compiler from moving the protected accesses
 * outside the flagged region.
 */
static inline bool busy_get(const uint32_t *f)
{
	return __atomic_load_n(f, __ATOMIC_RELAXED) != 0;
}
static inline void busy_set(uint32_t *f)
{
	__atomic_store_n(f, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void busy_clear(uint32_t *f)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(f, 0, __ATOMIC_RELAXED);
}

/* Owner-only counter (see hclass): load + store, no RMW. */
static inline void count_owner(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}
static inline void count_shared(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- global counters (stats.c) -------------------------------------------- */

struct alloc_global_stats {
	_Atomic uint64_t segments, pages_active, pool_dirty, pool_clean, madvise_calls;
	_Atomic uint64_t large_objects, large_bytes, large_allocs;
	_Atomic uint64_t heaps_adopted, bad_frees, meta_bytes;
	_Atomic uint64_t reserve_allocs, reserve_frees, reserve_pages;
	/* Counters other than the page counters above, on their own lines. */
	_Atomic uint64_t reserve_cls[NCLASSES] __attribute__((aligned(64)));
	_Atomic uint64_t reserve_cls_free[NCLASSES] __attribute__((aligned(64)));
	/* remote frees by threads that had no heap, per class */
	_Atomic uint64_t remote_noheap[NCLASSES] __attribute__((aligned(64)));
};
extern struct alloc_global_stats rqs_alloc_gstats;

/* ---- functions of the other files ----------------------------------------- */

/* alloc.c: set up the fast entry (at load, after Valgrind detection). */
void rqs_alloc_init_fast(void);
#ifdef ALLOC_VALGRIND
extern size_t rqs_alloc_fast_max;
#endif

/* slow.c: the class's busy flag is held by the caller. */
struct block *rqs_class_alloc_slow(struct heap *h, struct hclass *hc, unsigned c);
void rqs_free_local_slow(struct heap *h, struct hclass *hc, struct page *pg);
void rqs_heap_drain_deferred(struct heap *h, unsigned held_cls);
void rqs_heap_process_notify(struct heap *h, unsigned held_cls);
/* Collect remote frees, drain deferred frees and give back empty pages of a
 * heap the caller has exclusive use of (exiting owner, or claimed). */
size_t rqs_heap_collect_all(struct heap *h, bool release_current);
void rqs_page_retire(struct heap *h, struct page *pg);

/* heap.c */
struct heap *rqs_heap_attach(void);
struct heap *rqs_heap_claim(bool *adopted);
void rqs_heap_release(struct heap *h);
size_t rqs_heap_reap_abandoned(unsigned max_heaps);
/* Probe up to probes heaps for a holder that died without an exit notice
 * (heap.c, heap_take_dead); collect and abandon those taken. */
size_t rqs_heap_reap_dead(uint32_t probes);
/* Collect an abandoned heap and give back its empty pages, unless somebody
 * holds it. */
size_t rqs_heap_reap_one(struct heap *h);
uint32_t rqs_heap_count(void);
struct heap *rqs_heap_at(uint32_t i);
/* Hand back a heap's cached empty pages (caller holds hbusy or owns it). */
size_t rqs_heap_flush_cache(struct heap *h);

/* pool.c */
/* Add to live[c] the objects of class c in use in the heaps' pages. */
void rqs_pool_count_live(int64_t live[NCLASSES]);
struct page *rqs_pool_get(void);
void rqs_pool_put(struct page *pg);
size_t rqs_pool_trim(void);
/* Give back the dirty pages beyond those kept for good; the bytes. */
size_t rqs_pool_shrink(void);
void rqs_page_init(struct page *pg, struct heap *owner, unsigned c);
void rqs_segmap_init(void);

/* reserve.c */
struct block *rqs_reserve_alloc(unsigned c);
void rqs_reserve_free(struct page *pg, struct block *b);

/* large.c */
void *rqs_large_alloc(size_t size, unsigned flags);
/* p is not in a segment: free it if it is a large object, else bad free. */
void rqs_large_free(void *p);
size_t rqs_large_usable_size(const void *p);

/* report.c: a bad pointer. Debug: message + abort. Release: counted. */
void rqs_alloc_bad_pointer(const char *what, const void *p);
/* A free object was modified (debug builds). */
__attribute__((noreturn, cold)) void rqs_alloc_corrupt(const char *what, const void *p);

#ifdef RQSPIN_ALLOC_TEST_HOOKS
/* Test builds: called at points where a class (or the page cache) is busy,
 * so a test can raise a signal exactly there. */
enum { HOOK_ALLOC = 1, HOOK_FREE, HOOK_SLOW, HOOK_CACHE, HOOK_REMOTE };
extern void (*rqspin__alloc_test_hook)(unsigned where, unsigned cls);
#define ALLOC_TEST_HOOK(w, c)                                 \
	do {                                                  \
		if (rqspin__alloc_test_hook)                  \
			rqspin__alloc_test_hook((w), (c));    \
	} while (0)
#else
#define ALLOC_TEST_HOOK(w, c) ((void)0)
#endif

#endif /* RQSPIN_ALLOC_INTERNAL_H */
