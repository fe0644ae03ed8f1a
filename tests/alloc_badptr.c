/* SPDX-License-Identifier: MIT */
/*
 * Bad pointers. Each case runs in a child process (fork):
 *   - double free of a small object (same thread, of an 8-byte object, and
 *     from another thread; an 8-byte object that is the last one freed
 *     into its page, with one or both frees from other threads); debug
 *     builds: of any free 8-byte object;
 *   - free of an interior pointer (small and large objects);
 *   - free of a pointer that did not come from the allocator (malloc'd
 *     memory, a forged "large" pointer, a stack address);
 *   - free of a pointer into a page that went back to the pool;
 *   - usable_size of a freed object;
 *   - a write into a free object, seen when it is reused (debug only).
 * Debug library (alloc_badptr, the debug flavour; or any library built
 * without NDEBUG): every child must die with SIGABRT after a message.
 * Release library (alloc_badptr_release): every call is ignored, counted
 * in bad_frees, and the allocator stays sane (no object is handed out
 * twice, live counts stay right). Under ASan a child may instead be
 * stopped by ASan's own report (use after poison), which also counts.
 */
#include <sys/wait.h>

#include "alloc_common.h"

#if defined(ALLOC_TEST_DEBUG_LIB) || !defined(NDEBUG)
#define EXPECT_ABORT 1
#else
#define EXPECT_ABORT 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif

static void *double_free_remote(void *p)
{
	rqspin_free_nolock(p);
	return NULL;
}

static void case_double_free(void)
{
	void *p = rqspin_malloc_nolock(48, 0), *q = rqspin_malloc_nolock(48, 0);

	rqspin_free_nolock(p);
	rqspin_free_nolock(p);
	rqspin_free_nolock(q);
}

static void case_double_free_8(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(q);
	rqspin_free_nolock(p);
	rqspin_free_nolock(p); /* p is the last object freed into its page */
}

/* Debug builds: an 8-byte object that is not the last one freed into its
 * page (no canary; the free bits see it), freed again by its own thread,
 * by another thread, and asked its size. */
static void case_double_free_8_any(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(p);
	rqspin_free_nolock(q);
	rqspin_free_nolock(p);
}

static void case_double_free_8_remote(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(p);
	rqspin_free_nolock(q);
	tu_thread_join(tu_thread_start(double_free_remote, p));
}

/* An 8-byte object that is the last one freed into its page, where one
 * of the two frees comes from another thread: the second must be seen
 * (the head of the page's remote list, or of its owner's list), or the
 * object is pushed onto a list twice (a self-link) and handed out twice. */
static void case_double_free_8_two_remote(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(q);
	tu_thread_join(tu_thread_start(double_free_remote, p));
	tu_thread_join(tu_thread_start(double_free_remote, p));
}

static void case_double_free_8_remote_then_owner(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(q);
	tu_thread_join(tu_thread_start(double_free_remote, p));
	rqspin_free_nolock(p);
}

static void case_double_free_8_owner_then_remote(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(q);
	rqspin_free_nolock(p);
	tu_thread_join(tu_thread_start(double_free_remote, p));
}

static void case_usable_freed_8(void)
{
	void *p = rqspin_malloc_nolock(8, 0), *q = rqspin_malloc_nolock(8, 0);

	rqspin_free_nolock(p);
	rqspin_free_nolock(q);
	(void)rqspin_malloc_usable_size(p);
}

static void case_double_free_remote(void)
{
	void *p = rqspin_malloc_nolock(300, 0);

	rqspin_free_nolock(p);
	tu_thread_join(tu_thread_start(double_free_remote, p));
}

static void case_interior_small(void)
{
	char *p = rqspin_malloc_nolock(100, 0);

	rqspin_free_nolock(p + 16);
}

static void case_interior_large(void)
{
	char *p = rqspin_malloc_nolock(100000, 0);

	rqspin_free_nolock(p + 16);
}

static void case_foreign_malloc(void)
{
	char *p = malloc(100);

	/* make sure it is not at the page offset of a large object */
	rqspin_free_nolock(((uintptr_t)p & 4095) == 64 ? p + 16 : p);
	free(p); /* release builds get here */
}

static void case_foreign_forged(void)
{
	static char page[8192] __attribute__((aligned(4096)));

	memset(page, 0x5a, sizeof(page));
	rqspin_free_nolock(page + 64); /* looks like a large object, no magic */
}

static void case_foreign_stack(void)
{
	char buf[64];

	rqspin_free_nolock(buf + 8);
}

static void case_free_page(void)
{
	void *p = rqspin_malloc_nolock(9000, 0); /* a class nothing else used */

	rqspin_free_nolock(p);
	rqspin_alloc_trim(); /* the empty page goes back to the pool */
	rqspin_free_nolock(p);
}

static void case_usable_freed(void)
{
	void *p = rqspin_malloc_nolock(64, 0), *q = rqspin_malloc_nolock(64, 0);

	rqspin_free_nolock(p);
	if (rqspin_malloc_usable_size(p) == 0)
		tu_write_str("usable_size returned 0\n");
	rqspin_free_nolock(q);
}

static void case_write_after_free(void)
{
	uint64_t *p = rqspin_malloc_nolock(64, 0);

	rqspin_free_nolock(p);
	p[1] = 42;                         /* the canary word */
	p = rqspin_malloc_nolock(64, 0);   /* reuses it: debug builds check */
	rqspin_free_nolock(p);
}

struct bad_case {
	const char *name;
	void (*fn)(void);
	bool debug_only; /* not detected in release builds */
};

static const struct bad_case cases[] = {
	{ "double free", case_double_free, false },
	{ "double free (8 bytes)", case_double_free_8, false },
	{ "double free (remote)", case_double_free_remote, false },
	{ "double free (8 bytes, twice from other threads)", case_double_free_8_two_remote, false },
	{ "double free (8 bytes, another thread, then the owner)",
	  case_double_free_8_remote_then_owner, false },
	{ "double free (8 bytes, the owner, then another thread)",
	  case_double_free_8_owner_then_remote, false },
	{ "double free (8 bytes, not the last freed)", case_double_free_8_any, true },
	{ "double free (8 bytes, from another thread)", case_double_free_8_remote, true },
	{ "usable_size of a freed 8-byte object", case_usable_freed_8, true },
	{ "interior pointer (small)", case_interior_small, false },
	{ "interior pointer (large)", case_interior_large, false },
	{ "foreign pointer (malloc)", case_foreign_malloc, false },
	{ "foreign pointer (forged large)", case_foreign_forged, false },
	{ "foreign pointer (stack)", case_foreign_stack, false },
	{ "pointer into a free page", case_free_page, false },
	{ "usable_size of a freed object", case_usable_freed, false },
	{ "write after free", case_write_after_free, true },
};

static void run_child(const struct bad_case *c)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(30);
		c->fn();
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	tu_write_str(c->name);
	if (WIFSIGNALED(st)) {
		tu_write_str(": child killed by signal ");
		tu_write_u64((uint64_t)WTERMSIG(st));
	} else {
		tu_write_str(": child exited with ");
		tu_write_u64((uint64_t)WEXITSTATUS(st));
	}
	tu_write_str("\n");
#ifdef ASAN
	/* ASan may see the bad access first (its report exits with 1). */
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		return;
#endif
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

/* Release builds: the same calls are ignored and counted. */
static void run_release(const struct bad_case *c)
{
	uint64_t bad = ac_stats().bad_frees;
	void *a, *b;

	c->fn();
	tu_write_str(c->name);
	tu_write_str(": ignored\n");
	CHECK_GE_U64(ac_stats().bad_frees, bad + 1);
	/* still sane: distinct objects, nothing handed out twice */
	a = rqspin_malloc_nolock(48, 0);
	b = rqspin_malloc_nolock(48, 0);
	CHECK(a && b && a != b);
	ac_fill(a, 48, 1);
	ac_fill(b, 48, 2);
	AC_CHECK(a, 48, 1);
	rqspin_free_nolock(a);
	rqspin_free_nolock(b);
	/* the 8-byte class too: a list with an object on it twice (or a
	 * self-link) hands the same object out twice */
	{
		void *t[256];

		for (int i = 0; i < 256; i++) {
			t[i] = rqspin_malloc_nolock(8, 0);
			CHECK(t[i] != NULL);
			ac_fill(t[i], 8, (uint32_t)i);
		}
		for (int i = 0; i < 256; i++)
			AC_CHECK(t[i], 8, (uint32_t)i);
		for (int i = 0; i < 256; i++)
			rqspin_free_nolock(t[i]);
	}
}

int main(void)
{
	tu_watchdog(120);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (EXPECT_ABORT)
			run_child(&cases[i]);
		else if (!cases[i].debug_only)
			run_release(&cases[i]);
	}
	rqspin_alloc_trim();
	if (!EXPECT_ABORT) {
		/* the objects of the cases above were freed once each */
		/* the interior-pointer cases leave their objects live */
		CHECK_EQ_U64(ac_stats().small_objects, 1);
		CHECK_EQ_U64(ac_stats().large_objects, 1);
	}
	tu_write_str("alloc_badptr: ok\n");
	return 0;
}
