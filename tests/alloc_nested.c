/* SPDX-License-Identifier: MIT */
/*
 * Deterministic nesting: the debug flavour of the allocator calls a test
 * hook at chosen points while a size class (or the page cache) is busy;
 * the hook raises a signal there, so the handler runs exactly inside the
 * allocator, on the same thread. Checked:
 *  A. alloc into a busy class is served by the next class;
 *  B. with that one busy too (a second nested signal), by the shared
 *     reserve -- also many objects, so the reserve grows by pages; reserve
 *     objects are freed in handlers, in normal code and by another thread;
 *  C. free into a busy class (during an alloc) is deferred and completed
 *     by the next normal call; the objects are reused afterwards;
 *  D. the same during a free;
 *  E. inside the slow path (page switch): allocs and frees of the same
 *     class and the next;
 *  F. while the heap's page cache is busy: the handler needs fresh pages
 *     and empties pages;
 *  G. a remote free interrupted by a handler that frees into the same page;
 *  H. a thread whose very first allocator call is in a signal handler;
 *  I. errno survives all of it;
 *  J. the largest class busy: a handler's objects of that class all come
 *     from the reserve (no larger class), past 256 MiB of them (a cap of
 *     4096 reserve pages made them NULL with memory free).
 * Contents are verified after each step; at the end everything is freed
 * and the statistics return to zero.
 */
#include "alloc_common.h"

/* Mirror of the library's hook points (src/alloc/alloc_internal.h). */
enum { HOOK_ALLOC = 1, HOOK_FREE, HOOK_SLOW, HOOK_CACHE, HOOK_REMOTE };
#define ANY_CLASS 0xffffu
extern void (*rqspin__alloc_test_hook)(unsigned where, unsigned cls);

/* One armed trigger per signal. */
struct trigger {
	atomic_uint where, cls, fired;
	int sig;
};
static struct trigger g_trig[2] = { { .sig = SIGUSR1 }, { .sig = SIGUSR2 } };
static void (*volatile g_plan[2])(void);

static void arm(int level, unsigned where, unsigned cls, void (*plan)(void))
{
	g_plan[level] = plan;
	atomic_store(&g_trig[level].fired, 0);
	atomic_store(&g_trig[level].cls, cls);
	atomic_store(&g_trig[level].where, where);
}

static void hook(unsigned where, unsigned cls)
{
	for (int l = 0; l < 2; l++) {
		struct trigger *t = &g_trig[l];
		unsigned w = atomic_load(&t->where);
		unsigned c = atomic_load(&t->cls);

		if (w == where && (c == ANY_CLASS || c == cls) &&
		    atomic_exchange(&t->where, 0) == where) {
			raise(t->sig);
			atomic_store(&t->fired, 1);
			return;
		}
	}
}

static void handler(int sig)
{
	int e = errno;
	int l = sig == SIGUSR1 ? 0 : 1;

	g_plan[l]();
	errno = e;
}

/* class index of a size (mirror) */
static unsigned cls_of(size_t s)
{
	size_t c = ac_class_size(s);
	unsigned i = 0;

	for (size_t k = 0; ac_class_size(k) != c; k = ac_class_size(k) + 1)
		i++;
	return i;
}

static struct rqspin_alloc_stats S(void)
{
	return ac_stats();
}

/* ---- A: next class ---------------------------------------------------- */

static void *g_h1, *g_h2;

static void plan_alloc100(void)
{
	g_h1 = rqspin_malloc_nolock(100, 0);
	CHECK(g_h1 != NULL);
	ac_fill(g_h1, 100, 11);
}

static void test_next_class(void)
{
	struct rqspin_alloc_stats a = S(), b;
	void *q;

	rqspin_free_nolock(rqspin_malloc_nolock(100, 0)); /* warm: class has a page */
	arm(0, HOOK_ALLOC, cls_of(100), plan_alloc100);
	q = rqspin_malloc_nolock(100, 0);
	CHECK(atomic_load(&g_trig[0].fired));
	CHECK(q != NULL && g_h1 != NULL && q != g_h1);
	CHECK_EQ_U64(rqspin_malloc_usable_size(q), 112);
	CHECK_EQ_U64(rqspin_malloc_usable_size(g_h1), 128);
	ac_fill(q, 100, 12);
	b = S();
	CHECK_EQ_U64(b.nested, a.nested + 1);
	CHECK_EQ_U64(b.next_class, a.next_class + 1);
	AC_CHECK(g_h1, 100, 11);
	AC_CHECK(q, 100, 12);
	rqspin_free_nolock(g_h1);
	rqspin_free_nolock(q);
}

/* ---- B: reserve --------------------------------------------------------- */

#define NRES 3000
static void *g_res[NRES];

/* ThreadSanitizer delays a signal raised inside a signal handler until
 * that handler returns: the second level then finds only class 112 busy
 * and takes the next class instead of the reserve. */
#ifdef TU_TSAN
#define RES_SIZE_OK(n) ((n) == 112 || (n) == 128)
#else
#define RES_SIZE_OK(n) ((n) == 112)
#endif

static void plan_reserve_inner(void)
{
	/* Classes 112 and 128 are busy here (see RES_SIZE_OK). */
	g_h2 = rqspin_malloc_nolock(100, 0);
	CHECK(g_h2 != NULL);
	ac_fill(g_h2, 100, 21);
	for (int i = 0; i < NRES; i++) {
		g_res[i] = rqspin_malloc_nolock(97 + i % 16, i % 3 == 0 ? RQSPIN_ALLOC_ZERO : 0);
		CHECK(g_res[i] != NULL);
		CHECK(RES_SIZE_OK(rqspin_malloc_usable_size(g_res[i])));
		ac_fill(g_res[i], 90, (uint32_t)i);
	}
	/* free a third right here (reserve objects, in a handler) */
	for (int i = 0; i < NRES; i += 3) {
		AC_CHECK(g_res[i], 90, (uint32_t)i);
		rqspin_free_nolock(g_res[i]);
		g_res[i] = NULL;
	}
}

static void plan_reserve_outer(void)
{
	arm(1, HOOK_ALLOC, cls_of(128), plan_reserve_inner);
	g_h1 = rqspin_malloc_nolock(128, 0);
	CHECK(atomic_load(&g_trig[1].fired));
	CHECK(g_h1 != NULL);
	ac_fill(g_h1, 128, 22);
}

static void *free_half(void *arg)
{
	(void)arg;
	for (int i = 1; i < NRES; i += 3) {
		AC_CHECK(g_res[i], 90, (uint32_t)i);
		rqspin_free_nolock(g_res[i]);
		g_res[i] = NULL;
	}
	return NULL;
}

static void test_reserve(void)
{
	struct rqspin_alloc_stats a, b;
	void *q;

	rqspin_free_nolock(rqspin_malloc_nolock(128, 0));
	a = S();
	arm(0, HOOK_ALLOC, cls_of(100), plan_reserve_outer);
	q = rqspin_malloc_nolock(100, 0);
	CHECK(atomic_load(&g_trig[0].fired));
	CHECK(q != NULL);
	ac_fill(q, 100, 23);
	b = S();
#ifndef TU_TSAN
	CHECK_EQ_U64(b.reserve_allocs, a.reserve_allocs + 1 + NRES);
	CHECK_EQ_U64(b.reserve_objects, a.reserve_objects + 1 + NRES - (NRES + 2) / 3);
	CHECK_GE_U64(b.reserve_pages, 2); /* 585 objects of 112 B per page */
#endif
	CHECK_EQ_U64(b.nested, a.nested + 1 + NRES); /* every one found 112 busy */
	CHECK(RES_SIZE_OK(rqspin_malloc_usable_size(g_h2)));
	AC_CHECK(g_h2, 100, 21);
	AC_CHECK(g_h1, 128, 22);
	AC_CHECK(q, 100, 23);
	tu_thread_join(tu_thread_start(free_half, NULL)); /* remote frees of reserve objects */
	for (int i = 2; i < NRES; i += 3) {
		AC_CHECK(g_res[i], 90, (uint32_t)i);
		rqspin_free_nolock(g_res[i]);
	}
	rqspin_free_nolock(g_h2);
	rqspin_free_nolock(g_h1);
	rqspin_free_nolock(q);
	b = S();
	CHECK_EQ_U64(b.reserve_objects, 0);
	CHECK_EQ_U64(b.small_objects, 0);
}

/* ---- C, D: deferred frees ----------------------------------------------- */

#define NDEF 200
static void *g_def[NDEF];

static void plan_free_defs(void)
{
	for (int i = 0; i < NDEF; i++) {
		AC_CHECK(g_def[i], 100, (uint32_t)i + 1000);
		rqspin_free_nolock(g_def[i]);
	}
}

static void deferred_case(unsigned where)
{
	struct rqspin_alloc_stats a, b;
	void *q, *x;

	for (int i = 0; i < NDEF; i++) {
		g_def[i] = rqspin_malloc_nolock(100, 0);
		ac_fill(g_def[i], 100, (uint32_t)i + 1000);
	}
	x = rqspin_malloc_nolock(100, 0);
	a = S();
	arm(0, where, cls_of(100), plan_free_defs);
	if (where == HOOK_ALLOC) {
		q = rqspin_malloc_nolock(100, 0);
		ac_fill(q, 100, 5);
	} else {
		q = NULL;
		rqspin_free_nolock(x);
		x = NULL;
	}
	CHECK(atomic_load(&g_trig[0].fired));
	b = S();
	CHECK_EQ_U64(b.deferred_frees, a.deferred_frees + NDEF);
	/* The deferred ones are completed by the next call of this thread
	 * (a free drains after its own work). */
	rqspin_free_nolock(rqspin_malloc_nolock(5000, 0));
	b = S();
	CHECK_EQ_U64(b.class_objects[cls_of(100)], (q ? 1 : 0) + (x ? 1 : 0));
	/* The deferred objects are reusable: allocate NDEF again. */
	for (int i = 0; i < NDEF; i++) {
		g_def[i] = rqspin_malloc_nolock(100, 0);
		CHECK(g_def[i] != NULL);
		ac_fill(g_def[i], 100, (uint32_t)i);
	}
	for (int i = 0; i < NDEF; i++) {
		AC_CHECK(g_def[i], 100, (uint32_t)i);
		rqspin_free_nolock(g_def[i]);
	}
	if (q) {
		AC_CHECK(q, 100, 5);
		rqspin_free_nolock(q);
	}
	rqspin_free_nolock(x);
	CHECK_EQ_U64(S().class_objects[cls_of(100)], 0);
}

/* ---- E: inside the slow path -------------------------------------------- */

#define NSLOW 64
static void *g_slow[NSLOW];
static void *g_slow_new[NSLOW];

static void plan_slow(void)
{
	for (int i = 0; i < NSLOW; i++) {
		g_slow_new[i] = rqspin_malloc_nolock(i % 2 ? 700 : 1000, 0);
		CHECK(g_slow_new[i] != NULL);
		ac_fill(g_slow_new[i], 700, (uint32_t)i + 77);
	}
	for (int i = 0; i < NSLOW; i += 2) {
		AC_CHECK(g_slow[i], 1000, (uint32_t)i);
		rqspin_free_nolock(g_slow[i]);
		g_slow[i] = NULL;
	}
}

static void test_slow(void)
{
	void *many[200];
	int n = 0;

	for (int i = 0; i < NSLOW; i++) {
		g_slow[i] = rqspin_malloc_nolock(1000, 0);
		ac_fill(g_slow[i], 1000, (uint32_t)i);
	}
	arm(0, HOOK_SLOW, cls_of(1000), plan_slow);
	while (!atomic_load(&g_trig[0].fired)) {
		CHECK(n < 200);
		many[n] = rqspin_malloc_nolock(1000, 0);
		CHECK(many[n] != NULL);
		ac_fill(many[n], 1000, 999);
		n++;
	}
	for (int i = 0; i < n; i++) {
		AC_CHECK(many[i], 1000, 999);
		rqspin_free_nolock(many[i]);
	}
	for (int i = 0; i < NSLOW; i++) {
		if (g_slow[i]) {
			AC_CHECK(g_slow[i], 1000, (uint32_t)i);
			rqspin_free_nolock(g_slow[i]);
		}
		AC_CHECK(g_slow_new[i], 700, (uint32_t)i + 77);
		rqspin_free_nolock(g_slow_new[i]);
	}
	CHECK_EQ_U64(S().small_objects, 0);
}

/* ---- F: page cache busy --------------------------------------------------- */

static void plan_cache(void)
{
	/* Fresh classes (no page yet): pages must come from the pool. */
	void *p[40];

	for (int i = 0; i < 40; i++) {
		p[i] = rqspin_malloc_nolock(i % 2 ? 3000 : 6000, 0);
		CHECK(p[i] != NULL);
		ac_fill(p[i], 3000, (uint32_t)i);
	}
	for (int i = 0; i < 40; i++) {
		AC_CHECK(p[i], 3000, (uint32_t)i);
		rqspin_free_nolock(p[i]); /* empties pages: cache busy -> pool */
	}
}

static void test_cache(void)
{
	void *p[64];
	uint64_t pages0 = S().pages_active;

	/* 4 KiB objects: 16 per page; fill 3 pages then free them all, so
	 * pages are retired into the cache (hook fires there). */
	for (int i = 0; i < 48; i++) {
		p[i] = rqspin_malloc_nolock(4096, 0);
		ac_fill(p[i], 4096, (uint32_t)i);
	}
	arm(0, HOOK_CACHE, ANY_CLASS, plan_cache);
	for (int i = 0; i < 48; i++) {
		AC_CHECK(p[i], 4096, (uint32_t)i);
		rqspin_free_nolock(p[i]);
	}
	CHECK(atomic_load(&g_trig[0].fired));
	CHECK_EQ_U64(S().small_objects, 0);
	rqspin_alloc_trim();
	CHECK_LE_U64(S().pages_active, pages0 + 4);
}

/* ---- G: remote free interrupted ------------------------------------------- */

#define NREM 256
static void *g_rem[NREM];
static atomic_int g_rem_phase;

static void plan_remote(void)
{
	/* free the second half, into the same pages, from the handler */
	for (int i = NREM / 2; i < NREM; i++) {
		AC_CHECK(g_rem[i], 200, (uint32_t)i);
		rqspin_free_nolock(g_rem[i]);
	}
}

static void *remote_owner(void *arg)
{
	(void)arg;
	for (int i = 0; i < NREM; i++) {
		g_rem[i] = rqspin_malloc_nolock(200, 0);
		ac_fill(g_rem[i], 200, (uint32_t)i);
	}
	atomic_store(&g_rem_phase, 1);
	TU_WAIT_UNTIL(atomic_load(&g_rem_phase) == 2);
	/* Allocate again: collects the remote frees, reuses the objects. */
	for (int i = 0; i < NREM; i++) {
		g_rem[i] = rqspin_malloc_nolock(200, 0);
		CHECK(g_rem[i] != NULL);
		ac_fill(g_rem[i], 200, (uint32_t)i + 9);
	}
	for (int i = 0; i < NREM; i++) {
		AC_CHECK(g_rem[i], 200, (uint32_t)i + 9);
		rqspin_free_nolock(g_rem[i]);
	}
	return NULL;
}

static void test_remote(void)
{
	pthread_t t = tu_thread_start(remote_owner, NULL);
	uint64_t rf = S().remote_frees;

	TU_WAIT_UNTIL(atomic_load(&g_rem_phase) == 1);
	arm(0, HOOK_REMOTE, cls_of(200), plan_remote);
	for (int i = 0; i < NREM / 2; i++) {
		AC_CHECK(g_rem[i], 200, (uint32_t)i);
		rqspin_free_nolock(g_rem[i]);
	}
	CHECK(atomic_load(&g_trig[0].fired));
	CHECK_EQ_U64(S().remote_frees, rf + NREM);
	atomic_store(&g_rem_phase, 2);
	tu_thread_join(t);
	CHECK_EQ_U64(S().small_objects, 0);
}

/* ---- H: first call in a handler ------------------------------------------- */

static void *g_first[2];

static void plan_first(void)
{
	g_first[0] = rqspin_malloc_nolock(40, 0);
	CHECK(g_first[0] != NULL);
	ac_fill(g_first[0], 40, 1);
}

static void *first_thread(void *arg)
{
	(void)arg;
	g_plan[0] = plan_first;
	raise(SIGUSR1); /* the handler makes this thread's first call */
	g_first[1] = rqspin_malloc_nolock(40, 0);
	CHECK(g_first[1] != NULL);
	ac_fill(g_first[1], 40, 2);
	AC_CHECK(g_first[0], 40, 1);
	rqspin_free_nolock(g_first[0]);
	return NULL;
}

/* ---- J: the largest class's reserve past 256 MiB ----------------------- */

#define BIG 16384u
#define NBIG (4096u * 4u + 64u) /* 4 objects per reserve page: > 4096 pages */
static void *g_big[NBIG];

static void plan_big(void)
{
	for (unsigned i = 0; i < NBIG; i++) {
		g_big[i] = rqspin_malloc_nolock(BIG, 0);
		CHECK(g_big[i] != NULL);
		ac_fill(g_big[i], 64, i);
	}
}

static void test_reserve_large(void)
{
	struct rqspin_alloc_stats a = S(), b;
	void *q;

	rqspin_free_nolock(rqspin_malloc_nolock(BIG, 0)); /* warm: class has a page */
	arm(0, HOOK_ALLOC, cls_of(BIG), plan_big);
	q = rqspin_malloc_nolock(BIG, 0);
	CHECK(atomic_load(&g_trig[0].fired));
	CHECK(q != NULL);
	b = S();
	CHECK_EQ_U64(b.reserve_allocs, a.reserve_allocs + NBIG);
	CHECK_GE_U64(b.reserve_pages, 4097);
	for (unsigned i = 0; i < NBIG; i++) {
		CHECK_EQ_U64((uintptr_t)g_big[i] % BIG, 0); /* the documented alignment */
		AC_CHECK(g_big[i], 64, i);
		rqspin_free_nolock(g_big[i]);
	}
	rqspin_free_nolock(q);
	CHECK_EQ_U64(S().reserve_objects, a.reserve_objects);
}

static void test_first_in_handler(void)
{
	tu_thread_join(tu_thread_start(first_thread, NULL));
	AC_CHECK(g_first[1], 40, 2);
	rqspin_free_nolock(g_first[1]); /* remote free into the exited heap */
}

int main(void)
{
	tu_watchdog(120);
	tu_set_handler(SIGUSR1, handler, 0, NULL);
	tu_set_handler(SIGUSR2, handler, 0, NULL);
	rqspin__alloc_test_hook = hook;
	errno = 777;
	test_next_class();
	test_reserve();
	deferred_case(HOOK_ALLOC);
	deferred_case(HOOK_FREE);
	test_slow();
	test_cache();
	test_remote();
	test_first_in_handler();
	test_reserve_large();
	CHECK(errno == 777);
	rqspin__alloc_test_hook = NULL;
	rqspin_alloc_trim();
	{
		struct rqspin_alloc_stats st = S();

		CHECK_EQ_U64(st.small_objects, 0);
		CHECK_EQ_U64(st.reserve_objects, 0);
		CHECK_EQ_U64(st.large_objects, 0);
		CHECK_EQ_U64(st.bad_frees, 0);
	}
	tu_write_str("alloc_nested: ok\n");
	return 0;
}
