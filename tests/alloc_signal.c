/* SPDX-License-Identifier: MIT */
/*
 * Signal reentrancy at random points. Worker threads run a random
 * alloc/free mix while a per-thread timer (timer_create, SIGEV_THREAD_ID,
 * every 50-200 us) interrupts them anywhere -- often inside the allocator;
 * the handler allocates and frees too. Objects travel between contexts
 * through single-producer/single-consumer rings:
 *   handler i -> normal code i        normal code i -> handler i
 *   handler i -> normal code i+1      normal code i -> handler i+1
 * so objects allocated in handlers are freed in normal code and on other
 * threads, and the reverse. Every object carries an address-keyed pattern
 * checked before it is freed; normal-context allocation must never return
 * NULL. At the end everything is freed and the statistics return to zero.
 * Deterministic nesting is covered by alloc_nested; this test adds the
 * randomness (and reports how often nesting happened).
 */
#include <sys/syscall.h>

#include "alloc_common.h"

#define NW 3           /* workers */
#define RING 256
#define NSLOT 512      /* normal code's live objects */
#define HSLOT 16       /* handler's own live objects */
#define SIG SIGUSR1

struct item {
	void *p;
	uint32_t size, gen;
};

struct ring {
	_Atomic uint32_t head, tail; /* consumer, producer */
	struct item it[RING];
};

/* Async-signal-safe: a handler and the code it interrupted are never both
 * producers (or both consumers) of one ring. */
static bool ring_put(struct ring *r, struct item x)
{
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (t - atomic_load_explicit(&r->head, memory_order_acquire) == RING)
		return false;
	r->it[t % RING] = x;
	atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	return true;
}

static bool ring_get(struct ring *r, struct item *x)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (h == atomic_load_explicit(&r->tail, memory_order_acquire))
		return false;
	*x = r->it[h % RING];
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

static struct ring h2n[NW], n2h[NW], h2x[NW], n2x[NW];
static atomic_ulong g_handler_runs, g_handler_allocs;
static tu_barrier g_bar;

static __thread int t_id;
static __thread tu_rng t_hrng;
static __thread struct item t_hslot[HSLOT];

static void free_item(struct item x)
{
	AC_CHECK(x.p, x.size, x.gen);
	rqspin_free_nolock(x.p);
}

static struct item new_item(tu_rng *r, uint32_t gen)
{
	struct item x;
	uint32_t k = tu_rng_below(r, 64);

	x.size = k == 0 ? 20000 + tu_rng_below(r, 10000)
		: k < 8 ? tu_rng_below(r, RQSPIN_ALLOC_SMALL_MAX + 1)
		: tu_rng_below(r, 512);
	x.gen = gen;
	x.p = rqspin_malloc_nolock(x.size, tu_rng_below(r, 8) == 0 ? RQSPIN_ALLOC_ZERO : 0);
	return x;
}

static void handler(int sig)
{
	int e = errno;
	int me = t_id, next = (t_id + 1) % NW, prev = (t_id + NW - 1) % NW;
	struct item x;
	int n = 1 + (int)tu_rng_below(&t_hrng, 3);

	(void)sig;
	atomic_fetch_add_explicit(&g_handler_runs, 1, memory_order_relaxed);
	for (int k = 0; k < n; k++) {
		int s = (int)tu_rng_below(&t_hrng, HSLOT);

		if (t_hslot[s].p) {
			free_item(t_hslot[s]);
			t_hslot[s].p = NULL;
		}
		x = new_item(&t_hrng, (uint32_t)tu_rng_next(&t_hrng));
		/* A handler may get NULL only when memory is exhausted. */
		CHECK(x.p != NULL);
		atomic_fetch_add_explicit(&g_handler_allocs, 1, memory_order_relaxed);
		ac_fill(x.p, x.size, x.gen);
		switch (tu_rng_below(&t_hrng, 4)) {
		case 0:
			if (ring_put(&h2n[me], x))
				break;
			/* fall through */
		case 1:
			if (ring_put(&h2x[me], x))
				break;
			/* fall through */
		default:
			t_hslot[s] = x;
		}
	}
	/* the reverse direction: objects from normal code */
	if (ring_get(&n2h[me], &x))
		free_item(x);
	if (ring_get(&n2x[prev], &x))
		free_item(x);
	(void)next;
	errno = e;
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg, next = (me + 1) % NW, prev = (me + NW - 1) % NW;
	static __thread struct item slot[NSLOT];
	uint32_t iters = TU_ITERS(300000u);
	struct sigevent sev;
	struct itimerspec its;
	timer_t tm;
	tu_rng r;
	struct item x;
	sigset_t set;

	t_id = me;
	tu_rng_seed(&r, 100 + (uint64_t)me);
	tu_rng_seed(&t_hrng, 200 + (uint64_t)me);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIG;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0);
	its.it_value.tv_sec = 0;
	its.it_value.tv_nsec = 50000;
	its.it_interval.tv_sec = 0;
	its.it_interval.tv_nsec = 50000 + 50000 * me; /* 50, 100, 150 us */
	CHECK(timer_settime(tm, 0, &its, NULL) == 0);

	for (uint32_t it = 0; it < iters; it++) {
		int s = (int)tu_rng_below(&r, NSLOT);

		if (slot[s].p) {
			free_item(slot[s]);
			slot[s].p = NULL;
		} else {
			slot[s] = new_item(&r, it);
			CHECK(slot[s].p != NULL); /* normal context: never NULL */
			ac_fill(slot[s].p, slot[s].size, slot[s].gen);
			if (tu_rng_below(&r, 4) == 0) {
				/* hand it to a handler, ours or the next thread's */
				if (ring_put(tu_rng_below(&r, 2) ? &n2h[me] : &n2x[me], slot[s]))
					slot[s].p = NULL;
			}
		}
		if (ring_get(&h2n[me], &x))
			free_item(x);
		if (ring_get(&h2x[prev], &x))
			free_item(x);
	}
	/* Stop the signals for good (a pending one stays blocked), wait for
	 * everyone, then drain what this thread consumes. */
	CHECK(timer_delete(tm) == 0);
	sigemptyset(&set);
	sigaddset(&set, SIG);
	CHECK_OK(pthread_sigmask(SIG_BLOCK, &set, NULL));
	tu_barrier_wait(&g_bar);
	while (ring_get(&h2n[me], &x))
		free_item(x);
	while (ring_get(&n2h[me], &x))
		free_item(x);
	while (ring_get(&h2x[prev], &x))
		free_item(x);
	while (ring_get(&n2x[prev], &x))
		free_item(x);
	for (int s = 0; s < NSLOT; s++)
		if (slot[s].p)
			free_item(slot[s]);
	for (int s = 0; s < HSLOT; s++)
		if (t_hslot[s].p)
			free_item(t_hslot[s]);
	(void)next;
	return NULL;
}

int main(void)
{
	pthread_t t[NW];
	struct rqspin_alloc_stats st;

	tu_watchdog(240);
	tu_set_handler(SIG, handler, SA_RESTART, NULL);
	tu_barrier_init(&g_bar, NW);
	for (int i = 0; i < NW; i++)
		t[i] = tu_thread_start(worker, (void *)(intptr_t)i);
	for (int i = 0; i < NW; i++)
		tu_thread_join(t[i]);
	rqspin_alloc_trim();
	st = ac_stats();
	tu_write_str("alloc_signal: handler runs ");
	tu_write_u64(atomic_load(&g_handler_runs));
	tu_write_str(", handler allocs ");
	tu_write_u64(atomic_load(&g_handler_allocs));
	tu_write_str(", nested ");
	tu_write_u64(st.nested);
	tu_write_str(" (next class ");
	tu_write_u64(st.next_class);
	tu_write_str(", reserve ");
	tu_write_u64(st.reserve_allocs);
	tu_write_str("), deferred frees ");
	tu_write_u64(st.deferred_frees);
	tu_write_str(", remote frees ");
	tu_write_u64(st.remote_frees);
	tu_write_str("\n");
	CHECK_GE_U64(atomic_load(&g_handler_runs), 10);
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_EQ_U64(st.large_objects, 0);
	CHECK_EQ_U64(st.reserve_objects, 0);
	CHECK_EQ_U64(st.bad_frees, 0);
	tu_write_str("alloc_signal: ok\n");
	return 0;
}
