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
 * Threads need no registration (liburcu-bp registers a thread on its first
 * read-side section). The program may use liburcu itself, any flavour, on
 * the same threads, in any order.
 *
 * Async-signal-safety is stated per function. "Async-signal-safe" means the
 * function may be called from a signal handler that interrupted any code of
 * this thread, including a call of this API on the same owner or map: it
 * then returns -EDEADLK (or succeeds), it never deadlocks. Creating a value
 * in a map made with RQSPIN_STORAGE_MAP_F_MALLOC is the exception (malloc).
 * A second one, liburcu-bp's: a thread that used storage is unregistered
 * by liburcu-bp's thread-exit destructor, which takes an internal mutex
 * with signals unblocked; a handler that makes a storage call on that
 * thread then registers it again and waits for that mutex for ever. A
 * thread whose handlers use storage must block those signals (or disarm
 * its per-thread timers) before it exits.
 *
 * ThreadSanitizer: liburcu is not instrumented, so a program built with
 * -fsanitize=thread gets reports from inside liburcu's call_rcu bookkeeping;
 * run it with TSAN_OPTIONS=suppressions=<prefix>/share/rqspin/tsan-liburcu.supp
 * (installed with the library), which silences only those.
 *
 * Memory: an owner's first small value is allocated with its storage;
 * more values grow a per-owner index, which is kept until the owner is
 * destroyed (src/storage/README.md has the figures).
 *
 * Contract (as in the kernel): do not use a map while or after it is
 * destroyed, and do not use an owner after its destruction returned (the
 * program may free it); owner and map destruction may race with each other
 * and with anything on other owners and maps. Two races are made safe all
 * the same: a creation racing the owner's destruction (from another thread
 * before destroy returns, or in a signal handler that interrupted either)
 * ends in -EIDRM or in a value that the destruction frees, never in a
 * value left behind; and a creation racing map_destroy gets -EIDRM or a
 * value that map_destroy frees (a delete racing it removes the value or
 * finds none, inside a read-side section). A call that may race an owner's
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
 * A call in the program goes through a macro (rqspin/static/storage.h)
 * that passes the header's layout stamp; the function itself (its address, dlsym) checks
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
 * get -EIDRM; deletes that race with it (misuse, inside a read-side
 * section) remove the owner's value or return -ENOENT. Its id may be
 * reused by the next map at once. NULL is ignored. NOT async-signal-safe (takes every bucket lock, retrying
 * timeouts); must not be called inside a read-side section (aborts with a
 * message).
 */
RQSPIN_API void rqspin_storage_map_destroy(struct rqspin_storage_map *map);

/* The map's value size. Async-signal-safe. */
RQSPIN_API size_t rqspin_storage_map_value_size(const struct rqspin_storage_map *map);

/*
 * The owner's value for map, or NULL with *err set (err may be NULL).
 * Without RQSPIN_STORAGE_F_CREATE: lock-free lookup; -ENOENT if absent.
 * With it: creates the value when absent, zeroed or copied from init
 * (value_size bytes); a value created concurrently by another thread is
 * returned instead. -EIDRM (creation on a destroyed owner, or in a map
 * being destroyed), -ENOMEM, -EDEADLK, -ETIMEDOUT, -EINVAL as above.
 * Async-signal-safe (creation too, except for F_MALLOC maps).
 *
 * Inline (rqspin/static/storage.h): a hit takes no lock, no read-side
 * section and no call.
 */
static inline void *rqspin_storage_get(struct rqspin_storage_map *map,
				       struct rqspin_storage_owner *owner, const void *init,
				       unsigned flags, int *err);

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

/*
 * Bytes held in the index-table pool. An owner's index shrinks when its
 * values are deleted (to half its capacity once a quarter full, and away
 * entirely when only the value found through the owner word is left), but
 * lookups read indexes without a read-side section, so a table given up
 * is never freed while any map exists: it goes to a pool and is only
 * reused as another owner's index. Owners destroyed later give their
 * once-pooled tables back to the pool too. The pool's memory returns to
 * the allocator when the last map is destroyed. Async-signal-safe (one
 * load; exact once no thread is changing the pool).
 */
RQSPIN_API size_t rqspin_storage_pool_bytes(void);

#ifdef __cplusplus
}
#endif

/* The inline rqspin_storage_get, and the map_create macro that passes the
 * layout stamp (see rqspin_storage_map_create). */
#include <rqspin/static/storage.h>

#endif /* RQSPIN_STORAGE_H */
