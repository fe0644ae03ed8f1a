/* SPDX-License-Identifier: MIT */
/*
 * Large objects (more than RQSPIN_ALLOC_SMALL_MAX bytes): one anonymous
 * mapping each, with a 64-byte header at the start of the mapping and the
 * object right after it. Free recognises one by its offset in the page
 * (64) and the header's magic, which mixes in the header's address; the
 * magic is cleared with a CAS before the unmap, so of two racing frees one
 * wins and the other sees a bad pointer. A free after the unmap reads
 * unmapped memory (undefined; usually SIGSEGV).
 */
#include <string.h>

#include "alloc/alloc_internal.h"

#define OS_PAGE 4096u /* mappings start on a page boundary of at least this */

struct large_hdr {
	_Atomic uint64_t magic; /* LARGE_MAGIC ^ address of the header */
	uint64_t maplen;
	uint64_t size;
	uint64_t pad_[5];
};
_Static_assert(sizeof(struct large_hdr) == LARGE_HDR, "large header is 64 bytes");

ALLOC_FN void *rqs_large_alloc(size_t size, unsigned flags)
{
	struct large_hdr *h;
	size_t len;
	char *p;

	(void)flags; /* fresh mappings are zero */
	if (size > ((size_t)1 << 46))
		return NULL;
	len = (size + LARGE_HDR + OS_PAGE - 1) & ~(size_t)(OS_PAGE - 1);
	h = rqs_os_map(len);
	if (!h)
		return NULL;
	h->maplen = len;
	h->size = size;
	atomic_store_explicit(&h->magic, LARGE_MAGIC ^ (uintptr_t)h, memory_order_relaxed);
	count_shared(&rqs_alloc_gstats.large_objects, 1);
	count_shared(&rqs_alloc_gstats.large_bytes, len);
	count_shared(&rqs_alloc_gstats.large_allocs, 1);
	p = (char *)h + LARGE_HDR;
	/* Under Valgrind the tail past size is unaddressable. */
	san_alloc(p, san_large_usable(size, len - LARGE_HDR), len - LARGE_HDR, 1);
	return p;
}

static ALLOC_FN struct large_hdr *large_hdr_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct large_hdr *h;

	if ((a & (OS_PAGE - 1)) != LARGE_HDR)
		return NULL;
	h = (struct large_hdr *)(a - LARGE_HDR);
	if (atomic_load_explicit(&h->magic, memory_order_relaxed) != (LARGE_MAGIC ^ (uintptr_t)h))
		return NULL;
	return h;
}

ALLOC_FN void rqs_large_free(void *p)
{
	struct large_hdr *h = large_hdr_of(p);
	uint64_t expect;
	size_t len;

	if (!h) {
		rqs_alloc_bad_pointer("free of a pointer that is not an object from rqspin_malloc_nolock", p);
		return;
	}
	expect = LARGE_MAGIC ^ (uintptr_t)h;
	/* relaxed: only the winner of the CAS touches the mapping again. */
	if (!atomic_compare_exchange_strong_explicit(&h->magic, &expect, 0, memory_order_relaxed,
						     memory_order_relaxed)) {
		rqs_alloc_bad_pointer("double free", p);
		return;
	}
	len = h->maplen;
	san_free(p, 0, 0);
	atomic_fetch_sub_explicit(&rqs_alloc_gstats.large_objects, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&rqs_alloc_gstats.large_bytes, len, memory_order_relaxed);
	rqs_os_unmap(h, len);
}

ALLOC_FN size_t rqs_large_usable_size(const void *p)
{
	struct large_hdr *h = large_hdr_of(p);

	if (!h) {
		rqs_alloc_bad_pointer("usable_size of a pointer that did not come from rqspin_malloc_nolock",
				  p);
		return 0;
	}
	return san_large_usable(h->size, h->maplen - LARGE_HDR);
}
