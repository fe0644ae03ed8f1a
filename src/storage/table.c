/* SPDX-License-Identifier: MIT */
/*
 * The per-owner index: open addressing by map key, linear probing,
 * deletion by backward shift. Everything here runs under the storage's
 * lock; lock-free readers (st_tab_probe, and the inline lookup of
 * storage.h) validate their snapshot with the table's seq, which every
 * change of a published table bumps to odd before and to even after.
 *
 * Growing fills a new table (unpublished: no seq needed) and publishes it
 * with one release store. The old one stays allocated until the storage is
 * freed (st_xtab), because readers do not hold a read-side section: a
 * reader that still probes it sees the state it had when it was replaced,
 * which is a state the index had during the reader's call. Since nothing
 * is ever freed under a reader, a table never shrinks either.
 */
#include <string.h>

#include "storage/internal.h"

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

int rqs_st_tab_reserve(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	uint32_t cap = t == ST_EMPTY_TAB ? ST_TAB_FIRST_CAP : (t->mask + 1) * 2;
	struct st_xtab *x;

	if (t != ST_EMPTY_TAB && t->live < tab_limit(t->mask + 1))
		return 0;
	if (cap > ST_TAB_MAX_CAP)
		return -ENOMEM; /* 49152 elements per owner: cannot happen with the map limit */
	/* Zeroed: seq 0, every slot empty. */
	x = rqspin_malloc_nolock(sizeof(*x) + cap * sizeof(x->t.slot[0]), RQSPIN_ALLOC_ZERO);
	if (!x)
		return -ENOMEM;
	x->t.mask = cap - 1;
	x->older = xtab_of(l, t);
	tab_fill(&x->t, t);
	/* release: the filled slots before the table pointer (readers load
	 * it with acquire, st_local_tab). */
	atomic_store_explicit(&l->tab, &x->t, memory_order_release);
	return 0;
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
	/* The grown tables stay until the storage's deferred free, which
	 * frees them with it. */
}
