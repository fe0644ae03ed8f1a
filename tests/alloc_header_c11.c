/* SPDX-License-Identifier: MIT */
/* <rqspin/alloc.h> compiles as strict C11 with -Wpedantic -Werror. */
#include <rqspin/alloc.h>

void *alloc_header_c11_probe(void);
void *alloc_header_c11_probe(void)
{
	struct rqspin_alloc_stats st;
	void *p = rqspin_malloc_nolock(16, RQSPIN_ALLOC_ZERO);

	rqspin_alloc_stats_get(&st);
	(void)rqspin_malloc_usable_size(p);
	(void)rqspin_alloc_trim();
	return p;
}
