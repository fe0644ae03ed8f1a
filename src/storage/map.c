/* SPDX-License-Identifier: MIT */
/*
 * Maps: creation (id and buckets), no-fail destruction, iteration.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/internal.h"

/* Map ids: the lowest free one, so that the first maps of an owner land in
 * distinct index slots (the kernel's least-used cache slot, generalised). */
static pthread_mutex_t ids_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ids[RQSPIN_STORAGE_MAX_MAPS / 64];
/* Maps created so far: the high bits of a map's key (48 bits: wrapping
 * would take a million map creations a second for nine years). */
static _Atomic uint64_t map_serial;

static int id_alloc(void)
{
	int id = -1;

	pthread_mutex_lock(&ids_mutex);
	for (unsigned w = 0; w < RQSPIN_STORAGE_MAX_MAPS / 64; w++) {
		if (ids[w] != ~0ull) {
			unsigned bit = (unsigned)__builtin_ctzll(~ids[w]);

			ids[w] |= 1ull << bit;
			id = (int)(w * 64 + bit);
			break;
		}
	}
	pthread_mutex_unlock(&ids_mutex);
	return id;
}

static void id_free(uint32_t id)
{
	pthread_mutex_lock(&ids_mutex);
	ids[id / 64] &= ~(1ull << (id % 64));
	pthread_mutex_unlock(&ids_mutex);
}

bool rqs_st_no_maps_begin(void)
{
	pthread_mutex_lock(&ids_mutex);
	for (unsigned w = 0; w < RQSPIN_STORAGE_MAX_MAPS / 64; w++)
		if (ids[w])
			return false;
	return true;
}

void rqs_st_no_maps_end(void)
{
	pthread_mutex_unlock(&ids_mutex);
}

/* Buckets only spread lock contention (lists are unlinked in O(1)): a few
 * per CPU, each on its own cache line. The CPU count is read once (glibc
 * reads /sys for it on every call). */
static uint32_t bucket_count(void)
{
	static _Atomic uint32_t count;
	/* relaxed: any thread computes the same value. */
	uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
	long cpus;

	if (RQS_LIKELY(n))
		return n;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	n = 16;
	while (n < 1024 && (long)n < 4 * cpus)
		n <<= 1;
	atomic_store_explicit(&count, n, memory_order_relaxed);
	return n;
}

/* Parenthesised: storage.h makes the name a macro for programs' calls. */
RQSPIN_API struct rqspin_storage_map *(rqspin_storage_map_create)(size_t value_size,
								   unsigned flags)
{
	struct rqspin_storage_map *m;
	uint32_t nb = bucket_count();
	int id;

	if (value_size == 0 || value_size > RQSPIN_STORAGE_MAX_VALUE_SIZE ||
	    (flags & ~RQSPIN_STORAGE_MAP_F_MALLOC)) {
		errno = EINVAL;
		return NULL;
	}
	if (rqs_st_setup()) {
		errno = ENOMEM;
		return NULL;
	}
	rqspin_storage_thread_init();
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->buckets = aligned_alloc(64, nb * sizeof(struct st_bucket));
	if (!m->buckets) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	memset(m->buckets, 0, nb * sizeof(struct st_bucket));
	id = id_alloc();
	if (id < 0) {
		free(m->buckets);
		free(m);
		errno = ENOSPC;
		return NULL;
	}
	m->id = (uint32_t)id;
	/* relaxed: only uniqueness matters, and the map is published to
	 * other threads by the caller's own synchronisation. */
	m->key = ((atomic_fetch_add_explicit(&map_serial, 1, memory_order_relaxed) + 1)
		  << ST_KEY_ID_BITS) | (uint64_t)id;
	m->value_size = (uint32_t)value_size;
	m->elem_size = (uint32_t)((ST_ELEM_HDR + value_size + 7) & ~(size_t)7);
	m->flags = flags;
	m->bucket_mask = nb - 1;
	return m;
}

/* The program's inline rqspin_storage_get was compiled with layout; the
 * library's offsets are storage.h's (internal.h asserts each one), so its
 * stamp is the same expression compiled here. A mismatch would make every
 * inline lookup read the wrong words: refuse loudly rather than hand out a
 * map. stderr, because a caller that only tests for NULL would otherwise
 * see a strange errno and nothing else. */
RQSPIN_API struct rqspin_storage_map *
rqspin__storage_map_create_checked(size_t value_size, unsigned flags, uint64_t layout)
{
	if (layout != RQSPIN__STORAGE_LAYOUT) {
		fprintf(stderr,
			"librqspin %s: rqspin_storage_map_create: the program's rqspin/storage.h "
			"has inline layout %#" PRIx64 ", this library %#" PRIx64
			": rebuild it against this library's headers\n",
			RQSPIN_VERSION_STRING, layout, (uint64_t)RQSPIN__STORAGE_LAYOUT);
		errno = ELIBBAD;
		return NULL;
	}
	return (rqspin_storage_map_create)(value_size, flags);
}

RQSPIN_API size_t rqspin_storage_map_value_size(const struct rqspin_storage_map *map)
{
	return map ? map->value_size : 0;
}

/* Normal context, holding nothing: a failure can only be a timeout (a busy
 * or descheduled holder), so waiting is correct. */
static void lock_retry(rqspinlock_t *lock)
{
	while (!st_lock_ok(rqspin_lock(lock)))
		sched_yield();
}

/* The storage side of e, whose map side we just unlinked. In a read
 * section: l and e stay allocated even if the owner's cleanup frees them. */
static void unlink_storage_side(struct rqspin_storage_map *m, struct st_elem *e,
				struct st_local *l)
{
	int ret;
	uint32_t state;

	while ((ret = rqspin_lock(&l->lock)) == -ETIMEDOUT)
		sched_yield();
	if (!st_lock_ok(ret))
		return; /* cannot happen here; the owner's cleanup reaps e */
	/* A cleaned storage (owner destroyed) did e's side already, and
	 * tab is no longer e's index: the state check below skips it. */
	/* relaxed: ST_STORAGE_UNLINKED is only set under this lock. */
	if (!(atomic_load_explicit(&e->state, memory_order_relaxed) & ST_STORAGE_UNLINKED)) {
		rqs_st_storage_remove(l, e, m);
		/* acq_rel: see rqs_st_unlink_map_locked. */
		state = atomic_fetch_or_explicit(&e->state, ST_STORAGE_UNLINKED,
						 memory_order_acq_rel);
		if (state & ST_MAP_UNLINKED)
			rqs_st_free_elem_rcu(e);
	}
	rqs_st_local_unlock(l);
}

static void map_free_cb(struct rcu_head *h)
{
	struct rqspin_storage_map *m = caa_container_of(h, struct rqspin_storage_map, rcu);

	ST_TSAN_ACQUIRE_GP();
	free(m->buckets);
	free(m);
}

RQSPIN_API void rqspin_storage_map_destroy(struct rqspin_storage_map *map)
{
	if (!map)
		return;
	rqspin_storage_thread_init();
	rqs_st_assert_not_reading("rqspin_storage_map_destroy inside a read-side section");
	/* relaxed: each bucket's lock, taken below, carries it to a later
	 * link into that bucket (rqs_st_link_map). */
	atomic_store_explicit(&map->dying, 1, memory_order_relaxed);
	for (uint32_t i = 0; i <= map->bucket_mask; i++) {
		struct st_bucket *b = &map->buckets[i];

		for (;;) {
			struct st_elem *e;
			struct st_local *l;
			uint32_t state;

			/* The section starts before e is taken off the list,
			 * so e and its storage outlive what follows. */
			st_read_lock();
			lock_retry(&b->lock);
			e = atomic_load_explicit(&b->head, memory_order_relaxed);
			if (!e) {
				rqspin_unlock(&b->lock);
				st_read_unlock();
				break;
			}
			l = e->local;
			state = rqs_st_unlink_map_locked(e);
			/* (No sweep: we take every element anyway.) */
			rqspin_unlock(&b->lock);
			if (state & ST_STORAGE_UNLINKED)
				rqs_st_free_elem_rcu(e);
			else
				unlink_storage_side(map, e, l);
			st_read_unlock();
		}
	}
	/* No index holds the map's key any more (every storage side is
	 * done): its id may go to the next map at once. Readers that still
	 * hold the map pointer (an owner's cleanup that read e->map before
	 * it was cleared, an iterator, a misused get) are done after a grace
	 * period; so the map is freed after one, and we do not wait for it
	 * (rqspin_storage_barrier does). */
	id_free(map->id);
	/* The last map gone: no get can be running (each needs a live map),
	 * so the retired index tables can go back to the allocator. */
	if (rqs_st_no_maps_begin())
		rqs_st_pool_drain();
	rqs_st_no_maps_end();
	st_read_lock();
	ST_TSAN_RELEASE_GP();
	urcu_bp_call_rcu(&map->rcu, map_free_cb);
	st_read_unlock();
}

RQSPIN_API int rqspin_storage_map_iter(struct rqspin_storage_map *map,
				       rqspin_storage_iter_fn fn, void *arg)
{
	int ret = 0;

	if (!map || !fn)
		return -EINVAL;
	st_read_lock();
	for (uint32_t i = 0; i <= map->bucket_mask && !ret; i++) {
		/* acquire (head and bnext): pair with the release in
		 * rqs_st_link_map, so each element is seen initialised. */
		struct st_elem *e = atomic_load_explicit(&map->buckets[i].head,
							 memory_order_acquire);

		for (; e && !ret; e = atomic_load_explicit(&e->bnext, memory_order_acquire)) {
			struct rqspin_storage_owner *owner;

			/* relaxed: a value being removed concurrently may be
			 * reported or not; both are allowed. */
			if (atomic_load_explicit(&e->state, memory_order_relaxed) &
			    ST_BOTH_UNLINKED)
				continue;
			owner = atomic_load_explicit(&e->local->owner, memory_order_relaxed);
			if (owner)
				ret = fn(owner, e->data, arg);
		}
	}
	st_read_unlock();
	return ret;
}
