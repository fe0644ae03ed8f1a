/* SPDX-License-Identifier: MIT */
/* Shared by the storage tests: the ThreadSanitizer suppressions for
 * liburcu (not instrumented), and the allocator's live bytes once every
 * deferred free has run, less the index-table pool (the leak check). Include once per test program. */
#ifndef STORAGE_UTIL_H
#define STORAGE_UTIL_H

#include <stdint.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "test_util.h"

#ifdef TU_TSAN
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:liburcu-bp.so\ncalled_from_lib:liburcu-common.so\n";
}
#endif

/* Everything the allocator holds once the deferred frees have run. */
static inline uint64_t raw_live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_storage_barrier();
	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

static inline uint64_t live_bytes(void)
{
	/* Index tables that owners gave up stay in the pool while a map
	 * exists (exactly these bytes; rqspin_storage_pool_bytes). */
	return raw_live_bytes() - rqspin_storage_pool_bytes();
}

/* A value that names its map and owner, so a value found under the wrong
 * map or owner shows. */
struct st_test_val {
	uint64_t tag; /* map << 32 | owner */
	uint64_t inv; /* ~tag */
};

static inline uint64_t st_test_tag(unsigned map, unsigned owner)
{
	return (uint64_t)map << 32 | owner;
}

/* Create the value of map (number map) for owner (number owner). */
static inline void st_test_put(struct rqspin_storage_map *m, unsigned map,
			       struct rqspin_storage_owner *o, unsigned owner)
{
	struct st_test_val v = { st_test_tag(map, owner), ~st_test_tag(map, owner) };

	CHECK(rqspin_storage_update(m, o, &v, RQSPIN_STORAGE_NOEXIST) == 0);
}

/* The owner's value of the map is there (and right), or absent. */
static inline void st_test_expect(struct rqspin_storage_map *m, unsigned map,
				  struct rqspin_storage_owner *o, unsigned owner, bool present)
{
	int err = -1;
	struct st_test_val *v = rqspin_storage_get(m, o, NULL, 0, &err);

	if (!present) {
		CHECK(v == NULL);
		return;
	}
	CHECK(v != NULL && err == 0);
	CHECK(v->tag == st_test_tag(map, owner) && v->inv == ~v->tag);
}

#endif
