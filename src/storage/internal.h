/* SPDX-License-Identifier: MIT */
/*
 * Object-local storage internals.
 *
 * Objects (all reclaimed after an RCU grace period, liburcu bp flavour):
 *
 *   owner ──► st_local (one per owner, 32 B)        map ──► buckets[] (rqspinlock + list)
 *               lock (rqspinlock), first element              │
 *               tab ──► open-addressing index of              ▼
 *                       (map key, elem) of every     st_elem ◄──► st_elem ...
 *                       other value (st_xtab, kept)  (bnext: the bucket's list)
 *
 * A lookup needs no lock and no read-side section: owner->storage_ →
 * local->tab → slot[key & mask] (linear probing) → a hit when the slot's
 * key is the map's key, validated by the table's seq (st_tab_probe). When
 * the owner's first element shares the storage's lifetime (ST_EMB_LIVE),
 * the owner word points at that element instead, and it is checked first.
 * Everything a probe reads lives until the owner is destroyed (the storage,
 * the first element, every table the storage ever had), so the only
 * element a reader can get is one that was in the index during its call.
 * The index is the kernel's 16-slot cache generalised: a map's id (the low
 * bits of its key) is the lowest free id (the kernel gives a new map the
 * least-used of 16 cache slots), so an owner's first maps land in distinct
 * slots, but the index holds every element but the first (no miss path,
 * no list walk) and grows past 16 maps. An owner with one value has no
 * index (ST_EMPTY_TAB).
 *
 * Locks: local->lock protects the owner's index; bucket->lock the bucket's
 * list; elem->lock only the value bytes (a leaf: nothing is taken under
 * it). Order: local, then bucket (the kernel's). map_destroy never nests.
 *
 * An element is linked on two sides: the map side (its bucket list) and the
 * storage side (its owner's index). Each side is unlinked under its own
 * lock and sets its bit in elem->state with an atomic OR; the side whose OR
 * finds the other bit already set is the second and frees the element.
 */
#ifndef RQSPIN_STORAGE_INTERNAL_H
#define RQSPIN_STORAGE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* liburcu's "bulletproof" flavour: threads register themselves on their
 * first read-side section (with every signal blocked, so also from a
 * handler) and unregister at exit, and an explicit registration is
 * idempotent. A program's own use of liburcu is therefore independent of
 * ours: another flavour (memb, qsbr...) has its own registry and grace
 * periods, and the program's own calls of this one, in any order, only
 * find the thread registered already. See rcu.c. */
#include <urcu/urcu-bp.h>
#include <urcu/call-rcu.h>
/* The read-side fast paths are liburcu's small inline functions (written to
 * the LGPL's ten-line rule so that non-LGPL code may inline them). */
#include <urcu/static/urcu-bp.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "common/compiler.h"


struct st_elem;
struct st_local;

/* ---- elements ------------------------------------------------------------ */

/*
 * elem->state bits, and an element's life:
 *
 *   new (0) --(linked into its bucket and its owner's index, then
 *              published in the index slot with a release store)--> live
 *   live --(map side: map delete or map_destroy, under the bucket lock:
 *           OR MAP_UNLINKED)--> half-unlinked
 *   live --(storage side: delete or owner destroy, under the local lock:
 *           OR STORAGE_UNLINKED)--> half-unlinked
 *   half-unlinked --(the other side's OR finds the first bit set)-->
 *           both unlinked: that side frees it after an RCU grace period
 *           (readers that found it in the index may still be reading it)
 * An element that lost a creation race is freed at once: it was never
 * published. FROM_MALLOC and EMBEDDED are set before publication and never
 * change.
 */
#define ST_MAP_UNLINKED 0x1u     /* gone from the bucket list (set under bucket lock) */
#define ST_STORAGE_UNLINKED 0x2u /* gone from the owner index (set under local lock) */
#define ST_BOTH_UNLINKED (ST_MAP_UNLINKED | ST_STORAGE_UNLINKED)
#define ST_FROM_MALLOC 0x4u      /* allocated by malloc(), not rqspin_malloc_nolock */
#define ST_EMBEDDED 0x8u         /* its storage's first element (see ST_EMB_LIVE) */

struct st_elem {
	struct st_elem *_Atomic bnext;  /* bucket list; kept on unlink (RCU walkers) */
	struct st_elem *_Atomic *bpprev;/* under the bucket lock */
	struct st_local *local;         /* set before publication, then immutable */
	struct rcu_head rcu;
	_Atomic uint32_t state;
	rqspinlock_t lock;              /* the value's lock (update/lookup_copy) */
	/* The key. Cleared when the map side is unlinked, so that an element left
	 * in an index by map_destroy can never match a new map at that address. */
	struct rqspin_storage_map *_Atomic map;
	uint64_t data[];                /* the value, 8-byte aligned */
};

#define ST_ELEM_HDR offsetof(struct st_elem, data)

static inline struct st_elem *st_elem_of(void *value)
{
	return (struct st_elem *)((char *)value - ST_ELEM_HDR);
}

/* ---- per-owner index ------------------------------------------------------ */

/*
 * Open addressing by map key, linear probing, deletion by backward shift (no
 * tombstones). A slot holds the map's key next to the element, so a probe
 * never dereferences an element: it reads only the table, which lives as
 * long as its owner (see st_xtab). Writers (under the storage's lock)
 * bracket every change with seq (odd while writing); a lock-free reader
 * takes a snapshot and checks that seq did not move. That is what lets the
 * lookup of storage.h (and rqspin__storage_get_slow) run without a
 * read-side section: nothing it reads can be freed before the owner is
 * destroyed, and a torn snapshot is detected. The 32-bit seq could only
 * fool a reader that sleeps across 2^31 writes of one owner's index.
 */
struct st_slot {
	_Atomic uint64_t key;           /* the map's key (map->key); 0 when empty */
	struct st_elem *_Atomic elem;   /* NULL when empty */
};

struct st_tab {
	_Atomic uint32_t seq;  /* even: stable; odd: a writer is changing slots, or
				* the table is retired (in the pool, or on a chain) */
	uint32_t mask;         /* capacity - 1; never changes for the memory's life */
	uint32_t live;         /* elements (local lock) */
	uint32_t pooled;       /* has been in the table pool: type-stable for good */
	/* The storage whose index this is (written in a write section): a
	 * reader that loaded the table pointer before the table was retired
	 * and reused by another owner sees a stable snapshot of someone
	 * else's index, and only this tells it so. NULL: the shared empty
	 * table. */
	const struct st_local *_Atomic owner;
	struct st_slot slot[];
};

/*
 * A grown index, allocated on its own. Readers probe tables without a
 * read-side section, so a table that a live owner stops using (grown,
 * shrunk, emptied) is retired into the table pool (table.c), never freed:
 * its memory is only ever reused as an index of the same capacity, with
 * seq odd from its retirement to its reuse and the owner stamp rewritten
 * in between. older links a pooled table, or (when the pool's lock could
 * not be had: a signal handler that interrupted the pool) the tables a
 * storage retired without the pool, freed or pooled with the storage.
 * A table that was never pooled is freed with its storage (only that
 * owner's readers could probe it, and they cannot race its destruction).
 */
struct st_xtab {
	struct st_xtab *older;
	struct st_tab t;
};

/* Largest capacity (a 3/4 limit of it holds RQSPIN_STORAGE_MAX_MAPS). */
#define ST_TAB_MAX_CAP 65536u
/* The first grown table: the inline one grows straight to 8 slots, which
 * hold 8 values (tables up to 8 slots may be full): an owner with up to 8
 * values keeps one grown table, not three. */
#define ST_TAB_FIRST_CAP 8u
/* Tables up to this capacity may be full (a probe reads 2 cache lines at
 * most); larger ones are kept 3/4 full. */
#define ST_TAB_FULL_CAP 8u

/* Home slot of a key: its low bits are the map's id (see map.c). */
static inline uint32_t st_key_home(uint64_t key, uint32_t mask)
{
	return (uint32_t)key & mask;
}

/* ---- per-owner storage --------------------------------------------------- */

/* local->flags bits. */
#define ST_GONE 0x1u    /* rqspin_storage_owner_destroy() has started */
#define ST_CLEANED 0x2u /* its elements are unlinked; local is being freed */
/* The storage's first element, when it is small (ST_EMBED_MAX) and from
 * rqspin_malloc_nolock, is allocated with the storage and lives as long as
 * it: it is freed with the storage, never before, and its memory is never
 * reused for another element. That is what lets the inline lookup of
 * storage.h read it without a read-side section. It is a separate
 * allocation (the storage is 32 bytes, in another size class), so that
 * the first elements of many owners sit densely in their own pages: a
 * lookup over many cold owners touches fewer pages than it would if
 * storage and element shared one block. This bit says the element
 * is not freed yet; the storage (and the element) are freed by whichever
 * comes second: ST_CLEANED being set, or this bit being cleared (both
 * atomic RMWs on flags). */
#define ST_EMB_LIVE 0x4u
/* Largest first element given the storage's lifetime (a deleted one is
 * only freed with the storage: this bounds what an owner can hold on to). */
#define ST_EMBED_MAX 256u
/* The first element is the owner's value of its map: linked on the
 * storage side. It is never in the index (a lookup finds it through the
 * owner word, or by its map under the storage's lock: st_find_locked), so
 * an owner with one value needs no index at all. Set and cleared under
 * the storage's lock (atomic RMWs: other bits of flags change without it). */
#define ST_FIRST_IN 0x8u
/* Low bit of owner->storage_: the word points at the storage's first
 * element (whose local points at the storage), not at the storage. A
 * lookup checks that element first, so that the common hit reads the
 * owner's line and the element's line only (the element's map is set
 * once it is linked, and cleared when it goes). */
#define ST_OWNER_EMB ((uintptr_t)1)

struct st_local {
	rqspinlock_t lock;
	_Atomic uint32_t flags;
	struct rqspin_storage_owner *_Atomic owner; /* for iterators; NULL once gone */
	struct st_tab *_Atomic tab;                 /* ST_EMPTY_TAB, a bare storage's
						     * inline table or a st_xtab's */
	struct st_elem *first;                      /* see ST_EMB_LIVE; immutable */
};

/*
 * The storage's deferred free needs an rcu_head. With a first element it
 * uses that element's, which nothing else uses (the element is freed with
 * the storage, never through call_rcu of its own); without one (an
 * F_MALLOC map's or a large first value) the storage is allocated with an
 * rcu_head and an inline table after it (ST_LOCAL_SIZE_BARE). That keeps
 * the common storage at 32 bytes.
 */
#define ST_LOCAL_SIZE sizeof(struct st_local)
/* A storage without a first element (an F_MALLOC map's, or a large first
 * value) keeps its values in the index from the first on: it carries an
 * inline 2-slot table after its rcu_head, so that a get reads no separate
 * table (96 bytes). */
#define ST_BARE_SLOTS 2u
#define ST_LOCAL_SIZE_BARE                                                            \
	(ST_LOCAL_SIZE + sizeof(struct rcu_head) + sizeof(struct st_tab) +              \
	 ST_BARE_SLOTS * sizeof(struct st_slot))
/* Not in the size class of the commonest element (64 B: an 8-byte value),
 * so that first elements do not interleave with storages (see ST_EMB_LIVE). */
_Static_assert(ST_LOCAL_SIZE == 32, "a storage is 32 bytes");

/* The index of a storage that has none yet: one empty slot, never
 * written (a probe misses; the first insert grows a table first). */
union st_empty_tab {
	struct st_tab t;
	char bytes[sizeof(struct st_tab) + sizeof(struct st_slot)];
};
extern union st_empty_tab rqs_st_empty;
#define ST_EMPTY_TAB (&rqs_st_empty.t)

static inline struct rcu_head *st_local_bare_rcu(struct st_local *l)
{
	return (struct rcu_head *)(void *)((char *)l + ST_LOCAL_SIZE);
}

static inline struct st_tab *st_local_bare_tab(struct st_local *l)
{
	return (struct st_tab *)(void *)((char *)l + ST_LOCAL_SIZE + sizeof(struct rcu_head));
}

/* t, a table of l, is a separately allocated one (a st_xtab's). */
static inline bool st_tab_is_x(struct st_local *l, struct st_tab *t)
{
	return t != ST_EMPTY_TAB && (l->first || t != st_local_bare_tab(l));
}
_Static_assert(offsetof(struct st_elem, data) == 56, "element header");
/* The inline lookup (rqspin/static/storage.h) reads these structures
 * through their public twins: each field it reads at the same offset, and
 * the value right after the twin of the element header. The layout stamp
 * (RQSPIN__STORAGE_LAYOUT) is computed from the twins, so these asserts
 * also make the library's stamp describe its real layout. */
_Static_assert(ST_OWNER_EMB == RQSPIN__STORAGE_EMB, "owner word tag");
_Static_assert(offsetof(struct st_elem, local) == offsetof(struct rqspin__storage_elem, local) &&
	       offsetof(struct st_elem, map) == offsetof(struct rqspin__storage_elem, key) &&
	       offsetof(struct st_elem, data) == sizeof(struct rqspin__storage_elem),
	       "element layout");
_Static_assert(offsetof(struct st_local, tab) == offsetof(struct rqspin__storage_local, index),
	       "storage layout");
_Static_assert(offsetof(struct st_tab, seq) == offsetof(struct rqspin__storage_index, seq) &&
	       offsetof(struct st_tab, mask) == offsetof(struct rqspin__storage_index, mask) &&
	       offsetof(struct st_tab, owner) == offsetof(struct rqspin__storage_index, owner) &&
	       offsetof(struct st_tab, slot) == sizeof(struct rqspin__storage_index),
	       "index layout");
_Static_assert(sizeof(struct st_slot) == sizeof(struct rqspin__storage_slot) &&
	       offsetof(struct st_slot, key) == offsetof(struct rqspin__storage_slot, key) &&
	       offsetof(struct st_slot, elem) == offsetof(struct rqspin__storage_slot, elem),
	       "slot layout");

/* ---- maps -------------------------------------------------------------- */

struct st_bucket {
	rqspinlock_t lock;
	/* Set when an owner's cleanup could not take the lock (busy, or held
	 * by the code a signal handler interrupted) and left an element
	 * whose storage side is done on the list: whoever holds the lock
	 * next sweeps it when it unlocks (rqs_st_bucket_unlock). */
	_Atomic uint32_t sweep;
	struct st_elem *_Atomic head;
} __attribute__((aligned(64)));

struct rqspin_storage_map {
	/* The index key, read by storage.h's inline lookup (first member):
	 * a 48-bit creation serial, never reused, above the 16-bit id. The
	 * serial keeps a dead map's leftover from matching a new map that got
	 * its id (or address); the id is the home slot. */
	uint64_t key;
	uint32_t id;          /* lowest free id (the kernel's least-used slot) */
	uint32_t value_size;
	uint32_t elem_size;
	uint32_t flags;
	uint32_t bucket_mask;
	/* Set by map_destroy before it sweeps the buckets; a link checks it
	 * under the bucket lock, so a value created concurrently (misuse) is
	 * refused instead of landing in a swept bucket. */
	_Atomic uint32_t dying;
	struct st_bucket *buckets;
	struct rcu_head rcu; /* freed after a grace period */
};

#define ST_KEY_ID_BITS 16
_Static_assert(RQSPIN_STORAGE_MAX_MAPS <= (1u << ST_KEY_ID_BITS), "ids fit the key");
_Static_assert(offsetof(struct rqspin_storage_map, key) ==
		       offsetof(struct rqspin__storage_map_head, key),
	       "the inline lookup reads the key");

static inline struct st_bucket *st_bucket_of(const struct rqspin_storage_map *m,
					     const struct st_local *l)
{
	/* Fibonacci hashing of the storage address (the kernel picks the
	 * bucket by local storage since 2026, too). */
	uint64_t h = ((uint64_t)(uintptr_t)l >> 6) * 0x9e3779b97f4a7c15ull;

	return &m->buckets[(uint32_t)(h >> 32) & m->bucket_mask];
}

/* ---- RCU glue (rcu.c) ---------------------------------------------------- */

/* Start liburcu's call_rcu worker (normal context only). */
int rqs_st_setup(void);
/* Abort with a message when a blocking call is made in a read section. */
void rqs_st_assert_not_reading(const char *what);

#ifdef RQS_TSAN
/* liburcu is not instrumented: tell ThreadSanitizer that a read section's
 * end happens before the callbacks of the grace periods that waited for it. */
extern char rqs_st_tsan_gp;
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define ST_TSAN_RELEASE_GP() __tsan_release(&rqs_st_tsan_gp)
#define ST_TSAN_ACQUIRE_GP() __tsan_acquire(&rqs_st_tsan_gp)
#else
#define ST_TSAN_RELEASE_GP() ((void)0)
#define ST_TSAN_ACQUIRE_GP() ((void)0)
#endif

/* liburcu-bp's pointer to this thread's reader record, accessed
 * initial-exec: the library is a load-time dependency of ours, so its TLS
 * is in the static block (no __tls_get_addr call, which also could
 * allocate on first touch). */
extern __thread struct urcu_bp_reader *urcu_bp_reader __attribute__((tls_model("initial-exec")));

/* Under ThreadSanitizer, call liburcu's (uninstrumented) functions: its
 * inline code relies on plain accesses that TSan would report. */
#ifdef RQS_TSAN
#define ST_RCU_READ_LOCK urcu_bp_read_lock
#define ST_RCU_READ_UNLOCK urcu_bp_read_unlock
#else
#define ST_RCU_READ_LOCK _urcu_bp_read_lock
#define ST_RCU_READ_UNLOCK _urcu_bp_read_unlock
#endif

static inline void st_read_lock(void)
{
	/* Registers the thread first if needed (urcu_bp_register: signals
	 * blocked, registry mutex, maybe an mmap of the registry; safe in a
	 * handler, because liburcu-bp blocks every signal wherever it holds
	 * that mutex). */
	ST_RCU_READ_LOCK();
}

static inline void st_read_unlock(void)
{
	ST_TSAN_RELEASE_GP();
	ST_RCU_READ_UNLOCK();
}

/* Free after a grace period (call_rcu on the pre-started worker: lock-free
 * and async-signal-safe; the caller is registered and in a read section). */
void rqs_st_free_elem_rcu(struct st_elem *e);
/* (With its grown tables, and its first element.) */
void rqs_st_free_local_rcu(struct st_local *l);
/* Free or pool l's tables (its deferred free). */
void rqs_st_tab_free_all(struct st_local *l);
/* Free the pool's tables; only while no map exists (rqs_st_no_maps_begin). */
void rqs_st_pool_drain(void);
/* Locks out map creation; true when no map exists. Always followed by
 * rqs_st_no_maps_end. Not async-signal-safe (a mutex). */
bool rqs_st_no_maps_begin(void);
void rqs_st_no_maps_end(void);
/* The pool's bytes (rqspin_storage_pool_bytes). */
uint64_t rqs_st_pool_bytes(void);
extern _Atomic uint64_t rqs_st_shrinks;
/* Free an element that was never published (never an embedded one). */
void rqs_st_free_elem_now(struct st_elem *e);
/* The embedded element of l is unlinked on both sides. */
void rqs_st_release_embedded(struct st_local *l);

/* ---- index (table.c), all under the local lock except st_tab_probe ------- */

/* st_tab_probe's answer when a writer moved the table under it. */
#define ST_RETRY ((struct st_elem *)1)

/*
 * Lock-free probe of t, a table that l's index pointer held: the element
 * of key, NULL if absent, or ST_RETRY when a writer was changing the
 * table or it is no longer l's (the caller retries with l's current table,
 * or locks). Bounded: at most one pass over the table, whatever it reads.
 * Needs no read-side section to be memory-safe (tables live as long as
 * their storage, or in the type-stable pool), but the caller needs one,
 * or the owner's contract, for the element it gets.
 */
static inline struct st_elem *st_tab_probe(const struct st_local *l, const struct st_tab *t,
					   uint64_t key)
{
	/* acquire: if seq is the end of a write, the slot loads below see
	 * that write's stores (or later ones, which the re-check catches). */
	uint32_t seq = atomic_load_explicit(&t->seq, memory_order_acquire);
	uint32_t mask = t->mask;
	uint32_t i = st_key_home(key, mask);
	struct st_elem *found = NULL;

	/* The shared empty table is nobody's and holds nothing. */
	if (t == ST_EMPTY_TAB)
		return NULL;
	/* acquire: as the slot loads below (the stamp is written in a write
	 * section). A table that was retired and reused by another owner
	 * after we loaded its pointer: retry, with l's current table. */
	if (RQS_UNLIKELY(atomic_load_explicit(&t->owner, memory_order_acquire) != l))
		return ST_RETRY;

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		/* acquire (both loads): pair with the release stores of
		 * tab_set. Whatever write a load reads from, that write's odd
		 * seq happens before our re-check below, which then fails;
		 * the element's acquire also makes its value visible. */
		struct st_elem *e = atomic_load_explicit(&t->slot[i].elem, memory_order_acquire);

		if (!e)
			break;
		if (atomic_load_explicit(&t->slot[i].key, memory_order_acquire) == key) {
			found = e;
			break;
		}
	}
	/* relaxed: ordered after the acquire loads above (the seqlock
	 * argument without fences: a load that saw a write in progress
	 * makes this one see its odd seq or a later value). */
	if (RQS_UNLIKELY((seq & 1) || atomic_load_explicit(&t->seq, memory_order_relaxed) != seq))
		return ST_RETRY;
	return found;
}

/* Probe under the storage's lock (no writer can run). */
static inline struct st_elem *st_tab_find_locked(const struct st_tab *t, uint64_t key)
{
	uint32_t mask = t->mask;
	uint32_t i = st_key_home(key, mask);

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		struct st_elem *e = atomic_load_explicit(&t->slot[i].elem, memory_order_relaxed);

		if (!e)
			return NULL;
		if (atomic_load_explicit(&t->slot[i].key, memory_order_relaxed) == key)
			return e;
	}
	return NULL;
}

/*
 * The owner word of a destroyed owner: a storage that holds nothing and
 * never will. Every lookup misses in its (empty, never written) index,
 * the inline one of storage.h included, and every creation sees it and
 * fails with -EIDRM, so nothing can be attached to an owner once its
 * destruction has started. Never locked. (A union: a structure with a
 * flexible array member cannot be a member of another structure.)
 */
union st_dead_local {
	struct st_local l;
	char bytes[ST_LOCAL_SIZE];
};
extern union st_dead_local rqs_st_dead;
#define ST_OWNER_DEAD ((uintptr_t)&rqs_st_dead.l)

static inline struct st_elem *st_embedded_of(uintptr_t word)
{
	return (struct st_elem *)(word & ~ST_OWNER_EMB);
}

static inline struct st_local *st_local_of(uintptr_t word)
{
	/* The first element's local was set before the owner word was
	 * published (the caller acquired the word), and never changes. */
	if (word & ST_OWNER_EMB)
		return st_embedded_of(word)->local;
	return (struct st_local *)word;
}

static inline struct st_tab *st_local_tab(struct st_local *l)
{
	/* acquire: pairs with the release store that installed a rebuilt
	 * table (rqs_st_tab_reserve), whose slots were filled before. */
	return atomic_load_explicit(&l->tab, memory_order_acquire);
}

/* The owner's element of m, under the storage's lock: its first element,
 * or the index's. */
static inline struct st_elem *st_find_locked(struct st_local *l,
					     const struct rqspin_storage_map *m)
{
	struct st_elem *f = l->first;

	/* relaxed: FIRST_IN changes under the lock we hold; a first element
	 * whose map side is done (map NULL) is no map's value any more. */
	if (f && (atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_FIRST_IN) &&
	    atomic_load_explicit(&f->map, memory_order_relaxed) == m)
		return f;
	return st_tab_find_locked(atomic_load_explicit(&l->tab, memory_order_relaxed), m->key);
}

/* Make room in the index for one more element: 0 or -ENOMEM. */
int rqs_st_tab_reserve(struct st_local *l);
/* Put e (of the map whose key is key) in the index; room was reserved. */
void rqs_st_tab_insert(struct st_local *l, struct st_elem *e, uint64_t key);
/* Take e out of the index. hint: the map e belonged to, or NULL. */
void rqs_st_tab_remove(struct st_local *l, struct st_elem *e,
			     const struct rqspin_storage_map *hint);
/* The storage side of e: link it (the first element: FIRST_IN; another:
 * into the index, room reserved) or unlink it. Under the storage's lock. */
void rqs_st_storage_insert(struct st_local *l, struct st_elem *e, uint64_t key);
void rqs_st_storage_remove(struct st_local *l, struct st_elem *e,
				 const struct rqspin_storage_map *hint);
/* Empty the index of a storage whose elements were all unlinked (the
 * storage's cleanup; its grown tables are freed with it). */
void rqs_st_tab_release_all(struct st_local *l);

/* ---- storage side / map side (unlink.c) ----------------------------------- */

/* Link e (local set) into m's bucket. Caller holds the local lock.
 * 0, -EIDRM (m is being destroyed), or the bucket lock's error. */
int rqs_st_link_map(struct st_elem *e, struct rqspin_storage_map *m);
/* Unlink e from its bucket; caller holds the bucket lock. Returns the state
 * before ST_MAP_UNLINKED was set. */
uint32_t rqs_st_unlink_map_locked(struct st_elem *e);
/* Unlock a bucket; sweep its leftovers first if an owner's cleanup asked. */
void rqs_st_bucket_unlock(struct st_bucket *b);
/* Unlock a storage; if its owner was destroyed meanwhile, finish that.
 * true when the owner is gone (destroyed during or before the section). */
bool rqs_st_local_unlock(struct st_local *l);
/* Clean up a gone storage unless already done; frees it. Tries the lock
 * once (never waits); when that fails, its holder does it in
 * rqs_st_local_unlock. */
void rqs_st_local_finish_gone(struct st_local *l);

static inline bool st_lock_ok(int ret)
{
	/* -EOWNERDEAD: acquired, the previous holder thread exited holding
	 * it. Our critical sections are short and never call out, so this
	 * only happens if a thread was killed inside one; carry on. */
	return ret == 0 || ret == -EOWNERDEAD;
}

/* Test builds (tests/storage.cmake compiles ops.c and table.c once more with
 * RQSPIN_STORAGE_TEST_HOOKS): called at points where a race with another
 * thread's operation matters, so a test can run that operation there. */
#ifdef RQSPIN_STORAGE_TEST_HOOKS
enum {
	ST_HOOK_LINKED = 1, /* an element linked into its bucket, storage lock held */
	ST_HOOK_POOL = 2,   /* the index-table pool's lock just taken (table.c) */
};
extern void (*rqs_st_test_hook)(unsigned where, struct st_elem *e);
#define ST_TEST_HOOK(w, e)                           \
	do {                                         \
		if (rqs_st_test_hook)                \
			rqs_st_test_hook((w), (e));  \
	} while (0)
#else
#define ST_TEST_HOOK(w, e) ((void)0)
#endif

#endif /* RQSPIN_STORAGE_INTERNAL_H */
