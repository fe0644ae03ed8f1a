/* SPDX-License-Identifier: MIT */
#include "common/os.h"
#include "common/table.h"

/* Racing mappers agree through the CAS; the loser unmaps its copy. */
void *rqs_table_chunk(const struct rqs_table *t, uint32_t c, size_t *mapped)
{
	void *cur = atomic_load_explicit(&t->chunks[c], memory_order_acquire);
	size_t len = (size_t)t->per_chunk * t->entry_size;
	void *mine;

	rqs_assert(c < RQS_TABLE_NCHUNKS(t->limit, t->per_chunk));
	if (cur)
		return cur;
	mine = rqs_os_map(len);
	if (!mine)
		return NULL;
	/* release: readers that load the pointer see the zeroed chunk. */
	if (atomic_compare_exchange_strong_explicit(&t->chunks[c], &cur, mine,
						    memory_order_release, memory_order_acquire)) {
		if (mapped)
			*mapped = len;
		return mine;
	}
	rqs_os_unmap(mine, len);
	return cur;
}
