/* SPDX-License-Identifier: MIT */
/*
 * The no-node fallback: linked with rqspin_tiny (RQSPIN_SLOT_LIMIT=4), so
 * only 4 threads get a registry slot and MCS nodes; the rest take the lock
 * without a node. 16 threads hammer one lock, then 4 locks, mixing slotted
 * and slot-less threads in the same lock; signals (pthread_kill from main)
 * interrupt them at random points and the handler takes another lock.
 * Mutual exclusion must stay exact, the stats must show slot_limit == 4,
 * slots_in_use <= 4 while running and nonode > 0.
 *
 * Free-running threads need not contend at all (under qemu each one can
 * finish its loop inside one time slice), so the no-node path is then
 * forced: main holds the lock while fresh threads, most of them slot-less,
 * line up behind it, until the exit-folded stats show a no-node wait.
 */
#include <rqspin/lock_diag.h>
#include <rqspin/qspinlock.h>

#include "guarded.h"
#include "test_util.h"

#define NTHREADS 16
#define NLOCKS 4


static struct guarded g_one, g_many[NLOCKS], g_sig;
static tu_barrier g_bar;
static atomic_int g_running;

static void critical(struct guarded *g, uint32_t r)
{
	guarded_locked_update(g, r, 15);
}

struct worker {
	pthread_t thread;
	unsigned id;
	unsigned iters;
	uint64_t picks[NLOCKS];
	_Atomic uint64_t sig_runs; /* this thread's handler runs */
	tu_rng hrng;               /* the handler's generator */
} __attribute__((aligned(128)));

static struct worker g_w[NTHREADS];
static __thread struct worker *tl_me;
static atomic_uint g_arrived;

static void handler(int sig)
{
	int e = errno;
	struct worker *me = tl_me;

	(void)sig;
	CHECK(me != NULL);
	critical(&g_sig, (uint32_t)tu_rng_next(&me->hrng));
	atomic_fetch_add_explicit(&me->sig_runs, 1, memory_order_relaxed);
	errno = e;
}

static void *worker_main(void *p)
{
	struct worker *me = p;
	tu_rng rng;

	tu_rng_seed(&rng, me->id);
	tu_rng_seed(&me->hrng, 77 + me->id);
	tl_me = me;
	tu_barrier_wait(&g_bar);
	/* Phase 1: everybody on one lock. */
	for (unsigned i = 0; i < me->iters; i++)
		critical(&g_one, (uint32_t)tu_rng_next(&rng));
	tu_barrier_wait(&g_bar);
	/* Phase 2: four locks picked at random. */
	for (unsigned i = 0; i < me->iters; i++) {
		unsigned k = tu_rng_below(&rng, NLOCKS);

		critical(&g_many[k], (uint32_t)tu_rng_next(&rng));
		me->picks[k]++;
		if (i % 512 == 0)
			sched_yield();
	}
	/* Stay alive (and a signal target) until main stops signalling. */
	atomic_fetch_sub(&g_running, 1);
	tu_barrier_wait(&g_bar);
	return NULL;
}

/* One forced-contention round's thread: one update of g_one behind main. */
static void *contender_main(void *p)
{
	(void)p;
	atomic_fetch_add(&g_arrived, 1);
	critical(&g_one, (uint32_t)atomic_load(&g_arrived));
	return NULL;
}

static uint32_t word(const qspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_ACQUIRE);
}

/* Main holds g_one while NTHREADS fresh threads call it: one takes the
 * pending bit, at most 3 get a slot and queue, and the rest (at least 12)
 * have no slot and must wait without a node. Main lets go only once all
 * have arrived, a waiter holds pending, and 20 ms more have passed for the
 * others to reach the slow path. Returns the acquisitions it caused. */
static uint64_t forced_round(void)
{
	pthread_t t[NTHREADS];

	atomic_store(&g_arrived, 0);
	qspin_lock(&g_one.lock);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(contender_main, NULL);
	TU_WAIT_UNTIL(atomic_load(&g_arrived) == NTHREADS);
	TU_WAIT_UNTIL(word(&g_one.lock) & RQSPIN__PENDING_MASK);
	tu_sleep_us(20000);
	qspin_unlock(&g_one.lock);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	return NTHREADS + 1;
}

int main(void)
{
	const unsigned iters = TU_ITERS(200000u);
	struct rqspin_lock_stats s0, s;
	uint64_t kills = 0, sig_runs = 0;
	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);

	rqspin_lock_stats_get(&s0);
	CHECK_EQ_U64(s0.slot_limit, 4);

	/* Main takes one of the 4 slots. */
	qspin_lock(&g_one.lock);
	qspin_unlock(&g_one.lock);

	tu_set_handler(SIGUSR1, handler, SA_RESTART, NULL);
	tu_barrier_init(&g_bar, NTHREADS + 1);
	atomic_store(&g_running, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		g_w[i].id = (unsigned)i + 1;
		g_w[i].iters = iters;
		g_w[i].thread = tu_thread_start(worker_main, &g_w[i]);
	}
	tu_barrier_wait(&g_bar); /* start phase 1 */
	tu_barrier_wait(&g_bar); /* start phase 2 */
	rqspin_lock_stats_get(&s);
	CHECK_LE_U64(s.slots_in_use, 4);
	CHECK_LE_U64(s.slots_high_water, 4);
	for (unsigned k = 0; atomic_load(&g_running) > 0; k++) {
		CHECK_OK(pthread_kill(g_w[k % NTHREADS].thread, SIGUSR1));
		kills++;
		if (k % NTHREADS == NTHREADS - 1) {
			tu_sleep_us(200);
			rqspin_lock_stats_get(&s);
			CHECK_LE_U64(s.slots_in_use, 4);
		}
	}
	tu_barrier_wait(&g_bar); /* signals stopped: workers may exit */
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(g_w[i].thread);

	CHECK_EQ_U64(g_one.a, (uint64_t)NTHREADS * iters);
	CHECK_EQ_U64(g_one.b, g_one.a);
	uint64_t total = 0;
	for (int k = 0; k < NLOCKS; k++) {
		uint64_t want = 0;

		for (int i = 0; i < NTHREADS; i++)
			want += g_w[i].picks[k];
		CHECK_EQ_U64(g_many[k].a, want);
		CHECK_EQ_U64(g_many[k].b, want);
		CHECK(!qspin_is_locked(&g_many[k].lock));
		total += want;
	}
	CHECK_EQ_U64(total, (uint64_t)NTHREADS * iters);
	for (int i = 0; i < NTHREADS; i++)
		sig_runs += atomic_load(&g_w[i].sig_runs);
	CHECK_EQ_U64(g_sig.a, sig_runs);
	CHECK_EQ_U64(g_sig.b, sig_runs);

	/* All workers have exited, so the slot-less ones' counts are in. */
	uint64_t forced = 0, forced_acq = 0;

	rqspin_lock_stats_get(&s);
	while (s.nonode == s0.nonode && forced < 50) {
		forced_acq += forced_round();
		forced++;
		rqspin_lock_stats_get(&s);
	}
	CHECK_EQ_U64(g_one.a, (uint64_t)NTHREADS * iters + forced * NTHREADS);
	CHECK_EQ_U64(g_one.b, g_one.a);

	printf("qspin_nonode: %llu forced-contention rounds\n", (unsigned long long)forced);
	printf("qspin_nonode: %d threads x %u x 2 phases ok; %llu handler runs (%llu kills); "
	       "nonode %llu, queued %llu, pending %llu, stolen %llu, fast %llu; slots in use "
	       "%llu, high water %llu, limit %llu\n",
	       NTHREADS, iters, (unsigned long long)sig_runs, (unsigned long long)kills,
	       (unsigned long long)s.nonode, (unsigned long long)s.queued,
	       (unsigned long long)s.pending, (unsigned long long)s.stolen,
	       (unsigned long long)s.fast, (unsigned long long)s.slots_in_use,
	       (unsigned long long)s.slots_high_water, (unsigned long long)s.slot_limit);
	CHECK_EQ_U64(s.slot_limit, 4);
	CHECK_LE_U64(s.slots_high_water, 4);
	CHECK_LE_U64(s.slots_in_use, 1); /* main */
	CHECK(s.nonode > s0.nonode);
	/* Every acquisition is counted exactly once (the slot-less threads'
	 * counts were folded in when they exited): main's, the workers', the
	 * handlers' and the forced rounds'. A handler that takes a lock in the
	 * middle of its thread's counter update must not lose a count: the
	 * increment is a single instruction or an atomic add. */
	uint64_t counted = s.fast + s.pending + s.queued + s.stolen + s.nonode - s0.fast -
			   s0.pending - s0.queued - s0.stolen - s0.nonode;
	uint64_t want = 2ull * NTHREADS * iters + sig_runs + 1 + forced_acq;
	CHECK_EQ_U64(counted, want);
	return 0;
}
