/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the inline rqspin_storage_get that
 * rqspin/storage.h declares and documents, and the layouts it reads.
 * Included by that header; do not include it alone. Everything here is
 * the library's: a program must not read or write these structures
 * itself. src/storage/README.md explains the design; src/storage/internal.h
 * asserts that the library's own structures match these, field by field.
 */
#ifndef RQSPIN_STATIC_STORAGE_H
#define RQSPIN_STATIC_STORAGE_H

#include <stddef.h>
#include <stdint.h>
#include <rqspin/storage.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rqspin__storage_elem;

/* The head of a map: the key that the owner's index stores for it. */
struct rqspin__storage_map_head {
	uint64_t key;
};

struct rqspin__storage_local;

/* The owner's index: this header, then mask + 1 slots. The library makes
 * seq odd while it changes the slots or the owner stamp (a seqlock), and
 * keeps it odd while the table is retired; a retired table is only ever
 * reused as an index, of the same capacity, with owner naming its new
 * storage. */
struct rqspin__storage_index {
	uint32_t seq;
	uint32_t mask;
	uint32_t live_;
	uint32_t pooled_;
	const struct rqspin__storage_local *owner;
};

struct rqspin__storage_slot {
	uint64_t key; /* the map's key, 0 when empty */
	struct rqspin__storage_elem *elem;
};

/* An owner's storage, as far as the inline lookup reads it. */
struct rqspin__storage_local {
	rqspinlock_t lock_;
	uint32_t flags_;
	void *owner_;
	const struct rqspin__storage_index *index;
};

/* A value's element; the value follows it (sizeof is the value's offset,
 * a multiple of 8). */
struct rqspin__storage_elem {
	void *bucket_[2];
	const struct rqspin__storage_local *local; /* set before publication, then fixed */
	void *rcu_[2];
	uint32_t state_;
	rqspinlock_t lock_;
	struct rqspin_storage_map *key; /* its map while linked, else NULL */
};

/*
 * The owner word points at the owner's storage, or, with RQSPIN__STORAGE_EMB
 * set, at the storage's first element, which lives, and is never reused for
 * another value, until the owner is destroyed. The storage lives until then
 * too, and an index it had is never freed while readers may probe it: it
 * is retired into a pool and only ever reused as an index.
 */
#define RQSPIN__STORAGE_EMB ((uintptr_t)1)

/* The layout stamp: every offset and size that the inline code compiles
 * in, and a revision for what they cannot show (bump it when the inline
 * lookup's protocol changes). rqspin_storage_map_create passes it, and the
 * library refuses a map to a program whose stamp differs. The _OF form
 * takes the four structures as parameters (tests/storage_layout_stamp.c
 * stamps another layout with it). */
#define RQSPIN__STORAGE_LAYOUT_REV 3u
#define RQSPIN__STORAGE_LAYOUT_OF(E, L, I, S)                                                      \
	((uint64_t)RQSPIN__STORAGE_LAYOUT_REV << 56 | (uint64_t)RQSPIN__STORAGE_EMB << 52 |         \
	 (uint64_t)offsetof(S, elem) << 48 | (uint64_t)offsetof(E, local) << 40 |                   \
	 (uint64_t)offsetof(E, key) << 32 | (uint64_t)sizeof(E) << 24 |                             \
	 (uint64_t)offsetof(L, index) << 16 | (uint64_t)sizeof(I) << 8 | (uint64_t)sizeof(S))
#define RQSPIN__STORAGE_LAYOUT                                                                     \
	RQSPIN__STORAGE_LAYOUT_OF(struct rqspin__storage_elem, struct rqspin__storage_local,       \
				  struct rqspin__storage_index, struct rqspin__storage_slot)

RQSPIN_API struct rqspin_storage_map *
rqspin__storage_map_create_checked(size_t value_size, unsigned flags, uint64_t layout);
#define rqspin_storage_map_create(value_size, flags) \
	rqspin__storage_map_create_checked((value_size), (flags), RQSPIN__STORAGE_LAYOUT)
RQSPIN_API void *rqspin__storage_get_slow(struct rqspin_storage_map *map,
					  struct rqspin_storage_owner *owner, const void *init,
					  unsigned flags, int *err);

/* The element of key in the home slot of ix, an index that l's index
 * pointer held, if a stable snapshot shows it there and ix is still l's;
 * else NULL (the library decides). */
static inline struct rqspin__storage_elem *
rqspin__storage_home_hit(const struct rqspin__storage_local *l,
			 const struct rqspin__storage_index *ix, uint64_t key)
{
	/* acquire: if seq is the end of a change, the slot loads below see
	 * it (a seqlock reader). */
	uint32_t seq = __atomic_load_n(&ix->seq, __ATOMIC_ACQUIRE);
	const struct rqspin__storage_slot *s =
		(const struct rqspin__storage_slot *)(const void *)(ix + 1) + ((uint32_t)key & ix->mask);
	/* acquire: pairs with the release store that put the element in the
	 * slot, initialised. */
	struct rqspin__storage_elem *elem = __atomic_load_n(&s->elem, __ATOMIC_ACQUIRE);

	/* acquire (key and owner too): a load that reads a change in
	 * progress makes the re-read of seq below see that change's odd
	 * seq; seq unchanged and even means the key, the element and the
	 * owner stamp are one state of the index. Another storage's stamp:
	 * the index was given up and reused since its pointer was loaded. */
	if (elem && __atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == key &&
	    __atomic_load_n(&ix->owner, __ATOMIC_ACQUIRE) == l && !(seq & 1) &&
	    __atomic_load_n(&ix->seq, __ATOMIC_RELAXED) == seq)
		return elem;
	return (struct rqspin__storage_elem *)0;
}

/*
 * A hit on the owner's first value: two dependent loads and a compare; a
 * hit in the home slot of the owner's index: five, with a seqlock check
 * and the index's owner stamp. No call and no read-side section (nothing
 * read here is freed before the owner is destroyed; an index the owner
 * gave up meanwhile is only ever reused as an index), so a loop over many
 * owners keeps several cache misses in flight. Everything else goes to
 * the library.
 */
static inline void *rqspin_storage_get(struct rqspin_storage_map *map,
				       struct rqspin_storage_owner *owner, const void *init,
				       unsigned flags, int *err)
{
	if (__builtin_expect(map != NULL && owner != NULL && flags <= RQSPIN_STORAGE_F_CREATE,
			     1)) {
		/* acquire: pairs with the release CAS that published the
		 * storage, so the storage, its first index and the first
		 * value, all written before, are seen initialised. */
		uintptr_t w = (uintptr_t)__atomic_load_n(&owner->storage_, __ATOMIC_ACQUIRE);
		const struct rqspin__storage_local *l;

		if (__builtin_expect((w & RQSPIN__STORAGE_EMB) != 0, 1)) {
			struct rqspin__storage_elem *e =
				(struct rqspin__storage_elem *)(w & ~RQSPIN__STORAGE_EMB);

			/* relaxed: the value was initialised before the
			 * storage's publication (covered by the acquire
			 * above); the key goes from NULL to the map once the
			 * value is linked, and back to NULL for good when it
			 * is deleted; no other value ever takes the element,
			 * so seeing the map means this value. */
			if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) == map) {
				if (err)
					*err = 0;
				return e + 1;
			}
			/* Written before the publication, never changed. */
			l = e->local;
		} else {
			l = (const struct rqspin__storage_local *)w;
		}
		if (__builtin_expect(l != NULL, 1)) {
			/* acquire: pairs with the release store that installed
			 * a grown index, filled before. */
			struct rqspin__storage_elem *elem = rqspin__storage_home_hit(
				l, __atomic_load_n(&l->index, __ATOMIC_ACQUIRE),
				((const struct rqspin__storage_map_head *)(const void *)map)->key);

			if (elem) {
				if (err)
					*err = 0;
				return elem + 1;
			}
		}
	}
	return rqspin__storage_get_slow(map, owner, init, flags, err);
}

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_STATIC_STORAGE_H */
