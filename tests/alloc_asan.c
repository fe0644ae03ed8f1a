/* SPDX-License-Identifier: MIT */
/*
 * ASan builds only: freed objects are poisoned, so a use after free of an
 * object from this allocator is reported. Children (fork) read a freed
 * small object, write into a freed 3000-byte object and write past the end
 * of a live one into a freed neighbour; each must be stopped by ASan (non-zero
 * exit), while reading a live object is fine.
 */
#include <sys/wait.h>

#include "alloc_common.h"

static void uaf_read(void)
{
	volatile char *p = rqspin_malloc_nolock(100, 0);

	p[50] = 1;
	rqspin_free_nolock((void *)p);
	tu_write_u64((uint64_t)p[50]); /* must be reported */
}

static void uaf_write(void)
{
	volatile char *p = rqspin_malloc_nolock(3000, 0);

	rqspin_free_nolock((void *)p);
	p[2000] = 1;
}

static void overflow(void)
{
	volatile char *p = rqspin_malloc_nolock(64, 0);
	volatile char *q = rqspin_malloc_nolock(64, 0); /* carved right after p */

	CHECK(q == p + 64);
	rqspin_free_nolock((void *)q);
	p[rqspin_malloc_usable_size((void *)p) + 8] = 1; /* into the freed q */
}

static void live_ok(void)
{
	char *p = rqspin_malloc_nolock(100, 0);

	memset(p, 1, rqspin_malloc_usable_size(p));
	rqspin_free_nolock(p);
	p = rqspin_malloc_nolock(100, 0); /* reused: unpoisoned again */
	memset(p, 2, 100);
	rqspin_free_nolock(p);
}

static int run(void (*fn)(void))
{
	int st;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	tu_watchdog(120);
	CHECK(run(live_ok) == 0);
	CHECK(run(uaf_read) != 0);
	CHECK(run(uaf_write) != 0);
	CHECK(run(overflow) != 0);
	tu_write_str("alloc_asan: ok\n");
	return 0;
}
