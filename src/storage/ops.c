/* SPDX-License-Identifier: MIT */
/*
 * get / update / lookup_copy / delete. Every path runs inside a read-side
 * section, which keeps the storage, its table and the elements it reaches
 * allocated while it looks at them, locks them, or returns them.
 */
#include <stdlib.h>
#include <string.h>

#include "storage/internal.h"

#ifdef RQSPIN_STORAGE_TEST_HOOKS
void (*rqs_st_test_hook)(unsigned where, struct st_elem *e);
#endif

static inline uintptr_t owner_word(struct rqspin_storage_owner *owner)
{
	/* acquire: pairs with the release CAS that published the storage
	 * (create_elem), so its lock, inline table and embedded element's
	 * value are seen initialised. */
	return __atomic_load_n((uintptr_t *)&owner->storage_, __ATOMIC_ACQUIRE);
}

static inline struct st_local *owner_local(struct rqspin_storage_owner *owner)
{
	return st_local_of(owner_word(owner));
}

/* Lock-free probes before lookup_locked takes over: a writer's section
 * is a few stores (a backward shift at most a few dozen), so this many
 * only run out when the writer was preempted, or when it is the code that
 * this signal handler interrupted. */
#define ST_PROBE_TRIES 128

/* Probe l's index under its lock. Caller is in a read section. */
static struct st_elem *lookup_locked(struct rqspin_storage_map *m, struct st_local *l,
				     int *err)
{
	struct st_elem *e = NULL;
	int ret = rqspin_lock(&l->lock);

	if (!st_lock_ok(ret)) {
		*err = ret;
		return NULL;
	}
	if (!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_GONE))
		e = st_find_locked(l, m);
	rqs_st_local_unlock(l);
	return e;
}

/* The map side: l's element in m's bucket list, lock-free (the list is
 * walked under RCU, rqs_st_link_map publishes with release). An element has
 * map set while it is linked; a walker on an unlinked one goes on. A
 * destroyed owner's element may still be on the list with its storage
 * side done (its cleanup could not take the bucket lock; see unlink.c),
 * while its storage is freed and the address reused by l: such an element
 * is never l's, whatever its local says. For the rare reader that cannot
 * take the storage's lock (AA: a handler that interrupted this thread's
 * change of l's index): the list may be long (every owner of the map), but
 * nothing on it can fail. */
static struct st_elem *lookup_bucket(struct rqspin_storage_map *m, struct st_local *l)
{
	struct st_bucket *b = st_bucket_of(m, l);
	/* acquire (head and bnext): pair with the release in rqs_st_link_map. */
	struct st_elem *e = atomic_load_explicit(&b->head, memory_order_acquire);

	for (; e; e = atomic_load_explicit(&e->bnext, memory_order_acquire)) {
		/* relaxed: map was set after local (rqs_st_link_map, before
		 * e's release on this list) and is only cleared later. A
		 * leftover's ST_STORAGE_UNLINKED was set before its storage
		 * was freed, which is before l was allocated at that address
		 * and published to us (the owner word's acquire): seen. */
		if (e->local == l && atomic_load_explicit(&e->map, memory_order_relaxed) == m &&
		    !(atomic_load_explicit(&e->state, memory_order_relaxed) & ST_STORAGE_UNLINKED))
			return e;
	}
	return NULL;
}

/* The owner's element of m, or NULL with *err 0 (absent) or a lock error.
 * Caller is in a read section, which keeps the element allocated. */
static struct st_elem *lookup(struct rqspin_storage_map *m, struct rqspin_storage_owner *owner,
			      int *err)
{
	uintptr_t w = owner_word(owner);
	struct st_local *l;
	struct st_elem *e;

	*err = 0;
	if (RQS_LIKELY(w & ST_OWNER_EMB)) {
		e = st_embedded_of(w);

		/* relaxed: the value was initialised before the storage was
		 * published (acquired above); map is only set once e is
		 * linked, and cleared when it is unlinked. */
		if (atomic_load_explicit(&e->map, memory_order_relaxed) == m)
			return e;
	}
	if (!w)
		return NULL;
	l = st_local_of(w);
	for (int n = 0; n < ST_PROBE_TRIES; n++) {
		e = st_tab_probe(l, st_local_tab(l), m->key);
		if (RQS_LIKELY(e != ST_RETRY))
			return e;
		caa_cpu_relax();
	}
	e = lookup_locked(m, l, err);
	if (!e && *err == -EDEADLK) {
		*err = 0;
		e = lookup_bucket(m, l);
	}
	return e;
}

/* Initialise an element that nobody can see yet (relaxed stores). */
static void elem_init(struct st_elem *e, struct rqspin_storage_map *m, const void *init,
		      uint32_t state)
{
	atomic_store_explicit(&e->bnext, NULL, memory_order_relaxed);
	e->bpprev = NULL;
	e->local = NULL;
	atomic_store_explicit(&e->state, state, memory_order_relaxed);
	rqspin_lock_init(&e->lock);
	atomic_store_explicit(&e->map, m, memory_order_relaxed);
	if (init)
		memcpy(e->data, init, m->value_size);
	else
		memset(e->data, 0, m->value_size);
}

static struct st_elem *elem_alloc(struct rqspin_storage_map *m, const void *init)
{
	struct st_elem *e;

	if (m->flags & RQSPIN_STORAGE_MAP_F_MALLOC) {
		e = malloc(m->elem_size);
		if (e)
			elem_init(e, m, init, ST_FROM_MALLOC);
	} else {
		e = rqspin_malloc_nolock(m->elem_size, 0);
		if (e)
			elem_init(e, m, init, 0);
	}
	return e;
}

/* A new storage for owner; when m's elements are small and come from
 * rqspin_malloc_nolock, m's element for this owner is allocated with it
 * as its first element (*emb, initialised from init; see ST_EMB_LIVE). */
static struct st_local *local_alloc(struct rqspin_storage_owner *owner,
				    struct rqspin_storage_map *m, const void *init,
				    struct st_elem **emb)
{
	bool embed = !(m->flags & RQSPIN_STORAGE_MAP_F_MALLOC) && m->elem_size <= ST_EMBED_MAX;
	/* Without a first element the storage carries its own rcu_head and
	 * an inline table (ST_LOCAL_SIZE_BARE). */
	struct st_local *l = rqspin_malloc_nolock(embed ? ST_LOCAL_SIZE : ST_LOCAL_SIZE_BARE, 0);
	struct st_elem *e = NULL;

	*emb = NULL;
	if (l && embed) {
		e = rqspin_malloc_nolock(m->elem_size, 0);
		if (!e) {
			rqspin_free_nolock(l);
			l = NULL;
		}
	}
	if (!l)
		return NULL;
	/* Not visible to anyone yet: relaxed initialisation. */
	rqspin_lock_init(&l->lock);
	atomic_store_explicit(&l->flags, embed ? ST_EMB_LIVE : 0, memory_order_relaxed);
	atomic_store_explicit(&l->owner, owner, memory_order_relaxed);
	l->first = e;
	if (e) {
		/* No index until a second value comes. */
		atomic_store_explicit(&l->tab, ST_EMPTY_TAB, memory_order_relaxed);
	} else {
		struct st_tab *t = st_local_bare_tab(l);

		atomic_store_explicit(&t->seq, 0, memory_order_relaxed);
		t->mask = ST_BARE_SLOTS - 1;
		t->live = 0;
		t->pooled = 0;
		atomic_store_explicit(&t->owner, l, memory_order_relaxed);
		for (unsigned i = 0; i < ST_BARE_SLOTS; i++) {
			atomic_store_explicit(&t->slot[i].key, 0, memory_order_relaxed);
			atomic_store_explicit(&t->slot[i].elem, NULL, memory_order_relaxed);
		}
		atomic_store_explicit(&l->tab, t, memory_order_relaxed);
	}
	if (e) {
		elem_init(e, m, init, ST_EMBEDDED);
		/* Before publication: the owner word will point at e, and
		 * st_local_of() finds the storage through it. */
		e->local = l;
		/* Set when linked: the lookup's first check must not find
		 * it before (or if it never is). */
		atomic_store_explicit(&e->map, NULL, memory_order_relaxed);
		*emb = e;
	}
	return l;
}

/* Free a storage that was never published (and its first element). */
static void local_free_unpublished(struct st_local *l)
{
	if (l->first)
		rqspin_free_nolock(l->first);
	rqspin_free_nolock(l);
}

/*
 * Create m's element for owner, or find the one created meanwhile
 * (*existed). 0 with *out set, or an error. Caller is in a read section.
 */
static int create_elem(struct rqspin_storage_map *m, struct rqspin_storage_owner *owner,
		       const void *init, struct st_elem **out, bool *existed)
{
	struct st_elem *e = NULL; /* allocated on its own, not published */
	int ret = -ENOENT;

	*existed = false;
	/* A second round only when another thread published a storage first,
	 * or destroyed the owner (then the tombstone ends it); more would take
	 * an owner zeroed for reuse while in use, which is misuse: give up
	 * after a few. */
	for (int round = 0; round < 4; round++) {
		uintptr_t w = owner_word(owner);
		struct st_local *l = st_local_of(w);
		struct st_elem *ne, *found;
		bool inserted = false;

		if (w == ST_OWNER_DEAD) {
			ret = -EIDRM;
			break;
		}
		if (!l) {
			uintptr_t expect = 0;

			l = local_alloc(owner, m, init, &ne);
			if (!l) {
				ret = -ENOMEM;
				break;
			}
			/* Locked before publication, so nobody works on it
			 * until the element is in (a fresh lock: fast path). */
			ret = rqspin_lock(&l->lock);
			if (!st_lock_ok(ret)) {
				local_free_unpublished(l);
				break;
			}
			/* release: publishes l's initialisation (and the
			 * first element's). With a first element, the word
			 * points at it (the inline lookup's fixed offsets). */
			if (!__atomic_compare_exchange_n((uintptr_t *)&owner->storage_, &expect,
							 ne ? (uintptr_t)ne | ST_OWNER_EMB
							    : (uintptr_t)l,
							 false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				rqspin_unlock(&l->lock);
				local_free_unpublished(l);
				ret = -ENOENT;
				continue;
			}
			if (!ne) {
				/* Not embeddable: allocate under the fresh lock. */
				if (!e)
					e = elem_alloc(m, init);
				if (!e) {
					rqs_st_local_unlock(l);
					ret = -ENOMEM;
					break;
				}
				ne = e;
			}
		} else {
			if (!e)
				e = elem_alloc(m, init);
			if (!e) {
				ret = -ENOMEM;
				break;
			}
			ne = e;
			ret = rqspin_lock(&l->lock);
			if (!st_lock_ok(ret))
				break;
		}
		/* Under the storage lock from here. */
		ret = -EIDRM; /* gone: destroyed since we read the owner word */
		found = NULL;
		if (!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_GONE)) {
			found = st_find_locked(l, m);
			/* (The first element needs no room in the index.) */
			ret = found || ne == l->first ? 0 : rqs_st_tab_reserve(l);
		}
		if (ret == 0 && !found) {
			/* (A first element got it before publication, and
			 * others read it since: no second store.) */
			if (ne == e)
				ne->local = l;
			/* Map side first: once ne is in the index, a delete may
			 * unlink it from both sides. */
			ret = rqs_st_link_map(ne, m);
			if (ret == 0)
				ST_TEST_HOOK(ST_HOOK_LINKED, ne);
		}
		if (ret == 0 && !found) {
			/* ne->map was set by rqs_st_link_map (and may be NULL
			 * again: m's destroy unlinked ne meanwhile, and takes
			 * it out of the storage once we unlock). ne's value was
			 * published with the storage (embedded) or is by the
			 * slot's release store (separate). */
			rqs_st_storage_insert(l, ne, m->key);
			inserted = true;
		} else if (ne != e) {
			rqs_st_release_embedded(l); /* never linked; not CLEANED yet */
		}
		/* The owner destroyed meanwhile (a handler that interrupted
		 * us, or a racing thread): its cleanup, done by this unlock or
		 * before it, took whatever we inserted; do not hand it out. */
		if (rqs_st_local_unlock(l) && !ret)
			ret = -EIDRM;
		if (inserted && ne == e)
			e = NULL; /* the index's (or the cleanup's) now */
		if (ret)
			break;
		if (found) {
			*out = found;
			*existed = true;
		} else {
			*out = ne;
		}
		if (e && e != *out)
			rqs_st_free_elem_now(e); /* never published */
		return 0;
	}
	if (e)
		rqs_st_free_elem_now(e);
	return ret;
}

/* get's slow path: misses, creation, a table being rewritten, and errors,
 * in a read section. */
static __attribute__((noinline, cold)) void *get_slow(struct rqspin_storage_map *map,
						    struct rqspin_storage_owner *owner,
						    const void *init, unsigned flags, int *err)
{
	struct st_elem *e = NULL;
	bool existed;
	int ret = 0;

	if (!map || !owner || (flags & ~RQSPIN_STORAGE_F_CREATE))
		ret = -EINVAL;
	if (!ret) {
		st_read_lock();
		e = lookup(map, owner, &ret);
		if (!e && !ret) {
			if (flags & RQSPIN_STORAGE_F_CREATE)
				ret = create_elem(map, owner, init, &e, &existed);
			else
				ret = -ENOENT;
		}
		st_read_unlock();
	}
	if (err)
		*err = ret;
	return ret ? NULL : e->data;
}

/*
 * The out-of-line part of the inline rqspin_storage_get (storage.h): a hit
 * in the owner's index (every value but the first, which the inline part
 * checked through the owner word), without a
 * read-side section, like the inline part; get_slow for everything else.
 * What may be read here without a section: the owner word, the storage and
 * its tables, which all live until the owner is destroyed (st_xtab), and
 * no element (the index holds the keys). The element returned was the
 * owner's value for map at a point of the call (st_tab_probe validates
 * the snapshot); the lifetime rules of storage.h say how long it stays
 * valid: to the end of the caller's own section, or while nobody deletes
 * it.
 */
RQSPIN_API void *rqspin__storage_get_slow(struct rqspin_storage_map *map,
					  struct rqspin_storage_owner *owner, const void *init,
					  unsigned flags, int *err)
{
	if (RQS_LIKELY(map && owner && flags <= RQSPIN_STORAGE_F_CREATE)) {
		uintptr_t w = owner_word(owner);

		if (RQS_LIKELY(w)) {
			struct st_local *l = st_local_of(w);
			struct st_elem *e = st_tab_probe(l, st_local_tab(l), map->key);

			if (RQS_LIKELY(e && e != ST_RETRY)) {
				if (err)
					*err = 0;
				return e->data;
			}
		}
	}
	return get_slow(map, owner, init, flags, err);
}

static int copy_locked(struct st_elem *e, void *dst, const void *src, size_t n)
{
	int ret = rqspin_lock(&e->lock);

	if (!st_lock_ok(ret))
		return ret;
	memcpy(dst, src, n);
	rqspin_unlock(&e->lock);
	return 0;
}

RQSPIN_API int rqspin_storage_update(struct rqspin_storage_map *map,
				     struct rqspin_storage_owner *owner, const void *value,
				     unsigned flags)
{
	struct st_elem *e;
	bool existed = true;
	int ret;

	if (!map || !owner || !value || flags > RQSPIN_STORAGE_EXIST)
		return -EINVAL;
	st_read_lock();
	e = lookup(map, owner, &ret);
	if (ret)
		goto out;
	if (!e) {
		if (flags == RQSPIN_STORAGE_EXIST)
			ret = -ENOENT;
		else
			ret = create_elem(map, owner, value, &e, &existed);
		if (ret || !existed)
			goto out;
	}
	if (flags == RQSPIN_STORAGE_NOEXIST)
		ret = -EEXIST;
	else
		ret = copy_locked(e, e->data, value, map->value_size);
out:
	st_read_unlock();
	return ret;
}

RQSPIN_API int rqspin_storage_lookup_copy(struct rqspin_storage_map *map,
					  struct rqspin_storage_owner *owner, void *out)
{
	struct st_elem *e;
	int ret = -ENOENT;

	if (!map || !owner || !out)
		return -EINVAL;
	st_read_lock();
	e = lookup(map, owner, &ret);
	if (e)
		ret = copy_locked(e, out, e->data, map->value_size);
	else if (!ret)
		ret = -ENOENT;
	st_read_unlock();
	return ret;
}

RQSPIN_API rqspinlock_t *rqspin_storage_value_lock(void *value)
{
	return value ? &st_elem_of(value)->lock : NULL;
}

RQSPIN_API int rqspin_storage_delete(struct rqspin_storage_map *map,
				     struct rqspin_storage_owner *owner)
{
	struct st_local *l;
	struct st_bucket *b;
	struct st_elem *e;
	uint32_t state;
	int ret = -ENOENT;

	if (!map || !owner)
		return -EINVAL;
	st_read_lock();
	l = owner_local(owner);
	/* Absent: answer without locking (ST_RETRY: find out under the lock).
	 * relaxed: a stale first-element map only costs the lock. */
	if (!l || ((!l->first || atomic_load_explicit(&l->first->map, memory_order_relaxed) != map) &&
		   !st_tab_probe(l, st_local_tab(l), map->key)))
		goto out;
	ret = rqspin_lock(&l->lock);
	if (!st_lock_ok(ret))
		goto out;
	ret = -ENOENT;
	e = NULL;
	if (!(atomic_load_explicit(&l->flags, memory_order_relaxed) & ST_GONE))
		e = st_find_locked(l, map);
	if (e) {
		b = st_bucket_of(map, l);
		ret = rqspin_lock(&b->lock);
		if (st_lock_ok(ret)) {
			/* The map side may be done already: a delete racing
			 * the map's destruction (misuse, storage.h), whose
			 * sweep unlinks every element under this lock. The
			 * storage side is still ours. relaxed: the bit is set
			 * under the bucket lock we hold. */
			if (!(atomic_load_explicit(&e->state, memory_order_relaxed) & ST_MAP_UNLINKED))
				rqs_st_unlink_map_locked(e);
			rqs_st_bucket_unlock(b);
			rqs_st_storage_remove(l, e, map);
			/* acq_rel: see rqs_st_unlink_map_locked. We did both sides. */
			state = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED,
							 memory_order_acq_rel);
			if (state & ST_MAP_UNLINKED)
				rqs_st_free_elem_rcu(e);
			ret = 0;
		}
	}
	rqs_st_local_unlock(l);
out:
	st_read_unlock();
	return ret;
}
