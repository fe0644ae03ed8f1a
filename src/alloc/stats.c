/* SPDX-License-Identifier: MIT */
/* Statistics (summed over all heaps on read) and rqspin_alloc_trim(). */
#include <string.h>

#include "alloc/alloc_internal.h"

struct alloc_global_stats rqs_alloc_gstats;

static uint64_t load(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

RQSPIN_API void rqspin_alloc_stats_get(struct rqspin_alloc_stats *out)
{
	int64_t live[NCLASSES] = { 0 };
	uint32_t n = rqs_heap_count();
	uint64_t cached = 0;
	uint32_t i;
	unsigned c;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		const struct heap *h = rqs_heap_at(i);
		uint32_t st;

		if (!h)
			continue;
		st = atomic_load_explicit(&h->state, memory_order_relaxed);
		if (st == HEAP_FRESH)
			continue;
		out->heaps++;
		if (st == HEAP_ABANDONED)
			out->heaps_abandoned++;
		for (c = 0; c < NCLASSES; c++) {
			const struct hclass *hc = &h->cls[c];

			out->remote_frees += load(&hc->nremote) + load(&hc->nremote_nested);
		}
		out->nested += load(&h->nnested);
		out->next_class += load(&h->nnext);
		out->deferred_frees += load(&h->ndeferred);
		cached += __atomic_load_n(&h->ncache, __ATOMIC_RELAXED);
	}
	rqs_pool_count_live(live);
	for (c = 0; c < NCLASSES; c++) {
		out->remote_frees += load(&rqs_alloc_gstats.remote_noheap[c]);
		live[c] += (int64_t)(load(&rqs_alloc_gstats.reserve_cls[c]) -
				     load(&rqs_alloc_gstats.reserve_cls_free[c]));
		out->class_size[c] = rqs_alloc_class_size[c];
		out->class_objects[c] = live[c] > 0 ? (uint64_t)live[c] : 0;
		out->class_bytes[c] = out->class_objects[c] * rqs_alloc_class_size[c];
		out->small_objects += out->class_objects[c];
		out->small_bytes += out->class_bytes[c];
	}
	out->large_objects = load(&rqs_alloc_gstats.large_objects);
	out->large_bytes = load(&rqs_alloc_gstats.large_bytes);
	out->large_allocs = load(&rqs_alloc_gstats.large_allocs);
	out->segments = load(&rqs_alloc_gstats.segments);
	out->pages_total = out->segments * (PAGES_PER_SEG - 1);
	out->pages_active = load(&rqs_alloc_gstats.pages_active);
	out->pages_cached = load(&rqs_alloc_gstats.pool_dirty) + cached;
	out->pages_returned = load(&rqs_alloc_gstats.pool_clean);
	out->mapped_bytes = out->segments * SEG_SIZE + out->large_bytes + load(&rqs_alloc_gstats.meta_bytes);
	out->madvise_calls = load(&rqs_alloc_gstats.madvise_calls);
	out->heaps_adopted = load(&rqs_alloc_gstats.heaps_adopted);
	out->reserve_allocs = load(&rqs_alloc_gstats.reserve_allocs);
	out->reserve_objects = out->reserve_allocs - load(&rqs_alloc_gstats.reserve_frees);
	out->reserve_pages = load(&rqs_alloc_gstats.reserve_pages);
	out->bad_frees = load(&rqs_alloc_gstats.bad_frees);
}

RQSPIN_API size_t rqspin_alloc_trim(void)
{
	struct heap *h = rqs_alloc_tls_heap;
	size_t bytes = 0;

	if (heap_is_real(h))
		bytes += rqs_heap_collect_all(h, true);
	bytes += rqs_heap_reap_dead(rqs_heap_count());
	bytes += rqs_heap_reap_abandoned(UINT32_MAX);
	bytes += rqs_pool_trim();
	return bytes;
}
