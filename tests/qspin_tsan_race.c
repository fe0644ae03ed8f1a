/* SPDX-License-Identifier: MIT */
/*
 * Under ThreadSanitizer: data protected by a qspinlock must not be reported
 * as a race (the lock's fast and slow paths carry the happens-before edges
 * TSan needs: its mutex annotations in the header). Plain (non-atomic,
 * non-volatile) data only, in the usual patterns:
 *  - counters and a small struct updated under one lock by many threads;
 *  - a heap object handed from thread to thread through a pointer guarded
 *    by the lock, the last user frees it (malloc/free vs. earlier accesses);
 *  - trylock loops;
 *  - signal handlers on several threads taking a lock that guards data
 *    shared by those handlers.
 * In a build without TSan it simply runs the same workload (exact counts).
 * Its counterpart qspin_tsan_detect checks that a real race IS reported.
 */
#include <rqspin/qspinlock.h>

#include "test_util.h"

#define NTHREADS 4

static tu_barrier g_bar;

/* ---- counters and a struct ------------------------------------------------- */

static qspinlock_t g_lock = QSPINLOCK_INIT;
static struct {
	uint64_t count;
	uint64_t hist[8];
	char name[16];
} g_data; /* protected by g_lock */

static void *counter_worker(void *p)
{
	unsigned id = (unsigned)(uintptr_t)p;
	unsigned n = TU_ITERS(500000u);

	tu_barrier_wait(&g_bar);
	for (unsigned i = 0; i < n; i++) {
		qspin_lock(&g_lock);
		g_data.count++;
		g_data.hist[(id + i) % 8]++;
		g_data.name[i % 15] = (char)('a' + id);
		qspin_unlock(&g_lock);
	}
	return NULL;
}

/* ---- heap object hand-off -------------------------------------------------- */

struct obj {
	uint64_t payload[16];
	unsigned hops;
};

static qspinlock_t g_box_lock = QSPINLOCK_INIT;
static struct obj *g_box;     /* protected by g_box_lock */
static uint64_t g_freed;      /* protected by g_box_lock */
static uint64_t g_created;    /* protected by g_box_lock */

static void *handoff_worker(void *p)
{
	unsigned id = (unsigned)(uintptr_t)p;
	unsigned n = TU_ITERS(100000u);

	tu_barrier_wait(&g_bar);
	for (unsigned i = 0; i < n; i++) {
		struct obj *o;

		qspin_lock(&g_box_lock);
		o = g_box;
		g_box = NULL;
		if (!o) {
			g_created++;
			qspin_unlock(&g_box_lock);
			o = calloc(1, sizeof(*o));
			CHECK(o);
		} else {
			qspin_unlock(&g_box_lock);
		}
		/* We own o now: plain accesses outside any lock. */
		for (int k = 0; k < 16; k++)
			o->payload[k] += id + k;
		o->hops++;
		if (o->hops >= 8) {
			free(o);
			qspin_lock(&g_box_lock);
			g_freed++;
			qspin_unlock(&g_box_lock);
			continue;
		}
		qspin_lock(&g_box_lock);
		if (!g_box) {
			g_box = o;
			o = NULL;
		}
		qspin_unlock(&g_box_lock);
		if (o) {
			free(o);
			qspin_lock(&g_box_lock);
			g_freed++;
			qspin_unlock(&g_box_lock);
		}
	}
	return NULL;
}

/* ---- trylock -------------------------------------------------------------- */

static qspinlock_t g_try_lock = QSPINLOCK_INIT;
static uint64_t g_try_count; /* protected by g_try_lock */

static void *try_worker(void *p)
{
	unsigned n = TU_ITERS(200000u);

	(void)p;
	tu_barrier_wait(&g_bar);
	for (unsigned i = 0; i < n; i++) {
		while (!qspin_trylock(&g_try_lock))
			sched_yield();
		g_try_count++;
		qspin_unlock(&g_try_lock);
	}
	return NULL;
}

/* ---- signal handlers ------------------------------------------------------ */

static qspinlock_t g_sig_lock = QSPINLOCK_INIT;
static uint64_t g_sig_count;           /* protected by g_sig_lock */
static uint64_t g_sig_per[NTHREADS];   /* protected by g_sig_lock */
static __thread int tl_id = -1;
static atomic_int g_sig_stop;
static atomic_int g_sig_ready;

static void sig_handler(int sig)
{
	int e = errno;

	(void)sig;
	CHECK(tl_id >= 0);
	qspin_lock(&g_sig_lock);
	g_sig_count++;
	g_sig_per[tl_id]++;
	qspin_unlock(&g_sig_lock);
	errno = e;
}

static void *sig_worker(void *p)
{
	unsigned id = (unsigned)(uintptr_t)p;

	tl_id = (int)id;
	atomic_fetch_add(&g_sig_ready, 1);
	/* Work on the main lock too, so handlers interrupt holders/waiters. */
	while (!atomic_load_explicit(&g_sig_stop, memory_order_acquire)) {
		qspin_lock(&g_lock);
		g_data.count++;
		qspin_unlock(&g_lock);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[NTHREADS];
	uint64_t sig_sent = 0;

	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);

	tu_barrier_init(&g_bar, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(counter_worker, (void *)(uintptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	uint64_t hsum = 0;
	for (int k = 0; k < 8; k++)
		hsum += g_data.hist[k];
	CHECK_EQ_U64(g_data.count, (uint64_t)NTHREADS * TU_ITERS(500000u));
	CHECK_EQ_U64(hsum, g_data.count);

	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(handoff_worker, (void *)(uintptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	if (g_box) {
		free(g_box);
		g_freed++;
	}
	CHECK_EQ_U64(g_freed, g_created);

	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(try_worker, NULL);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	CHECK_EQ_U64(g_try_count, (uint64_t)NTHREADS * TU_ITERS(200000u));

	tu_set_handler(SIGUSR1, sig_handler, SA_RESTART, NULL);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(sig_worker, (void *)(uintptr_t)i);
	TU_WAIT_UNTIL(atomic_load(&g_sig_ready) == NTHREADS);
	for (unsigned k = 0; k < TU_ITERS(100000u); k++) {
		CHECK_OK(pthread_kill(t[k % NTHREADS], SIGUSR1));
		sig_sent++;
		if (k % 64 == 63)
			tu_sleep_us(100);
	}
	/* Standard signals coalesce, so runs <= signals sent; the counts
	 * below only need the handlers to be done, which joining ensures. */
	atomic_store_explicit(&g_sig_stop, 1, memory_order_release);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	uint64_t per = 0;
	for (int i = 0; i < NTHREADS; i++)
		per += g_sig_per[i];
	CHECK_EQ_U64(per, g_sig_count);
	CHECK(g_sig_count > 0 && g_sig_count <= sig_sent);
	tu_reset_handler(SIGUSR1);

	printf("qspin_tsan_race ok (%s build): %llu handler runs for %llu signals\n",
#ifdef TU_TSAN
	       "TSan",
#else
	       "plain",
#endif
	       (unsigned long long)g_sig_count, (unsigned long long)sig_sent);
	return 0;
}
