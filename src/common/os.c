/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/os.h"
#include "valgrind/vg.h"

static void *map_flags(size_t len, int flags)
{
	int e = errno;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

	errno = e;
	if (p == MAP_FAILED)
		return NULL;
	/* Every mapping of ours holds lists, records and counters changed
	 * with atomics (allocator objects too while they are free): race
	 * detectors skip it all, except each object from its allocation to
	 * its free (the allocator's san_alloc/san_free). */
	vg_private(p, len);
	return p;
}

void *rqs_os_map(size_t len)
{
	return map_flags(len, 0);
}

void *rqs_os_reserve(size_t len)
{
	return map_flags(len, MAP_NORESERVE);
}

void rqs_os_unmap(void *p, size_t len)
{
	int e = errno;

	munmap(p, len);
	errno = e;
}

int32_t rqs_os_gettid(void)
{
	int e = errno;
	int32_t t = (int32_t)syscall(SYS_gettid);

	errno = e;
	return t;
}

void rqs_os_yield(void)
{
	int e = errno;

	sched_yield();
	errno = e;
}
