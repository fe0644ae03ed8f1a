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

static inline uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_storage_barrier();
	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	/* Index tables that owners gave up stay in the pool while a map
	 * exists (exactly these bytes; rqspin_storage_pool_bytes). */
	return s.small_bytes + s.large_bytes - rqspin_storage_pool_bytes();
}

#endif
