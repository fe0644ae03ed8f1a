/* SPDX-License-Identifier: MIT */
/*
 * Interrupt anywhere: a signal handler that allocates and frees, delivered
 * at every instruction of the allocator's paths.
 *
 * A forked child runs a fixed list of operations -- fast alloc and free,
 * refill and carving, a page switch, a full page turning partial, an empty
 * page retired with 0..4 pages in the heap's cache, trim (collect) with
 * empty current pages, remote frees and the notify list, large objects,
 * the shared reserve, deferred frees, a thread's exit -- each three times,
 * once for each kind of handler:
 *   CHURN  allocates in the interrupted call's size class and others
 *          (checking the documented alignment), frees objects of the
 *          interrupted thread and of another thread that were handed to it;
 *   PUSH   frees the last live object of a page, so an empty page is
 *          retired into the heap's cache (or the pool) under the
 *          interrupted call;
 *   TRIM   calls rqspin_alloc_trim().
 * The parent traces the child (alloc_ptrace.h): it single-steps the first
 * run of each operation to learn its instructions, then has the child
 * repeat the operation, set up the same way, once per instruction that
 * lies in the test executable (the debug flavour of the allocator is
 * linked in statically) and delivers the handler's signal exactly at that
 * instruction. Each instruction address counts once per operation; the
 * bounded run (CTest: about 11 000 runs, 10-40 s) gives the fast paths,
 * large objects, the reserve and remote frees the churning handler only
 * and skips some sizes. The long run (RQSPIN_INTERRUPT_LONG=1, about
 * 30 000 runs) runs every operation with every handler and counts each
 * address up to 3 times (RQSPIN_INTERRUPT_VISITS=n overrides), which also
 * interrupts later turns of loops. RQSPIN_INTERRUPT_VERBOSE=1 lists the
 * operations as they are done.
 *
 * After each operation the child checks every object it holds (contents,
 * alignment), the objects the handlers hold, and the heap's invariants:
 * busy flags clear, the empty-page cache within bounds and holding distinct
 * empty pages that no class uses, each current and partial page owned by
 * the heap with a free list that is in the page, acyclic, and adds up
 * (free + used == carved).
 *
 * ptrace cannot work under ThreadSanitizer (it runs signal handlers at its
 * own points, not at the interrupted instruction), so the test is skipped
 * there.
 */
#include "alloc_ptrace.h"
/* <sys/user.h> (register layouts) has a PAGE_SIZE of its own. */
#undef PAGE_SHIFT
#undef PAGE_SIZE
#include "alloc/alloc_internal.h"
#include "alloc_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif

enum { MODE_NONE = -1, MODE_CHURN = 0, MODE_PUSH, MODE_TRIM, NMODES };
static const char *const mode_name[NMODES] = { "churn", "push", "trim" };

/* ---- what the parent reads when the child dies ---------------------------- */

static const char *volatile g_opname = "start";

static volatile int g_mode = MODE_NONE;
static volatile size_t g_outer; /* size the interrupted call works on */


static void stretch_begin(const char *name, size_t outer)
{
	g_opname = name;
	g_outer = outer;
	step_mark(STEP_SIG_BEGIN);
}

static void stretch_end(void)
{
	step_mark(STEP_SIG_END);
}

/* ---- objects the main flow holds ------------------------------------------ */

#define NLIVE 20000
struct obj {
	void *p;
	size_t n;
	uint32_t gen;
};
static struct obj g_live[NLIVE];
static uint32_t g_gen = 1;

static void obj_check_align(void *p, size_t n)
{
	if (n <= RQSPIN_ALLOC_SMALL_MAX)
		CHECK_EQ_U64((uintptr_t)p % ac_align(n), 0);
	else
		CHECK_EQ_U64((uintptr_t)p % 64, 0);
}

/* How much of an object the pattern covers: all of a small one, the ends
 * of a big one. */
static void obj_fill(void *p, size_t n, uint32_t gen)
{
	if (n <= 2048) {
		ac_fill(p, n, gen);
	} else {
		ac_fill(p, 512, gen);
		ac_fill((char *)p + n - 512, 512, gen);
	}
}

static bool obj_ok(const void *p, size_t n, uint32_t gen)
{
	if (n <= 2048)
		return ac_ok(p, n, gen);
	return ac_ok(p, 512, gen) && ac_ok((const char *)p + n - 512, 512, gen);
}

static int g_live_hint, g_live_top; /* slots >= g_live_top are empty */

static int live_add(void *p, size_t n)
{
	CHECK(p != NULL);
	obj_check_align(p, n);
	for (int k = 0; k < NLIVE; k++) {
		int i = (g_live_hint + k) % NLIVE;

		if (!g_live[i].p) {
			g_live[i] = (struct obj){ p, n, g_gen++ };
			obj_fill(p, n, g_live[i].gen);
			g_live_hint = i + 1;
			if (i >= g_live_top)
				g_live_top = i + 1;
			return i;
		}
	}
	CHECK(!"live table full");
	return -1;
}

static void live_free(int i)
{
	CHECK(obj_ok(g_live[i].p, g_live[i].n, g_live[i].gen));
	rqspin_free_nolock(g_live[i].p);
	g_live[i].p = NULL;
}

static void live_free_all(void)
{
	for (int i = 0; i < g_live_top; i++)
		if (g_live[i].p)
			live_free(i);
	g_live_top = g_live_hint = 0;
}

/* Plain (not examined) allocation kept in the live table. */
static int live_alloc(size_t n)
{
	return live_add(rqspin_malloc_nolock(n, 0), n);
}

/* ---- what the handlers use and hold --------------------------------------- */

/* Objects handed to the handlers to free: some of the interrupted thread,
 * some of the helper thread. Fixed pattern generation. */
#define NDON 32
#define DON_GEN 0xd0d0u
static _Atomic(void *) g_don[NDON];
static size_t g_don_n[NDON];

/* Last live objects of pages (PUSH frees one per interruption). */
#define NRET 192
#define RET_SIZE 12288u /* 5 objects per page */
#define RET_GEN 0x4e74u
static void *g_ret[NRET];
static atomic_int g_ret_n;

/* Each thread's handler keeps a ring of its own objects. */
#define RING 48
#define NRINGS 16
struct ring {
	void *p[RING];
	size_t n[RING];
	uint32_t gen[RING];
	unsigned head;
};
static struct ring g_ring[NRINGS];
static atomic_uint g_ring_next;
static __thread int t_ring = -1;

static atomic_ulong g_misaligned, g_handler_calls;
static atomic_size_t g_misaligned_size;

static void h_check_align(void *p, size_t n)
{
	size_t a = n <= RQSPIN_ALLOC_SMALL_MAX ? ac_align(n) : 64;

	if ((uintptr_t)p % a) {
		atomic_fetch_add(&g_misaligned, 1);
		atomic_store(&g_misaligned_size, n);
	}
}

static void ring_put(struct ring *r, void *p, size_t n, uint32_t gen)
{
	unsigned i = r->head++ % RING;

	if (r->p[i]) {
		CHECK(obj_ok(r->p[i], r->n[i], r->gen[i]));
		rqspin_free_nolock(r->p[i]);
	}
	r->p[i] = p;
	r->n[i] = n;
	r->gen[i] = gen;
}

static void h_alloc(struct ring *r, size_t n, unsigned flags, bool keep)
{
	void *p = rqspin_malloc_nolock(n, flags);
	uint32_t gen = 0x10000u + r->head;

	CHECK(p != NULL);
	h_check_align(p, n);
	CHECK(rqspin_malloc_usable_size(p) >= n);
	if (flags & RQSPIN_ALLOC_ZERO)
		for (size_t j = 0; j < n; j++)
			CHECK(((unsigned char *)p)[j] == 0);
	obj_fill(p, n, gen);
	if (keep) {
		ring_put(r, p, n, gen);
	} else {
		CHECK(obj_ok(p, n, gen));
		rqspin_free_nolock(p);
	}
}

/* The next size class up from n (a different class's busy flag). */
static size_t next_size(size_t n)
{
	size_t c = ac_class_size(n);

	return c && c < RQSPIN_ALLOC_SMALL_MAX ? c + 1 : 8;
}

static void handler_churn(struct ring *r)
{
	size_t o = g_outer ? g_outer : 16;

	h_alloc(r, o, 0, true);
	h_alloc(r, o, RQSPIN_ALLOC_ZERO, false);
	h_alloc(r, next_size(o), 0, true);
	h_alloc(r, 8, 0, r->head % 2);
	h_alloc(r, 64, 0, true);
	h_alloc(r, 4096, 0, r->head % 3 == 0);
	if (r->head % 8 == 0)
		h_alloc(r, 40000, 0, false);
	for (int i = 0; i < NDON; i++) {
		void *p = atomic_exchange(&g_don[i], NULL);

		if (p) {
			CHECK(obj_ok(p, g_don_n[i], DON_GEN + (uint32_t)i));
			rqspin_free_nolock(p);
			break;
		}
	}
}

static void handler_push(struct ring *r)
{
	int n = atomic_load(&g_ret_n);

	if (n > 0) {
		void *p = g_ret[n - 1];

		atomic_store(&g_ret_n, n - 1);
		CHECK(obj_ok(p, RET_SIZE, RET_GEN));
		rqspin_free_nolock(p);
	}
	h_alloc(r, g_outer ? g_outer : 16, 0, true);
}

static void on_inject(int sig)
{
	int e = errno;
	struct ring *r;

	(void)sig;
	if (t_ring < 0)
		t_ring = (int)atomic_fetch_add(&g_ring_next, 1) % NRINGS;
	r = &g_ring[t_ring];
	atomic_fetch_add(&g_handler_calls, 1);
	errno = 4321;
	switch (g_mode) {
	case MODE_CHURN:
		handler_churn(r);
		break;
	case MODE_PUSH:
		handler_push(r);
		break;
	case MODE_TRIM:
		rqspin_alloc_trim();
		h_alloc(r, g_outer ? g_outer : 16, 0, false);
		break;
	default:
		break;
	}
	CHECK(errno == 4321);
	errno = e;
}

/* ---- invariants ----------------------------------------------------------- */

/* Reads free objects, which AddressSanitizer builds keep poisoned. */
static ALLOC_FN void check_page(struct heap *h, struct page *pg, unsigned c)
{
	uint32_t n = 0;
	char *start = page_start(pg);

	CHECK(pg->heap == h);
	CHECK_EQ_U64(pg->cls, c);
	CHECK_EQ_U64(pg->bsize, rqs_alloc_class_size[c]);
	CHECK_LE_U64(pg->bump, pg->capacity);
	for (struct block *b = pg->free; b; b = b->next) {
		if (!((char *)b >= start && (char *)b < start + PAGE_SIZE))
			fprintf(stderr, "class %u page %p (start %p, used %u bump %u): block %p after %u\n",
				c, (void *)pg, (void *)start, pg->used, pg->bump, (void *)b, n);
		CHECK((char *)b >= start && (char *)b < start + PAGE_SIZE);
		CHECK(page_block_index(pg, (uintptr_t)b) != UINT32_MAX);
		if (c != 0)
			CHECK(b->canary == block_canary(b));
		CHECK_LE_U64(++n, pg->bump); /* no cycle */
	}
	/* Remote frees not yet taken still count as used. */
	CHECK_EQ_U64(n + pg->used, pg->bump);
}

static void check_heap(void)
{
	struct heap *h = rqs_alloc_tls_heap;

	if (!heap_is_real(h))
		return;
	CHECK(!busy_get(&h->hbusy));
	CHECK_LE_U64(h->ncache, HEAP_CACHE);
	CHECK_LE_U64(atomic_load(&h->nnested), 1ull << 40);
	for (unsigned i = 0; i < h->ncache; i++) {
		CHECK(h->cache[i]->heap == OWNER_POOL);
		for (unsigned j = 0; j < i; j++)
			CHECK(h->cache[i] != h->cache[j]);
	}
	for (unsigned c = 0; c < NCLASSES; c++) {
		struct hclass *hc = &h->cls[c];
		struct page *prev = NULL;
		unsigned n = 0;

		CHECK(!busy_get(&hc->busy));
		if (hc->page != &rqs_alloc_empty_page) {
			CHECK(!hc->page->in_partial);
			check_page(h, hc->page, c);
		}
		for (struct page *pg = hc->partial; pg; pg = pg->next) {
			CHECK(pg->in_partial);
			CHECK(pg->prev == prev);
			CHECK(pg != hc->page);
			CHECK(pg->free != NULL);
			check_page(h, pg, c);
			CHECK_LE_U64(++n, 65536);
			prev = pg;
		}
		for (unsigned i = 0; i < h->ncache; i++)
			CHECK(h->cache[i] != hc->page);
	}
}

static void check_all(void)
{
	for (int i = 0; i < g_live_top; i++)
		if (g_live[i].p) {
			obj_check_align(g_live[i].p, g_live[i].n);
			CHECK(obj_ok(g_live[i].p, g_live[i].n, g_live[i].gen));
		}
	for (int i = 0; i < NDON; i++) {
		void *p = atomic_load(&g_don[i]);

		if (p)
			CHECK(obj_ok(p, g_don_n[i], DON_GEN + (uint32_t)i));
	}
	for (int i = 0; i < atomic_load(&g_ret_n); i++)
		CHECK(obj_ok(g_ret[i], RET_SIZE, RET_GEN));
	for (int k = 0; k < NRINGS; k++)
		for (int i = 0; i < RING; i++)
			if (g_ring[k].p[i])
				CHECK(obj_ok(g_ring[k].p[i], g_ring[k].n[i], g_ring[k].gen[i]));
	check_heap();
}

/* ---- the helper thread (another heap) ------------------------------------- */

enum { H_IDLE, H_ALLOC, H_FREE, H_DONE, H_QUIT };
static atomic_int g_hcmd;
static void *g_hbuf[512];
static size_t g_hsize;
static int g_hcount;

static void *helper_main(void *arg)
{
	(void)arg;
	for (;;) {
		int cmd = atomic_load(&g_hcmd);

		if (cmd == H_QUIT)
			return NULL;
		if (cmd == H_ALLOC) {
			for (int i = 0; i < g_hcount; i++) {
				g_hbuf[i] = rqspin_malloc_nolock(g_hsize, 0);
				CHECK(g_hbuf[i] != NULL);
			}
		} else if (cmd == H_FREE) {
			for (int i = 0; i < g_hcount; i++)
				rqspin_free_nolock(g_hbuf[i]);
		} else {
			struct timespec ts = { 0, 100000 };

			nanosleep(&ts, NULL);
			continue;
		}
		atomic_store(&g_hcmd, H_DONE);
	}
}

static void helper_do(int cmd, size_t size, int count)
{
	g_hsize = size;
	g_hcount = count;
	atomic_store(&g_hcmd, cmd);
	while (atomic_load(&g_hcmd) != H_DONE) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
	}
	atomic_store(&g_hcmd, H_IDLE);
}

/* Objects for the handlers to free: local ones and the helper's. */
static void donations_refill(void)
{
	helper_do(H_ALLOC, 48, NDON / 2);
	for (int i = 0; i < NDON; i++) {
		void *p = atomic_load(&g_don[i]);

		if (p) {
			CHECK(obj_ok(p, g_don_n[i], DON_GEN + (uint32_t)i));
			rqspin_free_nolock(p);
		}
		if (i % 2) {
			g_don_n[i] = 48;
			p = g_hbuf[i / 2];
		} else {
			g_don_n[i] = (size_t)16 << (i / 2 % 8);
			p = rqspin_malloc_nolock(g_don_n[i], 0);
			CHECK(p != NULL);
		}
		obj_fill(p, g_don_n[i], DON_GEN + (uint32_t)i);
		atomic_store(&g_don[i], p);
	}
}

/* Last live objects of up to NRET pages for PUSH: each the only object
 * in use on its page, which is not its class's current page. */
static void retirables_refill(void)
{
	static void *cand[NRET * 6 + 8];
	struct hclass *hc = &rqs_alloc_tls_heap->cls[size_to_class(RET_SIZE)];
	int k = 0, n = atomic_load(&g_ret_n);

	for (int i = 0; i < n; i++)
		cand[k++] = g_ret[i];
	for (int i = 0; i < (NRET - n) * 5 + 5; i++) {
		cand[k] = rqspin_malloc_nolock(RET_SIZE, 0);
		CHECK(cand[k] != NULL);
		obj_fill(cand[k++], RET_SIZE, RET_GEN);
	}
	n = 0;
	for (int i = 0; i < k; i++) {
		struct page *pg = page_of((uintptr_t)cand[i]);

		CHECK(obj_ok(cand[i], RET_SIZE, RET_GEN));
		if (pg == hc->page || pg->used > 1 || n == NRET)
			rqspin_free_nolock(cand[i]);
		else
			g_ret[n++] = cand[i];
	}
	atomic_store(&g_ret_n, n);
}

/* ---- the operations ------------------------------------------------------- */

static void *op_alloc(const char *name, size_t n, unsigned flags)
{
	void *p;

	stretch_begin(name, n);
	p = rqspin_malloc_nolock(n, flags);
	stretch_end();
	return p;
}

static void op_free(const char *name, void *p, size_t n)
{
	stretch_begin(name, n);
	rqspin_free_nolock(p);
	stretch_end();
}

static void op_free_live(const char *name, int i)
{
	CHECK(obj_ok(g_live[i].p, g_live[i].n, g_live[i].gen));
	op_free(name, g_live[i].p, g_live[i].n);
	g_live[i].p = NULL;
}

static struct hclass *my_class(size_t n)
{
	return &rqs_alloc_tls_heap->cls[size_to_class(n)];
}

static bool page_exhausted(size_t n)
{
	struct page *pg = my_class(n)->page;

	return !pg->free && pg->bump == pg->capacity;
}

/* An index of a live object of size n on a page other than its class's
 * current one. */
static int live_off_current(size_t n)
{
	for (int i = 0; i < g_live_top; i++)
		if (g_live[i].p && g_live[i].n == n &&
		    page_of((uintptr_t)g_live[i].p) != my_class(n)->page)
			return i;
	CHECK(!"no object off the current page");
	return -1;
}

/* Set-up of a run: this heap's empty current pages and cached pages go
 * back to the pool (a trim without giving memory to the OS). */
static void heap_reset(void)
{
	rqs_heap_collect_all(rqs_alloc_tls_heap, true);
}

/* Runs every size (and every handler on every operation) when set. */
static bool g_long;

/* A live object of size n that is alone on its page (whose other objects
 * were never handed out). */
static int live_alloc_fresh_page(size_t n)
{
	for (int tries = 0; tries < 1000; tries++) {
		int i;

		while (!page_exhausted(n))
			live_alloc(n);
		i = live_alloc(n);
		if (page_of((uintptr_t)g_live[i].p)->used == 1)
			return i;
	}
	CHECK(!"no fresh page");
	return -1;
}

static const size_t fast_sizes[] = { 8, 48, 1000, 16384, 16, 24, 64, 256, 4096 };
#define NFAST (sizeof(fast_sizes) / sizeof(fast_sizes[0]))

static void scenario_fast(void)
{
	for (size_t k = 0; k < (g_long ? NFAST : 4); k++) {
		size_t n = fast_sizes[k];

		do {
			live_alloc(n);
			live_add(op_alloc("alloc fast path", n, k % 2 ? RQSPIN_ALLOC_ZERO : 0), n);
			check_all();
			live_free_all();
		} while (step_again());
		do {
			int a = live_alloc(n);

			live_alloc(n);
			op_free_live("free fast path", a);
			check_all();
			live_free_all();
		} while (step_again());
	}
}

/* The class's current page has no free object: refill (carve), switch to
 * another page, or take back a partial page. */
static void scenario_refill(void)
{
	static const size_t sizes[] = { 1024, 8, 48, 16384 };

	for (size_t k = 0; k < (g_long ? 4 : g_mode == MODE_CHURN ? 2 : 1); k++) {
		size_t n = sizes[k];

		do {
			heap_reset();
			live_alloc(n);
			while (my_class(n)->page->free)
				live_alloc(n);
			live_add(op_alloc("alloc refill (carve)", n, 0), n);
			check_all();
			live_free_all();
		} while (step_again());
		do {
			heap_reset();
			live_alloc(n);
			while (!page_exhausted(n))
				live_alloc(n);
			live_add(op_alloc("alloc refill (page switch)", n, 0), n);
			check_all();
			live_free_all();
		} while (step_again());
		do {
			heap_reset();
			live_alloc(n);
			while (!page_exhausted(n))
				live_alloc(n);
			live_alloc(n);
			op_free_live("free into a full page (partial)", live_off_current(n));
			check_all();
			live_free_all();
		} while (step_again());
		do {
			heap_reset();
			live_alloc(n);
			while (!page_exhausted(n))
				live_alloc(n);
			live_alloc(n);
			live_free(live_off_current(n));
			while (!page_exhausted(n))
				live_alloc(n);
			live_add(op_alloc("alloc refill (partial page)", n, 0), n);
			check_all();
			live_free_all();
		} while (step_again());
	}
}

/* An empty page is retired with `cached` pages in the heap's cache. */
static void scenario_retire(void)
{
	for (unsigned cached = 0; cached <= HEAP_CACHE; cached++) {
		/* bounded run: an empty cache (churn only), one place left,
		 * a full cache */
		if (!g_long && cached < HEAP_CACHE - 1 && (cached > 0 || g_mode != MODE_CHURN))
			continue;
		do {
			const size_t n = 1024; /* 64 per page */
			int first;
			struct page *pg;

			heap_reset();
			retirables_refill();
			/* a page with one live object, not current */
			first = live_alloc_fresh_page(n);
			for (int i = 0; i < 64; i++)
				live_alloc(n);
			pg = page_of((uintptr_t)g_live[first].p);
			CHECK(pg != my_class(n)->page);
			for (int i = 0; i < g_live_top; i++)
				if (i != first && g_live[i].p && page_of((uintptr_t)g_live[i].p) == pg)
					live_free(i);
			/* the cache: empty, then `cached` pages */
			rqs_heap_flush_cache(rqs_alloc_tls_heap);
			{
				void *tmp[4 * (HEAP_CACHE + 1)];
				unsigned m = 4 * (cached + 1);

				for (unsigned i = 0; i < m; i++)
					CHECK((tmp[i] = rqspin_malloc_nolock(16384, 0)) != NULL);
				for (unsigned i = 0; i < m; i++)
					rqspin_free_nolock(tmp[i]);
			}
			CHECK_EQ_U64(rqs_alloc_tls_heap->ncache, cached);
			op_free_live("free that retires a page", first);
			check_all();
			live_free_all();
		} while (step_again());
	}
}

/* Trim: current pages that are empty are released, remote frees taken. */
static void scenario_trim(void)
{
	static const size_t sizes[] = { 8, 1024, 16384 };

	for (int v = 0; v < 3; v++) {
		if (!g_long && v == 1)
			continue;
		do {
			retirables_refill();
			rqspin_alloc_trim();
			for (int k = 0; k <= v; k++)
				rqspin_free_nolock(rqspin_malloc_nolock(sizes[k], 0));
			if (v == 2) { /* a page in use, remote frees into it pending */
				for (int i = 0; i < 5; i++) {
					int j = live_alloc(100);

					if (i < 4) {
						g_hbuf[i] = g_live[j].p;
						g_live[j].p = NULL;
					}
				}
				helper_do(H_FREE, 100, 4);
			}
			stretch_begin("trim", 0);
			rqspin_alloc_trim();
			stretch_end();
			check_all();
			live_free_all();
		} while (step_again());
	}
}

/* Frees of objects owned by the helper's heap, and the owner collecting
 * frees that the helper made into this heap. */
static void scenario_remote(void)
{
	if (!g_long && g_mode != MODE_CHURN)
		goto notify;
	do {
		helper_do(H_ALLOC, 1024, 2);
		obj_fill(g_hbuf[0], 1024, 77);
		op_free("remote free (first: notify)", g_hbuf[0], 1024);
		check_all();
		rqspin_free_nolock(g_hbuf[1]);
	} while (step_again());
	do {
		helper_do(H_ALLOC, 1024, 2);
		rqspin_free_nolock(g_hbuf[0]);
		op_free("remote free (page already queued)", g_hbuf[1], 1024);
		check_all();
	} while (step_again());
	do {
		/* every live object of our current page freed by the helper:
		 * the last free queues the page (it may be empty), and trim
		 * dequeues a current page that still has free objects (the
		 * list stays, NOTIFIED is cleared) and collects it */
		heap_reset();
		for (int i = 0; i < 5; i++) {
			int j = live_alloc(100);

			g_hbuf[i] = g_live[j].p;
			g_live[j].p = NULL;
		}
		helper_do(H_FREE, 100, 5);
		stretch_begin("trim (a queued current page)", 0);
		rqspin_alloc_trim();
		stretch_end();
		check_all();
	} while (step_again());
	do {
		const size_t n = 2048; /* 32 per page */
		int idx[33];
		struct page *pa;

		/* a partial page whose other objects all wait on its remote
		 * list (too few remote frees to announce it): our free of its
		 * last object finds them and retires the page */
		heap_reset();
		for (int i = 0; i < 33; i++)
			idx[i] = live_alloc(n);
		live_free(idx[0]); /* full -> partial (FULL cleared) */
		for (int i = 1; i < 31; i++) {
			g_hbuf[i - 1] = g_live[idx[i]].p;
			g_live[idx[i]].p = NULL;
		}
		helper_do(H_FREE, n, 30); /* waits on the page, not queued */
		pa = page_of((uintptr_t)g_live[idx[31]].p);
		CHECK(pa->heap == rqs_alloc_tls_heap && pa->used == 31);
		/* outer 0: the handlers' objects stay out of this class, whose
		 * pages the next round lays out again */
		CHECK(obj_ok(g_live[idx[31]].p, n, g_live[idx[31]].gen));
		stretch_begin("free (the last object of a partial page, the others remote)", 0);
		rqspin_free_nolock(g_live[idx[31]].p);
		stretch_end();
		g_live[idx[31]].p = NULL;
		/* retired (a handler may have taken it again since, but not
		 * with 30 objects in use) */
		CHECK(pa->heap != rqs_alloc_tls_heap || pa->used != 30);
		check_all();
		live_free_all();
	} while (step_again());
notify:
	do {
		const size_t n = 2048; /* 32 per page */
		int idx[33];

		heap_reset();
		/* a full page of ours that the helper empties, then a refill
		 * that finds it on the notify list */
		for (int i = 0; i < 33; i++)
			idx[i] = live_alloc(n);
		for (int i = 0; i < 32; i++) {
			CHECK(obj_ok(g_live[idx[i]].p, n, g_live[idx[i]].gen));
			g_hbuf[i] = g_live[idx[i]].p;
			g_live[idx[i]].p = NULL;
		}
		helper_do(H_FREE, n, 32);
		while (!page_exhausted(n))
			live_alloc(n);
		live_add(op_alloc("alloc refill taking remote frees (notify)", n, 0), n);
		check_all();
		live_free_all();
	} while (step_again());
}

static void scenario_large(void)
{
	do {
		int i = live_add(op_alloc("large alloc", 100000, 0), 100000);

		check_all();
		live_free(i);
	} while (step_again());
	do {
		op_free_live("large free", live_alloc(100000));
		check_all();
	} while (step_again());
}

/* The shared reserve: a handler of a handler, with both its class and
 * the next one busy (through the test hook). */
static int g_res_stage;
static bool g_res_mark; /* examine the reserve allocation */
static void *g_res_obj;
static const size_t RES_N = 100; /* class 112; the next is 128 */

static void res_hook(unsigned where, unsigned cls)
{
	if (where != HOOK_ALLOC)
		return;
	if ((g_res_stage == 1 && cls == size_to_class(RES_N)) ||
	    (g_res_stage == 2 && cls == size_to_class(RES_N) + 1)) {
		g_res_stage++;
		raise(SIGWINCH);
	}
}

static void on_reserve_level(int sig)
{
	(void)sig;
	if (g_res_stage == 2) {
		void *p = rqspin_malloc_nolock(128, 0); /* busy 112 -> hook on 128 */

		CHECK(p != NULL);
		rqspin_free_nolock(p);
	} else if (g_res_stage == 3) {
		g_res_stage = 4;
		g_res_obj = g_res_mark ? op_alloc("reserve alloc (class and next busy)", RES_N, 0)
				       : rqspin_malloc_nolock(RES_N, 0);
	}
}

static void scenario_reserve(void)
{
	struct sigaction sa = { .sa_handler = on_reserve_level, .sa_flags = SA_NODEFER };

	CHECK(sigaction(SIGWINCH, &sa, NULL) == 0);
	do {
		void *q;

		rqspin_free_nolock(rqspin_malloc_nolock(128, 0));
		g_res_mark = true;
		g_res_stage = 1;
		rqspin__alloc_test_hook = res_hook;
		q = rqspin_malloc_nolock(RES_N, 0);
		rqspin__alloc_test_hook = NULL;
		CHECK(g_res_stage == 4);
		live_add(q, RES_N);
		live_add(g_res_obj, RES_N);
		check_all();
		live_free_all();
	} while (step_again());
	do {
		g_res_mark = false;
		g_res_stage = 1;
		rqspin__alloc_test_hook = res_hook;
		live_add(rqspin_malloc_nolock(RES_N, 0), RES_N);
		rqspin__alloc_test_hook = NULL;
		CHECK(g_res_stage == 4);
		op_free("reserve free", g_res_obj, RES_N);
		check_all();
		live_free_all();
	} while (step_again());
}

/* Free p as a handler does that finds its class busy: deferred. */
static void free_deferred_by_hand(void *p)
{
	struct hclass *hc = &rqs_alloc_tls_heap->cls[page_of((uintptr_t)p)->cls];

	busy_set(&hc->busy);
	rqspin_free_nolock(p);
	busy_clear(&hc->busy);
	CHECK(atomic_load(&rqs_alloc_tls_heap->deferred) != NULL);
}

/* Frees that a handler deferred, completed by the next free. */
static void scenario_deferred(void)
{
	do {
		int a = live_alloc(48), b = live_alloc(48);

		/* a free "deferred" by hand, as a handler would leave it */
		g_hbuf[0] = g_live[b].p;
		g_live[b].p = NULL;
		free_deferred_by_hand(g_hbuf[0]);
		op_free_live("free draining deferred frees", a);
		check_all();
		live_free_all();
	} while (step_again());
}

/* A thread's exit: its heap is collected and abandoned. */
static bool g_exit_mark = true; /* examine the thread's exit */

static void *exiting_main(void *arg)
{
	void **keep = arg;
	void *p[70];

	for (int i = 0; i < 70; i++)
		CHECK((p[i] = rqspin_malloc_nolock(1024, 0)) != NULL);
	for (int i = 0; i < 69; i++)
		rqspin_free_nolock(p[i]);
	obj_fill(p[69], 1024, 99);
	*keep = p[69];
	rqspin_free_nolock(rqspin_malloc_nolock(40, 0));
	if (g_exit_mark)
		stretch_begin("thread exit", 1024);
	return NULL; /* the marked stretch ends with the thread */
}

static void scenario_exit(void)
{
	do {
		void *keep = NULL;

		g_exit_mark = true;
		tu_thread_join(tu_thread_start(exiting_main, &keep));
		CHECK(obj_ok(keep, 1024, 99));
		rqspin_free_nolock(keep);
		check_all();
	} while (step_again());
	/* the last object of an exited thread's page comes back: its heap
	 * is reaped by the freeing thread */
	do {
		void *keep = NULL;

		g_exit_mark = false;
		tu_thread_join(tu_thread_start(exiting_main, &keep));
		CHECK(obj_ok(keep, 1024, 99));
		op_free("remote free into an exited thread's heap (reap)", keep, 1024);
		check_all();
	} while (step_again());
}

/* ---- the child ------------------------------------------------------------ */

static void child_main(void)
{
	pthread_t helper;

	step_child_signals(on_inject);
	helper = tu_thread_start(helper_main, NULL);
	rqspin_free_nolock(rqspin_malloc_nolock(1, 0));
	for (int mode = 0; mode < NMODES; mode++) {
		const char *only = getenv("RQSPIN_INTERRUPT_MODE");

		if (only && atoi(only) != mode)
			continue;
#ifdef TU_ASAN
		/* about 4x slower: the churning handler only */
		if (!g_long && mode != MODE_CHURN)
			continue;
#endif
		g_mode = mode;
		donations_refill();
		retirables_refill();
		/* The bounded run gives the fast paths, large objects and
		 * the reserve the churning handler only. */
		if (g_long || mode == MODE_CHURN) {
			scenario_fast();
			scenario_large();
			scenario_reserve();
		}
		scenario_refill();
		scenario_retire();
		scenario_trim();
		scenario_remote();
		if (g_long || mode == MODE_CHURN)
			scenario_deferred();
		donations_refill();
		scenario_exit();
		check_all();
	}
	g_mode = MODE_NONE;
	/* give everything back and check the books */
	for (int i = 0; i < NDON; i++) {
		void *p = atomic_exchange(&g_don[i], NULL);

		if (p)
			rqspin_free_nolock(p);
	}
	while (atomic_load(&g_ret_n) > 0) {
		int n = atomic_load(&g_ret_n) - 1;

		rqspin_free_nolock(g_ret[n]);
		atomic_store(&g_ret_n, n);
	}
	for (int k = 0; k < NRINGS; k++)
		for (int i = 0; i < RING; i++)
			if (g_ring[k].p[i]) {
				CHECK(obj_ok(g_ring[k].p[i], g_ring[k].n[i], g_ring[k].gen[i]));
				rqspin_free_nolock(g_ring[k].p[i]);
				g_ring[k].p[i] = NULL;
			}
	atomic_store(&g_hcmd, H_QUIT);
	tu_thread_join(helper);
	rqspin_alloc_trim();
	check_all();
	{
		struct rqspin_alloc_stats st = ac_stats();

		CHECK_EQ_U64(st.small_objects, 0);
		CHECK_EQ_U64(st.large_objects, 0);
	}
	if (atomic_load(&g_misaligned)) {
		fprintf(stderr,
			"%lu allocations in handlers broke the documented alignment (last: %zu bytes)\n",
			atomic_load(&g_misaligned), atomic_load(&g_misaligned_size));
		exit(3);
	}
	fprintf(stderr, "child: %lu handler calls\n", atomic_load(&g_handler_calls));
	exit(0);
}

/* ---- the parent ------------------------------------------------------------- */

static struct stepper g_stepper;

int main(void)
{
	const char *v = getenv("RQSPIN_INTERRUPT_VISITS");

#if defined(TU_TSAN) || !STEP_SUPPORTED
	printf("alloc_interrupt: skipped (%s)\n",
	       STEP_SUPPORTED ? "ThreadSanitizer delays signal handlers"
			      : "no single-stepping support for this architecture");
	return 77;
#endif
	g_long = getenv("RQSPIN_INTERRUPT_LONG") != NULL;
	g_stepper.visits = v ? (unsigned)atoi(v) : g_long ? 3 : 1;
	if (g_stepper.visits < 1)
		g_stepper.visits = 1;
	if (g_stepper.visits > 255)
		g_stepper.visits = 255;
	g_stepper.max_steps = 400000000ull;
	/* under CTest's 300 s; the long run has no limit */
	g_stepper.max_seconds = g_long ? 0 : 240;
	g_stepper.verbose = getenv("RQSPIN_INTERRUPT_VERBOSE") != NULL;
	step_labels.opname = &g_opname;
	step_labels.mode = &g_mode;
	step_labels.mode_names = mode_name;
	step_labels.nmodes = NMODES;
	return stepper_main(&g_stepper, "alloc_interrupt", child_main);
}
