/* SPDX-License-Identifier: MIT */
/*
 * A page whose last objects come back in two ways -- some freed by another
 * thread first (they wait on the page's remote list, unannounced), the
 * rest then freed by the owner -- is given up by the owner's last free,
 * not kept as a partial page until the owner happens to allocate from it
 * again. Checked through the allocator's statistics (pages_active), which
 * is deterministic: the owner is a fresh thread with a fresh heap.
 *
 * For several size classes: allocate one page's worth of objects plus one
 * (the page P fills up, the extra object opens the next page Q), free one
 * object of P (P becomes partial), let a helper thread free a third of the
 * rest (too few for any of those frees to empty the page, so none
 * announces it), then free the others from the owner. P must have left the
 * heap's active pages by then. The memory is reused afterwards and the
 * patterns of the objects still live are checked.
 */
#include "alloc_common.h"

#define PAGE_BYTES (64u * 1024u)
#define MAX_OBJS 128u

struct remote_job {
	void **objs;
	unsigned n;
};

static void *remote_free(void *arg)
{
	struct remote_job *job = arg;

	for (unsigned i = 0; i < job->n; i++)
		rqspin_free_nolock(job->objs[i]);
	return NULL;
}

static uintptr_t page_of(const void *p)
{
	return (uintptr_t)p & ~(uintptr_t)(PAGE_BYTES - 1);
}

static void one_class(size_t size)
{
	unsigned cap = PAGE_BYTES / (unsigned)size, nremote = (cap - 1) / 3;
	void *p[MAX_OBJS + 1];
	uint64_t active0, active1;
	struct remote_job job;

	CHECK(cap + 1 <= MAX_OBJS + 1 && nremote >= 1);
	active0 = ac_stats().pages_active;
	for (unsigned i = 0; i <= cap; i++) {
		p[i] = rqspin_malloc_nolock(size, 0);
		CHECK(p[i] != NULL);
		ac_fill(p[i], size, (uint32_t)i);
	}
	/* The layout the scenario needs: a fresh heap fills P, then Q. */
	for (unsigned i = 1; i < cap; i++)
		CHECK(page_of(p[i]) == page_of(p[0]));
	CHECK(page_of(p[cap]) != page_of(p[0]));
	CHECK_EQ_U64(ac_stats().pages_active, active0 + 2);

	rqspin_free_nolock(p[0]);
	job.objs = &p[1];
	job.n = nremote;
	tu_thread_join(tu_thread_start(remote_free, &job));
	for (unsigned i = 1 + nremote; i < cap; i++) {
		AC_CHECK(p[i], size, (uint32_t)i);
		rqspin_free_nolock(p[i]);
	}
	/* Only Q is left. Before the fix, P stayed on the partial list with
	 * its "used" count equal to the objects waiting on its remote list. */
	active1 = ac_stats().pages_active;
	if (active1 != active0 + 1) {
		tu_write_str("size ");
		tu_write_u64(size);
		tu_write_str(": an emptied page stayed active\n");
	}
	CHECK_EQ_U64(active1, active0 + 1);

	/* The page's memory is handed out again, intact. */
	for (unsigned i = 0; i < cap; i++) {
		p[i] = rqspin_malloc_nolock(size, 0);
		CHECK(p[i] != NULL);
		ac_fill(p[i], size, (uint32_t)(1000 + i));
	}
	AC_CHECK(p[cap], size, (uint32_t)cap);
	for (unsigned i = 0; i < cap; i++) {
		AC_CHECK(p[i], size, (uint32_t)(1000 + i));
		rqspin_free_nolock(p[i]);
	}
	rqspin_free_nolock(p[cap]);
}

static void *owner(void *arg)
{
	static const size_t sizes[] = { 1024, 2048, 4096, 8192, 16384 };

	(void)arg;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		one_class(sizes[i]);
	return NULL;
}

int main(void)
{
	tu_watchdog(60);
	tu_thread_join(tu_thread_start(owner, NULL));
	tu_write_str("alloc_page_empty: ok\n");
	return 0;
}
