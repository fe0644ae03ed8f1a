/* SPDX-License-Identifier: MIT */
/*
 * A lazily mapped table of fixed-size entries: the thread registry's slots
 * (lock/registry.c) and the allocator's heaps (alloc/heap.c).
 *
 * Entries live in chunks of per_chunk entries, each mapped (zero-filled)
 * the first time an entry in it is handed out and never unmapped, so a
 * pointer to an entry, once obtained, stays valid memory for the life of
 * the process whatever happens to its user: other threads may read it at
 * any time. Entries are handed out by bumping a counter; a user reuses
 * released entries itself (its own state word, scanned below
 * rqs_table_count) before it bumps. Every call is lock-free and
 * async-signal-safe (mmap is).
 *
 * An entry's state word, whatever else its user defines, starts at
 * RQS_TABLE_FRESH (zero-filled memory: bumped but not yet set up, never
 * claimed by a scan) and may end at RQS_TABLE_RETIRED: kept, because
 * something may still point into it, and never handed out again (a
 * registry slot of a thread that vanished in fork(), a heap left in the
 * middle of an operation).
 *
 * The geometry is a static const struct rqs_table next to the table's
 * storage: the inline accessors then fold its fields into constants.
 */
#ifndef RQS_COMMON_TABLE_H
#define RQS_COMMON_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/assert.h"

#define RQS_TABLE_FRESH 0u
#define RQS_TABLE_RETIRED 3u /* users number their own states 1 and 2 */

struct rqs_table {
	_Atomic(void *) *chunks; /* RQS_TABLE_NCHUNKS entries, NULL until mapped */
	_Atomic uint32_t *bump;  /* entries handed out; may run past limit */
	size_t entry_size;
	uint32_t per_chunk;
	uint32_t limit;          /* entries; at most NCHUNKS * per_chunk */
};

#define RQS_TABLE_NCHUNKS(limit, per_chunk) (((limit) + (per_chunk) - 1) / (per_chunk))

/* Chunk c, mapped by this call if nobody had; NULL when mmap fails. When
 * this call's mapping was the one published, *mapped (if not NULL) gets
 * its length, else 0. Out of line: it runs once per chunk. */
void *rqs_table_chunk(const struct rqs_table *t, uint32_t c, size_t *mapped);

/* Entry i, or NULL when i is past the limit or its chunk is not mapped. */
static inline void *rqs_table_at(const struct rqs_table *t, uint32_t i)
{
	char *c;

	if (i >= t->limit)
		return NULL;
	/* acquire: pairs with the release CAS that published the chunk, so
	 * its zero-filled memory is seen as such (mmap's memory is zero
	 * anyway; the order matters for the pointer itself). */
	c = atomic_load_explicit(&t->chunks[i / t->per_chunk], memory_order_acquire);
	return c ? c + (size_t)(i % t->per_chunk) * t->entry_size : NULL;
}

/* Entries that may be in use are below this bound. */
static inline uint32_t rqs_table_count(const struct rqs_table *t)
{
	/* acquire: pairs with the bump (acq_rel). The bump comes before the
	 * chunk is mapped and published, so an entry below the count may
	 * still read as NULL (rqs_table_at): every scan skips NULL. */
	uint32_t n = atomic_load_explicit(t->bump, memory_order_acquire);

	return n < t->limit ? n : t->limit;
}

/* A fresh entry (state RQS_TABLE_FRESH, nobody else's) and its index in
 * *idx; NULL when the table is full or mmap fails (the index is then
 * spent). *mapped: as for rqs_table_chunk. */
static inline void *rqs_table_bump(const struct rqs_table *t, uint32_t *idx, size_t *mapped)
{
	uint32_t i = atomic_fetch_add_explicit(t->bump, 1, memory_order_acq_rel);
	char *c;

	if (mapped)
		*mapped = 0;
	if (i >= t->limit)
		return NULL;
	c = rqs_table_chunk(t, i / t->per_chunk, mapped);
	if (!c)
		return NULL;
	rqs_assert(i / t->per_chunk < RQS_TABLE_NCHUNKS(t->limit, t->per_chunk));
	*idx = i;
	return c + (size_t)(i % t->per_chunk) * t->entry_size;
}

#endif /* RQS_COMMON_TABLE_H */
