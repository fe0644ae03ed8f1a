/* SPDX-License-Identifier: MIT */
/*
 * The per-owner index: open addressing by map id, linear probing,
 * tombstones. Readers probe without locks (st_tab_find), so a slot only
 * ever changes from empty to an element, from an element to a tombstone,
 * or from a tombstone to an element; a reader that probes past a slot while
 * it changes finds what it looks for, or correctly misses an element that
 * is being inserted or removed concurrently. Everything here runs under the
 * storage's lock.
 *
 * Rebuilding (to grow, or to drop tombstones) fills a new table and
 * publishes it with one release store; the old one is freed after a grace
 * period. The inline table (2 slots, inside st_local) is never freed: when
 * an owner is left without elements it goes back to it, cleared, and stale
 * readers of it can only see elements or empty slots.
 */
#include <string.h>

#include "storage/internal.h"

/* Entries (live + tombstones) a table of cap slots may hold: full for the
 * tiny tables (a probe is at most 4 slots), 3/4 otherwise. */
static inline uint32_t tab_limit(uint32_t cap)
{
	return cap <= 4 ? cap : cap - cap / 4;
}

static void tab_put(struct st_tab *t, struct st_elem *e, uint32_t id)
{
	uint32_t mask = t->mask;
	uint32_t i = id & mask;

	for (;;) {
		struct st_elem *cur = atomic_load_explicit(&t->slot[i], memory_order_relaxed);

		if (!cur || cur == ST_TOMB) {
			if (!cur)
				t->used++;
			t->live++;
			/* release: the element's header and value are written
			 * before readers can find it (st_tab_find's acquire). */
			atomic_store_explicit(&t->slot[i], e, memory_order_release);
			return;
		}
		i = (i + 1) & mask;
	}
}

/* Element whose map side is done (map_destroy unlinked it but could not
 * take our lock): finish the storage side now that we hold it. */
static bool reap_zombie(struct st_elem *e)
{
	uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);

	if (!(st & ST_MAP_UNLINKED))
		return false;
	/* acq_rel: orders our unlink before the free decision of the other
	 * side, and theirs before ours. */
	st = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED, memory_order_acq_rel);
	if (st & ST_MAP_UNLINKED)
		st_free_elem_rcu(e);
	return true;
}

/* Copy the live entries of old into t (empty, mask set). */
static void tab_fill(struct st_tab *t, struct st_tab *old)
{
	for (uint32_t i = 0; i <= old->mask; i++) {
		struct st_elem *e = atomic_load_explicit(&old->slot[i], memory_order_relaxed);
		struct rqspin_storage_map *m;

		if (!e || e == ST_TOMB)
			continue;
		m = atomic_load_explicit(&e->map, memory_order_relaxed);
		if (!m && reap_zombie(e))
			continue;
		/* A cleared map whose state bit is not set yet: map_destroy is
		 * between the two stores and will finish the storage side (it
		 * finds e by scanning, any slot will do). */
		tab_put(t, e, m ? m->id : 0);
	}
}

static bool tab_is_inline(struct st_local *l, struct st_tab *t)
{
	return t == &l->itab;
}

static void tab_release(struct st_local *l, struct st_tab *t)
{
	if (!tab_is_inline(l, t))
		st_free_xtab_rcu(caa_container_of(t, struct st_xtab, t));
}

int st_tab_reserve(struct st_local *l)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	uint32_t need, cap;
	struct st_xtab *x;

	/* Room: an empty slot under the limit, or a tombstone to reuse
	 * (tab_put takes the first of either on the probe path). */
	if (t->used < tab_limit(t->mask + 1) || t->used > t->live)
		return 0;
	need = (uint32_t)t->live + 1;
	if (need <= ST_INLINE_SLOTS && !tab_is_inline(l, t)) {
		struct st_tab *it = &l->itab;

		/* Back to the inline table. Readers still holding it from
		 * before it was replaced see elements or empty slots. */
		for (uint32_t i = 0; i < ST_INLINE_SLOTS; i++)
			atomic_store_explicit(&it->slot[i], NULL, memory_order_relaxed);
		it->used = 0;
		it->live = 0;
		tab_fill(it, t);
		/* release: the slots above before the table pointer. */
		atomic_store_explicit(&l->tab, it, memory_order_release);
		tab_release(l, t);
		return 0;
	}
	cap = 4;
	while (tab_limit(cap) < 2 * need && cap < ST_TAB_MAX_CAP)
		cap <<= 1;
	if (tab_limit(cap) < need)
		return -ENOMEM; /* 49152 elements per owner: cannot happen with the map limit */
	x = rqspin_malloc_nolock(sizeof(*x) + cap * sizeof(x->t.slot[0]), RQSPIN_ALLOC_ZERO);
	if (!x)
		return -ENOMEM;
	x->t.mask = cap - 1;
	tab_fill(&x->t, t);
	/* release: the filled slots before the table pointer. */
	atomic_store_explicit(&l->tab, &x->t, memory_order_release);
	tab_release(l, t);
	return 0;
}

void st_tab_insert(struct st_local *l, struct st_elem *e)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);

	tab_put(t, e, atomic_load_explicit(&e->map, memory_order_relaxed)->id);
}

void st_tab_remove(struct st_local *l, struct st_elem *e, const struct rqspin_storage_map *hint)
{
	struct st_tab *t = atomic_load_explicit(&l->tab, memory_order_relaxed);
	uint32_t mask = t->mask;
	uint32_t i = hint ? hint->id & mask : 0;

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		if (atomic_load_explicit(&t->slot[i], memory_order_relaxed) != e)
			continue;
		/* relaxed: a tombstone publishes nothing. */
		atomic_store_explicit(&t->slot[i], ST_TOMB, memory_order_relaxed);
		t->live--;
		break;
	}
	if (t->live == 0 && !tab_is_inline(l, t)) {
		struct st_tab *it = &l->itab;

		for (uint32_t k = 0; k < ST_INLINE_SLOTS; k++)
			atomic_store_explicit(&it->slot[k], NULL, memory_order_relaxed);
		it->used = 0;
		it->live = 0;
		/* release: the cleared slots before the pointer. */
		atomic_store_explicit(&l->tab, it, memory_order_release);
		tab_release(l, t);
	}
}
