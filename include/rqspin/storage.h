/* SPDX-License-Identifier: MIT */
/*
 * Object-local storage: per-object values that a program attaches to its
 * own objects (connections, requests, sessions), the userspace counterpart
 * of BPF task/socket local storage.
 *
 * A *map* describes one kind of value (its size). An *owner* is any object
 * of the program that embeds a struct rqspin_storage_owner (one pointer,
 * zero-initialised = no storage). rqspin_storage_get(map, owner, ...)
 * returns the owner's value for that map, optionally creating it.
 *
 *   struct conn { int fd; struct rqspin_storage_owner st; };
 *   struct rqspin_storage_map *m = rqspin_storage_map_create(sizeof(struct stats), 0);
 *   struct stats *s = rqspin_storage_get(m, &c->st, NULL, RQSPIN_STORAGE_F_CREATE, &err);
 *   ...
 *   rqspin_storage_owner_destroy(&c->st);   // before freeing c
 *
 * Errors are negative errno values:
 *   -EINVAL     NULL map or owner, bad flags, zero or oversized value size;
 *   -ENOENT     no value for this (map, owner) (a destroyed owner has none);
 *   -EIDRM      a value would have to be created on an owner whose
 *               rqspin_storage_owner_destroy has started (see there), or in
 *               a map whose rqspin_storage_map_destroy has started;
 *   -EEXIST     rqspin_storage_update with RQSPIN_STORAGE_NOEXIST found one;
 *   -ENOMEM     out of memory (rqspin_malloc_nolock returned NULL);
 *   -EDEADLK    a lock could not be taken without deadlocking, e.g. a signal
 *               handler interrupted an update of the same owner on this
 *               thread (the resilient locks of rqspinlock.h report it);
 *   -ETIMEDOUT  a lock made no progress within the rqspinlock timeout.
 * Nothing is changed when an error is returned.
 *
 * Lifetime of a value pointer (RCU rules). A value is freed only after a
 * grace period that follows its deletion (rqspin_storage_delete, the
 * owner's or the map's destruction). A pointer returned by
 * rqspin_storage_get therefore stays valid
 *   - until the end of the enclosing rqspin_storage_read_lock() section, if
 *     the caller holds one, whatever other threads delete meanwhile; or
 *   - without a read-side section, for as long as the caller knows that
 *     nobody deletes that value (e.g. only this thread deletes values of
 *     this owner, and it has not).
 * Reading or writing the value itself is not synchronised by the library:
 * use rqspin_storage_update / rqspin_storage_lookup_copy (which copy under
 * the value's own lock, BPF_F_LOCK's counterpart) or take
 * rqspin_storage_value_lock() around your own accesses.
 *
 * Threads need no registration: the storage uses liburcu's "bulletproof"
 * flavour (liburcu-bp), which registers a thread on its first read-side
 * section and unregisters it when it exits. The program may use liburcu
 * itself, on the same threads, in any order: another flavour (memb, mb,
 * qsbr, signal) keeps its own registry and grace periods, untouched by
 * this library; liburcu-bp's own rcu_register_thread is idempotent, and
 * the program's bp sections may nest with ours either way.
 *
 * Async-signal-safety is stated per function. "Async-signal-safe" means the
 * function may be called from a signal handler that interrupted any code of
 * this thread, including a call of this API on the same owner or map: it
 * then returns -EDEADLK (or succeeds), it never deadlocks. Creating a value
 * in a map made with RQSPIN_STORAGE_MAP_F_MALLOC is the exception (malloc).
 *
 * ThreadSanitizer: liburcu is not instrumented, so a program built with
 * -fsanitize=thread gets reports from inside liburcu's call_rcu bookkeeping;
 * run it with TSAN_OPTIONS=suppressions=<prefix>/share/rqspin/tsan-liburcu.supp
 * (installed with the library), which silences only those.
 *
 * Memory: an owner with one small value costs a 96-byte storage plus the
 * value's element (56 bytes + the value, rounded up to 8). An owner's
 * index grows (16 bytes a slot, doubling, kept at 3/4 full) when it holds
 * more than 2 values, and keeps its largest size, and the smaller tables
 * it replaced, until the owner is destroyed: lock-free readers may still
 * be probing them (10 KiB besides the values for an owner that once had
 * 100 values; 1.3 KiB for 16).
 *
 * Contract (as in the kernel): do not use a map while or after it is
 * destroyed, and do not use an owner after its destruction returned (the
 * program may free it); owner and map destruction may race with each other
 * and with anything on other owners and maps. Two races are made safe all
 * the same: a creation racing the owner's destruction (from another thread
 * before destroy returns, or in a signal handler that interrupted either)
 * ends in -EIDRM or in a value that the destruction frees, never in a
 * value left behind; and a creation racing map_destroy gets -EIDRM or a
 * value that map_destroy frees. A call that may race an owner's
 * destruction (on another thread, or interrupted by a handler that
 * destroys the owner) must run inside a read-side section
 * (rqspin_storage_read_lock): rqspin_storage_get reads the owner's storage
 * without one, and only a section keeps it allocated while a destruction
 * frees it. Storage is not usable in the child of fork() unless
 * exec follows (liburcu's registrations and call_rcu worker do not survive
 * fork).
 */
#ifndef RQSPIN_STORAGE_H
#define RQSPIN_STORAGE_H

#include <stddef.h>
#include <stdint.h>
#include <rqspin/lock_common.h>
#include <rqspin/rqspinlock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Embed in the owner object. Zero (RQSPIN_STORAGE_OWNER_INIT, or memset)
 * means "no storage". Never touch the member; it is the library's. */
struct rqspin_storage_owner {
	void *storage_;
};
#define RQSPIN_STORAGE_OWNER_INIT { 0 }

struct rqspin_storage_map;

/* rqspin_storage_map_create flags. */
/* Values come from the process allocator (malloc/free, i.e. jemalloc when
 * it is linked) instead of rqspin_malloc_nolock. Creating a value of such
 * a map (get with F_CREATE, update) is then NOT async-signal-safe; every
 * other call keeps its guarantees (values are freed on a worker thread). */
#define RQSPIN_STORAGE_MAP_F_MALLOC 0x1u

/* rqspin_storage_get flags. */
/* Create the value if the owner has none: zeroed, or copied from init. */
#define RQSPIN_STORAGE_F_CREATE 0x1u

/* rqspin_storage_update flags (BPF_ANY / BPF_NOEXIST / BPF_EXIST). */
#define RQSPIN_STORAGE_ANY 0x0u     /* create or overwrite */
#define RQSPIN_STORAGE_NOEXIST 0x1u /* create only; -EEXIST if present */
#define RQSPIN_STORAGE_EXIST 0x2u   /* overwrite only; -ENOENT if absent */

/* Largest value size (the kernel's limit is about 64 KiB as well). */
#define RQSPIN_STORAGE_MAX_VALUE_SIZE (65536u - 64u)
/* Largest number of maps alive at once in the process. */
#define RQSPIN_STORAGE_MAX_MAPS 32768u

/*
 * Create a map whose values are value_size bytes (1..MAX_VALUE_SIZE),
 * 8-byte aligned. flags: 0 or RQSPIN_STORAGE_MAP_F_MALLOC.
 * Returns the map, or NULL with errno set: EINVAL (size or flags), ENOMEM,
 * ENOSPC (RQSPIN_STORAGE_MAX_MAPS maps exist), ELIBBAD (the program was
 * compiled against a storage.h whose inline rqspin_storage_get reads a
 * layout other than this library's, e.g. headers of another librqspin
 * version: the library also prints both layout stamps to stderr; rebuild
 * the program against the headers of the library it runs with).
 * A call in the program goes through the macro below, which passes the
 * header's layout stamp; the function itself (its address, dlsym) checks
 * nothing, for callers that do not use the inline rqspin_storage_get.
 * NOT async-signal-safe (malloc, a mutex; the first call starts liburcu's
 * call_rcu worker thread, so that later frees are safe from handlers).
 */
RQSPIN_API struct rqspin_storage_map *rqspin_storage_map_create(size_t value_size,
								 unsigned flags);

/*
 * Destroy a map: every owner's value of this map is removed and freed.
 * Cannot fail and leaks nothing; owners may be destroyed concurrently.
 * Does not wait for a grace period: the values and the map itself are
 * freed after one, on liburcu's call_rcu thread (rqspin_storage_barrier
 * waits until they are). Creations in the map that race with it (misuse)
 * get -EIDRM. Its id may be reused by the next map at once. NULL is
 * ignored. NOT async-signal-safe (takes every bucket lock, retrying
 * timeouts); must not be called inside a read-side section (aborts with a
 * message).
 */
RQSPIN_API void rqspin_storage_map_destroy(struct rqspin_storage_map *map);

/* The map's value size. Async-signal-safe. */
RQSPIN_API size_t rqspin_storage_map_value_size(const struct rqspin_storage_map *map);

/* ABI of the inline rqspin_storage_get below; not for direct use, and
 * only valid with the library of the same SONAME (src/storage/internal.h
 * checks every offset). The owner word points at the owner's storage, or,
 * with RQSPIN__STORAGE_EMB set, at the storage's first element, which
 * lives, and is never reused for another value, until the owner is
 * destroyed. An element holds its key (its map while it is linked, else
 * NULL) at RQSPIN__STORAGE_EMB_KEY, its value at RQSPIN__STORAGE_VALUE and
 * a pointer to its storage at RQSPIN__STORAGE_ELEM_LOCAL. A storage points
 * at its index at RQSPIN__STORAGE_LOCAL_INDEX: a struct
 * rqspin__storage_index followed by mask + 1 slots, each a map's key (the
 * first 8 bytes of the map) and its element. The storage and every index
 * it ever had live until the owner is destroyed; the library makes its
 * seq odd while it changes the slots. */
#define RQSPIN__STORAGE_EMB ((uintptr_t)1)
#define RQSPIN__STORAGE_ELEM_LOCAL 16
#define RQSPIN__STORAGE_EMB_KEY 48
#define RQSPIN__STORAGE_VALUE 56
#define RQSPIN__STORAGE_LOCAL_INDEX 16
struct rqspin__storage_index {
	uint32_t seq;
	uint32_t mask;
	uint32_t live;
	uint32_t reserved;
};
struct rqspin__storage_slot {
	uint64_t key;
	void *elem;
};
/* The layout stamp: every constant above that the inline code compiles
 * in, and a revision for what the offsets cannot show (bump it when the
 * inline lookup's protocol changes). rqspin_storage_map_create passes it,
 * and the library refuses a map to a program whose stamp differs. */
#define RQSPIN__STORAGE_LAYOUT_REV 1u
#define RQSPIN__STORAGE_LAYOUT                                                                      \
	((uint64_t)RQSPIN__STORAGE_LAYOUT_REV << 56 | (uint64_t)RQSPIN__STORAGE_EMB << 48 |          \
	 (uint64_t)RQSPIN__STORAGE_ELEM_LOCAL << 40 | (uint64_t)RQSPIN__STORAGE_EMB_KEY << 32 |      \
	 (uint64_t)RQSPIN__STORAGE_VALUE << 24 | (uint64_t)RQSPIN__STORAGE_LOCAL_INDEX << 16 |       \
	 (uint64_t)sizeof(struct rqspin__storage_index) << 8 |                                      \
	 (uint64_t)sizeof(struct rqspin__storage_slot))
RQSPIN_API struct rqspin_storage_map *
rqspin__storage_map_create_checked(size_t value_size, unsigned flags, uint64_t layout);
#define rqspin_storage_map_create(value_size, flags) \
	rqspin__storage_map_create_checked((value_size), (flags), RQSPIN__STORAGE_LAYOUT)
RQSPIN_API void *rqspin__storage_get_slow(struct rqspin_storage_map *map,
					  struct rqspin_storage_owner *owner, const void *init,
					  unsigned flags, int *err);

/*
 * The owner's value for map, or NULL with *err set (err may be NULL).
 * Without RQSPIN_STORAGE_F_CREATE: lock-free lookup; -ENOENT if absent.
 * With it: creates the value when absent, zeroed or copied from init
 * (value_size bytes); a value created concurrently by another thread is
 * returned instead. -EIDRM (creation on a destroyed owner, or in a map
 * being destroyed), -ENOMEM, -EDEADLK, -ETIMEDOUT, -EINVAL as above.
 * Async-signal-safe (creation too, except for F_MALLOC maps).
 *
 * Inline: a hit on the owner's first value is two dependent loads and a
 * compare; a hit in the home slot of the owner's index (any other value,
 * unless two of the owner's maps collide there) is five, with a seqlock
 * check. No call and no read-side section: nothing read here is freed
 * before the owner is destroyed, which the caller may not race with (see
 * "Contract"). So a caller's loop over many owners keeps several cache
 * misses in flight, and 100 maps cost about what one does. Everything
 * else goes to the library.
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

		if (__builtin_expect((w & RQSPIN__STORAGE_EMB) != 0, 1)) {
			char *e = (char *)(w & ~RQSPIN__STORAGE_EMB);

			/* relaxed: the value was initialised before the
			 * storage's publication (covered by the acquire
			 * above); the key goes from NULL to the map once the
			 * value is linked, and back to NULL for good when it
			 * is deleted; no other value ever takes the element,
			 * so seeing the map means this value. A hit on a value
			 * being deleted concurrently is what the lifetime
			 * rules above already cover. */
			if (__atomic_load_n((struct rqspin_storage_map **)(e + RQSPIN__STORAGE_EMB_KEY),
					    __ATOMIC_RELAXED) == map) {
				if (err)
					*err = 0;
				return e + RQSPIN__STORAGE_VALUE;
			}
			/* Written before the publication, never changed. */
			w = (uintptr_t) * (void *const *)(e + RQSPIN__STORAGE_ELEM_LOCAL);
		}
		if (__builtin_expect(w != 0, 1)) {
			/* acquire: pairs with the release store that installed
			 * a grown index, filled before. */
			const struct rqspin__storage_index *ix = __atomic_load_n(
				(struct rqspin__storage_index **)(w + RQSPIN__STORAGE_LOCAL_INDEX),
				__ATOMIC_ACQUIRE);
			/* acquire: if seq is the end of a change, the slot
			 * loads below see it (a seqlock reader). */
			uint32_t seq = __atomic_load_n(&ix->seq, __ATOMIC_ACQUIRE);
			uint64_t key = *(const uint64_t *)(const void *)map;
			const struct rqspin__storage_slot *s =
				(const struct rqspin__storage_slot *)(const void *)(ix + 1) +
				((uint32_t)key & ix->mask);
			/* acquire: pairs with the release store that put the
			 * element in the slot, initialised. */
			char *elem = (char *)__atomic_load_n(&s->elem, __ATOMIC_ACQUIRE);

			/* acquire (key too): a load that reads a change in
			 * progress makes the re-read of seq below see that
			 * change's odd seq; seq unchanged and even means the
			 * key and element are one state of the slot. */
			if (elem && __atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == key) {
				if (!(seq & 1) && __atomic_load_n(&ix->seq, __ATOMIC_RELAXED) == seq) {
					if (err)
						*err = 0;
					return elem + RQSPIN__STORAGE_VALUE;
				}
			}
		}
	}
	return rqspin__storage_get_slow(map, owner, init, flags, err);
}

/*
 * Copy value (value_size bytes) into the owner's value under the value's
 * lock, creating it when absent (flags: RQSPIN_STORAGE_ANY, _NOEXIST,
 * _EXIST). Returns 0, -EEXIST, -ENOENT, -EIDRM (creation on a destroyed
 * owner, or in a map being destroyed), -ENOMEM, -EDEADLK, -ETIMEDOUT or
 * -EINVAL. Async-signal-safe (creation too, except for F_MALLOC maps).
 */
RQSPIN_API RQSPIN_MUST_CHECK int rqspin_storage_update(struct rqspin_storage_map *map,
							struct rqspin_storage_owner *owner,
							const void *value, unsigned flags);

/*
 * Copy the owner's value into out (value_size bytes) under the value's
 * lock. Returns 0, -ENOENT, -EDEADLK, -ETIMEDOUT or -EINVAL.
 * Async-signal-safe.
 */
RQSPIN_API RQSPIN_MUST_CHECK int rqspin_storage_lookup_copy(struct rqspin_storage_map *map,
							     struct rqspin_storage_owner *owner,
							     void *out);

/*
 * The lock that rqspin_storage_update and _lookup_copy hold while they copy
 * a value; value must be a pointer returned by rqspin_storage_get (and
 * still valid, see the lifetime rules). Take it with rqspin_lock() for
 * your own read-modify-write of the value. Async-signal-safe.
 */
RQSPIN_API rqspinlock_t *rqspin_storage_value_lock(void *value);

/*
 * Remove the owner's value for map; it is freed after a grace period.
 * Returns 0, -ENOENT, -EDEADLK, -ETIMEDOUT or -EINVAL. Async-signal-safe.
 */
RQSPIN_API RQSPIN_MUST_CHECK int rqspin_storage_delete(struct rqspin_storage_map *map,
							struct rqspin_storage_owner *owner);

/*
 * The owner is going away: remove and free all its values, of every map,
 * and its storage (after a grace period). Cannot fail, never waits (each
 * lock it needs is tried once) and leaks nothing: when a lock is busy (or
 * held by the code a signal handler interrupted), the lock's holder
 * finishes the work when it releases the lock.
 *
 * It ends the owner: the owner word gets a tombstone at once, and from
 * then on every creation on it (get with F_CREATE, update without
 * _EXIST), from any thread or handler, fails with -EIDRM; lookups and
 * deletes find nothing (-ENOENT). A creation that was in progress when
 * destroy started (a handler's destroy that interrupted it, or another
 * thread's) returns -EIDRM, or succeeds with a value that this
 * destruction removes; nothing it creates outlives the destruction.
 * Destroying an ended owner again does nothing.
 *
 * When it returns, the library no longer reads or writes the owner's
 * memory on behalf of this call, and no later call will, except calls
 * that the program itself makes on the owner: the program may free the
 * owner object once no other thread (or interrupted code) can still pass
 * it to this API. To reuse the object as a new owner, zero it again
 * (RQSPIN_STORAGE_OWNER_INIT or memset) under the same condition; zeroing
 * an owner that still has a storage leaks it. NULL is ignored.
 * Async-signal-safe.
 */
RQSPIN_API void rqspin_storage_owner_destroy(struct rqspin_storage_owner *owner);

/*
 * Call fn(owner, value, arg) for each live value of map, inside a
 * read-side section (so fn must not call map_destroy, _barrier or
 * _synchronize; it may call get/update/delete, including on the value it
 * is given). Values created or deleted during the walk may or may not be
 * seen. The owner pointer identifies the owner; it may be dereferenced only
 * if the program does not free owners concurrently (or frees them after a
 * grace period). A non-zero return of fn stops the walk and is returned;
 * else 0, or -EINVAL. Async-signal-safe if fn is.
 */
typedef int (*rqspin_storage_iter_fn)(struct rqspin_storage_owner *owner, void *value,
				      void *arg);
RQSPIN_API int rqspin_storage_map_iter(struct rqspin_storage_map *map,
				       rqspin_storage_iter_fn fn, void *arg);

/*
 * Read-side section (liburcu-bp rcu_read_lock/unlock). Value pointers
 * obtained inside stay valid until the matching unlock. Sections nest, and
 * may be entered in signal handlers (not on a sigaltstack(2) stack, a
 * liburcu rule). Do not block for long inside one: it delays every free.
 * Async-signal-safe.
 */
RQSPIN_API void rqspin_storage_read_lock(void);
RQSPIN_API void rqspin_storage_read_unlock(void);

/*
 * Register the calling thread with liburcu-bp now (every other call does
 * it lazily; this one only moves the cost, an mmap at times, out of the
 * first call). Idempotent. Registration blocks all signals while it holds
 * liburcu-bp's registry mutex, as liburcu-bp does wherever it holds it, so
 * it is safe from a handler too. Async-signal-safe.
 */
RQSPIN_API void rqspin_storage_thread_init(void);

/* Wait for a grace period: values deleted before the call are no longer
 * referenced by any read-side section. NOT async-signal-safe; not inside a
 * read-side section. */
RQSPIN_API void rqspin_storage_synchronize(void);

/* Wait until every value, storage and table freed before the call is back
 * in its allocator (liburcu rcu_barrier). NOT async-signal-safe; not inside
 * a read-side section nor from a call_rcu callback. */
RQSPIN_API void rqspin_storage_barrier(void);

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_STORAGE_H */
