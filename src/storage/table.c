/* SPDX-License-Identifier: MIT */
/*
 * The per-owner index: open addressing by map key, linear probing,
 * deletion by backward shift. Everything here runs under the storage's
 * lock; lock-free readers (st_tab_probe, and the inline lookup of
 * storage.h) validate their snapshot with the table's seq, which every
 * change of a published table bumps to odd before and to even after, and
 * with the table's owner stamp.
 *
 * Growing fills a new table and publishes it with one release store;
 * deletes that leave a table a quarter full shrink it the same way, and an
 * owner whose index empties (its first value lives outside the index)
 * goes back to the shared empty table. Readers hold no read-side section,
 * so a table given up this way is never freed: it is retired (seq made
 * odd, and left odd) into the table pool, and only ever reused as an index
 * of the same capacity. A reader that still probes it sees either the
 * state it had when it was replaced (a state the index had during the
 * reader's call), an odd seq, or another owner's stamp; the last two make
 * it retry with its owner's current table. The pool keeps tables of every
 * capacity for any owner; its memory goes back to the allocator only when
 * the last map is destroyed (no get can run then).
 */
#include <string.h>

#include "common/assert.h"
#include "storage/internal.h"

/* ---- the table pool ------------------------------------------------------ */

/* Capacities 4 (the first grown table of a bare storage: twice its inline
 * 2 slots) .. ST_TAB_MAX_CAP, powers of two. */
#define POOL_MIN_CAP 4u
#define POOL_CLASSES 15
_Static_assert(POOL_MIN_CAP << (POOL_CLASSES - 1) == ST_TAB_MAX_CAP, "pool classes");
_Static_assert(ST_BARE_SLOTS * 2 >= POOL_MIN_CAP, "a bare storage's first grown table");

/*
 * One lock for all classes: a table changes hands only when an owner's
 * index grows or shrinks, and the lock nests inside a storage's lock (a
 * leaf). A signal handler that interrupted this thread inside the pool
 * gets -EDEADLK from it and does without: it allocates a new table, and
 * keeps the one it gives up on its storage (see tab_retire).
 */
static struct {
	rqspinlock_t lock;
	struct st_xtab *head[POOL_CLASSES];
	/* Changed under the lock; read without it (rqs_st_pool_bytes). */
	_Atomic uint64_t bytes;
} pool;

static unsigned pool_class(uint32_t cap)
{
	rqs_assert(cap >= POOL_MIN_CAP && cap <= ST_TAB_MAX_CAP && !(cap & (cap - 1)));
	return (unsigned)(__builtin_ctz(cap) - __builtin_ctz(POOL_MIN_CAP));
}

static bool pool_lock(void)
{
	if (!st_lock_ok(rqspin_lock(&pool.lock)))
		return false;
	ST_TEST_HOOK(ST_HOOK_POOL, NULL);
	return true;
}

static void pool_unlock(void)
{
	rqspin_unlock(&pool.lock);
}

/* Pool lock held. x is retired (seq odd) and nobody's index. */
static void pool_put(struct st_xtab *x)
{
	unsigned c = pool_class(x->t.mask + 1);

	x->t.pooled = 1;
	x->older = pool.head[c];
	pool.head[c] = x;
	/* relaxed: a statistic; the lock orders the writers. */
	atomic_fetch_add_explicit(&pool.bytes, rqspin_malloc_usable_size(x), memory_order_relaxed);
}

/* Pool lock held. A retired table of capacity cap, or NULL. */
static struct st_xtab *pool_take(uint32_t cap)
{
	unsigned c = pool_class(cap);
	struct st_xtab *x = pool.head[c];

	if (x) {
		pool.head[c] = x->older;
		atomic_fetch_sub_explicit(&pool.bytes, rqspin_malloc_usable_size(x),
					  memory_order_relaxed);
	}
	return x;
}

RQSPIN_API size_t rqspin_storage_pool_bytes(void)
{
	return (size_t)rqs_st_pool_bytes();
}

uint64_t rqs_st_pool_bytes(void)
{
	/* relaxed: a statistic (exact once the pool is quiet). */
	return atomic_load_explicit(&pool.bytes, memory_order_relaxed);
}

/* Shrinks done (tests: a race test shows it exercised them). */
_Atomic uint64_t rqs_st_shrinks;

/* Elements a table of cap slots may hold: full for the small tables (a
 * probe reads at most 8 slots, two cache lines), 3/4 otherwise. */
static inline uint32_t tab_limit(uint32_t cap)
{
	return cap <= ST_TAB_FULL_CAP ? cap : cap - cap / 4;
}

static void tab_write_begin(struct st_tab *t)
{
	/* relaxed: only the lock holder writes seq. Every slot store that
	 * follows is a release store (tab_set), so a reader whose acquire
	 * load sees any of them also sees this odd seq, or later, when it
	 * reads seq again (st_tab_probe): no fence is needed (and
	 * ThreadSanitizer does not model fences). */
	uint32_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);

	atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
}

static void tab_write_end(struct st_tab *t)
{
	uint32_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);

	/* release: the slot stores before the even seq, for a reader that
	 * starts with an acquire load of it. */
	atomic_store_explicit(&t->seq, seq + 1, memory_order_release);
}

static void tab_set(struct st_tab *t, uint32_t i, uint64_t key, struct st_elem *e)
{
	/* release (both): carry the odd seq of tab_write_begin to a reader
	 * that sees either store; the element's store also publishes its
	 * header and value (st_tab_probe's acquire). */
	atomic_store_explicit(&t->slot[i].key, key, memory_order_release);
	atomic_store_explicit(&t->slot[i].elem, e, memory_order_release);
}

/* Put (key, e) in the first empty slot from its home; room exists. */
static void tab_put(struct st_tab *t, uint64_t key, struct st_elem *e)
{
	uint32_t mask = t->mask;
	uint32_t i = st_key_home(key, mask);

	while (atomic_load_explicit(&t->slot[i].elem, memory_order_relaxed))
		i = (i + 1) & mask;
	tab_set(t, i, key, e);
	t->live++;
}

/*
 * Empty slot i and shift back the entries after it that may move (Knuth's
 * algorithm R), so that every entry stays reachable from its home without
 * tombstones. Stops at an empty slot, or after a full lap (a full tiny
 * table has none).
 */
static void tab_delete_at(struct st_tab *t, uint32_t i)
{
	uint32_t mask = t->mask;
	uint32_t j = i;

	for (;;) {
		struct st_elem *e;
		uint64_t key;

		j = (j + 1) & mask;
		if (j == i)
			break;
		e = atomic_load_explicit(&t->slot[j].elem, memory_order_relaxed);
		if (!e)
			break;
		key = atomic_load_explicit(&t->slot[j].key, memory_order_relaxed);
		/* The hole i lies on the probe path home..j of this entry:
		 * it may move there. */
		if (((j - st_key_home(key, mask)) & mask) >= ((j - i) & mask)) {
			tab_set(t, i, key, e);
			i = j;
		}
	}
	tab_set(t, i, 0, NULL);
	t->live--;
}

/* Element whose map side is done (map_destroy unlinked it but did not get
 * our lock yet): finish the storage side now that we hold it. */
static bool reap_zombie(struct st_elem *e)
{
	uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);

	if (!(st & ST_MAP_UNLINKED))
		return false;
	/* acq_rel: orders our unlink before the free decision of the other
	 * side, and theirs before ours. */
	st = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED, memory_order_acq_rel);
	if (st & ST_MAP_UNLINKED)
		rqs_st_free_elem_rcu(e);
	return true;
}

/* Copy the live entries of old into t (empty, unpublished). */
static void tab_fill(struct st_tab *t, struct st_tab *old)
{
	for (uint32_t i = 0; i <= old->mask; i++) {
		struct st_elem *e = atomic_load_explicit(&old->slot[i].elem, memory_order_relaxed);

		if (!e)
			continue;
		/* A cleared map whose state bit is not set yet: map_destroy is
		 * between the two stores and will finish the storage side (it
		 * finds e by scanning, any slot will do). */
		if (!atomic_load_explicit(&e->map, memory_order_relaxed) && reap_zombie(e))
			continue;
		tab_put(t, atomic_load_explicit(&old->slot[i].key, memory_order_relaxed), e);
	}
}

static struct st_xtab *xtab_of(struct st_local *l, struct st_tab *t)
{
	return st_tab_is_x(l, t) ? caa_container_of(t, struct st_xtab, t) : NULL;
}

/*
 * A table of capacity cap for l, holding the live entries of old: x, taken
 * from the pool, or (x NULL) a new one. Not published. A pooled table has
 * kept an odd seq since its retirement, so readers that still probe it
 * (for its former owner) retry while it is refilled; the owner stamp
 * changes inside that write section, and seq goes even at the end. A new
 * one (zeroed: seq 0, every slot empty) has never been seen.
 */
static struct st_xtab *tab_build(struct st_local *l, uint32_t cap, struct st_tab *old,
				 struct st_xtab *x)
{
	if (x) {
		rqs_assert(atomic_load_explicit(&x->t.seq, memory_order_relaxed) & 1);
		/* release: with the seq left odd at retirement, a reader that
		 * sees the new stamp also sees a seq that fails its check. */
		atomic_store_explicit(&x->t.owner, l, memory_order_release);
		for (uint32_t i = 0; i <= x->t.mask; i++)
			if (atomic_load_explicit(&x->t.slot[i].elem, memory_order_relaxed))
				tab_set(&x->t, i, 0, NULL);
		x->t.live = 0;
		x->older = NULL;
		tab_fill(&x->t, old);
		tab_write_end(&x->t);
		return x;
	}
	x = rqspin_malloc_nolock(sizeof(*x) + cap * sizeof(x->t.slot[0]), RQSPIN_ALLOC_ZERO);
	if (!x)
		return NULL;
	x->t.mask = cap - 1;
	atomic_store_explicit(&x->t.owner, l, memory_order_relaxed);
	tab_fill(&x->t, old);
	return x;
}

/*
 * old, an x-table of l that repl (an x-table, or the empty table) has
 * replaced in l->tab, is given up: its seq goes odd for good (a reader
 * still probing it retries). to_pool (the pool's lock held): old, and the
 * tables l kept earlier (old->older), go to the pool, for any owner to
 * reuse. Otherwise old joins that chain on repl, to be freed (or pooled,
 * if it ever was) with l: a table outgrown by growth is not wanted by the
 * next owner that grows, and on the chain it costs what it always did.
 */
static void tab_retire(struct st_local *l, struct st_xtab *old, struct st_tab *repl, bool to_pool)
{
	struct st_xtab *kept = old->older, *rx = xtab_of(l, repl);

	tab_write_begin(&old->t);
	if (to_pool) {
		pool_put(old);
		while (kept) {
			struct st_xtab *next = kept->older;

			pool_put(kept);
			kept = next;
		}
		if (rx)
			rx->older = NULL;
		return;
	}
	rqs_assert(rx != NULL);
	old->older = kept;
	rx->older = old;
}

/* Publish x as l's index. release: its filled slots, seq and stamp before
 * the pointer (readers load it with acquire, st_local_tab). */
static void tab_install(struct st_local *l, struct st_tab *t)
{
	atomic_store_explicit(&l->tab, t, memory_order_release);
}

int rqs_st_tab_reserve(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	uint32_t cap = t == ST_EMPTY_TAB ? ST_TAB_FIRST_CAP : (t->mask + 1) * 2;
	struct st_xtab *x, *old = xtab_of(l, t);

	if (t != ST_EMPTY_TAB && t->live < tab_limit(t->mask + 1))
		return 0;
	if (cap > ST_TAB_MAX_CAP)
		return -ENOMEM; /* 49152 elements per owner: cannot happen with the map limit */
	/* A table from the pool if it has one (without its lock, a signal
	 * handler that interrupted the pool: a new one). */
	x = NULL;
	if (pool_lock()) {
		x = pool_take(cap);
		pool_unlock();
	}
	x = tab_build(l, cap, t, x);
	if (!x)
		return -ENOMEM;
	tab_install(l, &x->t);
	if (old)
		tab_retire(l, old, &x->t, false);
	return 0;
}

/*
 * After a delete: an index a quarter full or less shrinks to half its
 * capacity (again while that holds, down to ST_TAB_FIRST_CAP: it grows
 * again only when full, or 3/4 full, so a size does not flip back and
 * forth), and an empty one of a storage that has a first element goes
 * back to the shared empty table. Needs the pool's lock (the table given
 * up must go there); without it, or without memory, the index stays.
 */
static void tab_maybe_shrink(struct st_local *l, struct st_tab *t)
{
	struct st_xtab *old = xtab_of(l, t), *x = NULL;
	uint32_t cap = t->mask + 1;
	bool to_empty = t->live == 0 && l->first != NULL;

	if (!old || (!to_empty && (cap <= ST_TAB_FIRST_CAP || t->live > cap / 4)))
		return;
	while (!to_empty && cap > ST_TAB_FIRST_CAP && t->live <= cap / 4)
		cap /= 2;
	if (!pool_lock())
		return;
	if (!to_empty)
		x = tab_build(l, cap, t, pool_take(cap));
	if (to_empty || x) {
		tab_install(l, x ? &x->t : ST_EMPTY_TAB);
		tab_retire(l, old, x ? &x->t : ST_EMPTY_TAB, true);
		/* relaxed: a statistic. */
		atomic_fetch_add_explicit(&rqs_st_shrinks, 1, memory_order_relaxed);
	}
	pool_unlock();
}

/* The storage is being freed (no reader can probe its tables for it any
 * more): tables that were ever pooled go back to the pool (a reader of
 * their former owners may still probe them) unless no map exists (then no
 * get can run), the others to the allocator. From the deferred free
 * (never in a signal handler); if the pool's lock cannot be had, pooled
 * tables are left allocated. */
void rqs_st_tab_free_all(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	struct st_xtab *x = xtab_of(l, t);
	bool no_maps = false, have_pool = false, tried = false;

	while (x) {
		struct st_xtab *next = x->older;

		if (x->t.pooled && !tried) {
			no_maps = rqs_st_no_maps_begin();
			have_pool = !no_maps && pool_lock();
			tried = true;
		}
		if (!x->t.pooled || no_maps) {
			rqspin_free_nolock(x);
		} else if (have_pool) {
			if (!(atomic_load_explicit(&x->t.seq, memory_order_relaxed) & 1))
				tab_write_begin(&x->t);
			pool_put(x);
		}
		x = next;
	}
	if (have_pool)
		pool_unlock();
	if (tried)
		rqs_st_no_maps_end();
}

void rqs_st_pool_drain(void)
{
	if (!pool_lock())
		return;
	for (unsigned c = 0; c < POOL_CLASSES; c++) {
		while (pool.head[c]) {
			struct st_xtab *x = pool.head[c];

			pool.head[c] = x->older;
			rqspin_free_nolock(x);
		}
	}
	atomic_store_explicit(&pool.bytes, 0, memory_order_relaxed);
	pool_unlock();
}

void rqs_st_tab_insert(struct st_local *l, struct st_elem *e, uint64_t key)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);

	tab_write_begin(t);
	tab_put(t, key, e);
	tab_write_end(t);
}

void rqs_st_tab_remove(struct st_local *l, struct st_elem *e, const struct rqspin_storage_map *hint)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	uint32_t mask = t->mask;
	uint32_t i = hint ? st_key_home(hint->key, mask) : 0;

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		if (atomic_load_explicit(&t->slot[i].elem, memory_order_relaxed) == e) {
			tab_write_begin(t);
			tab_delete_at(t, i);
			tab_write_end(t);
			tab_maybe_shrink(l, t);
			return;
		}
	}
}

void rqs_st_storage_insert(struct st_local *l, struct st_elem *e, uint64_t key)
{
	if (e == l->first)
		/* relaxed: read only under the storage's lock, which we hold;
		 * lock-free readers go by e->map. */
		atomic_fetch_or_explicit(&l->flags, ST_FIRST_IN, memory_order_relaxed);
	else
		rqs_st_tab_insert(l, e, key);
}

void rqs_st_storage_remove(struct st_local *l, struct st_elem *e, const struct rqspin_storage_map *hint)
{
	if (e == l->first)
		atomic_fetch_and_explicit(&l->flags, ~ST_FIRST_IN, memory_order_relaxed);
	else
		rqs_st_tab_remove(l, e, hint);
}

void rqs_st_tab_release_all(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);

	if (t == ST_EMPTY_TAB)
		return;

	tab_write_begin(t);
	for (uint32_t i = 0; i <= t->mask; i++)
		tab_set(t, i, 0, NULL);
	t->live = 0;
	tab_write_end(t);
	/* The tables stay until the storage's deferred free
	 * (rqs_st_tab_free_all). */
}
