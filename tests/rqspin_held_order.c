/* SPDX-License-Identifier: MIT */
/*
 * The held-lock table stays exact whatever the unlock order and depth.
 *
 * A worker thread runs one pattern over a ring of NL locks:
 *   same-order   lock 40 locks in order, unlock them in the same order
 *                (FIFO, the "bucket locks" pattern);
 *   random       rounds of up to 40 locks taken and released in random
 *                orders;
 *   coupling     hand-over-hand for 1000 steps (lock the next, unlock the
 *                oldest) with a window that grows from 2 to 40 locks and
 *                back; while the depth is at most RQSPIN_NR_HELD, a re-lock
 *                of a held lock is AA (-EDEADLK at once, spot-checked).
 * Throughout, every recorded entry below the count is a lock the worker
 * holds (or a RELEASED mark: an out-of-order unlock in a full table marks
 * its entry in place). Afterwards, for every lock of the ring:
 *   - the worker's count is 0 (rqspin_held_locks() drops the marks);
 *   - a contended lock (another thread holds it for 10 ms) returns 0, not
 *     -EDEADLK;
 *   - lock, then re-lock: -EDEADLK (AA) well under the timeout;
 *   - the worker exits while a live thread holds every lock of the ring
 *     (with a non-atomic "inside" flag set); a third thread's
 *     rqspin_lock_timeout(20 ms) on each must be -ETIMEDOUT: owner death is
 *     declared only for locks the dead thread really held.
 * Failures are counted (RU_EXPECT), so one run lists every broken part.
 */
#include "rqspin_util.h"

#define NL 48
#define DEPTH 40
#define COUPLING_STEPS 1000
#define HOLD_US 10000
#define AA_TIMEOUT (1 * RU_SEC)
#define AA_BOUND (300 * RU_MS)
#define PROBE_TIMEOUT (20 * RU_MS)

enum pattern { P_SAME_ORDER, P_RANDOM, P_COUPLING, P_COUNT };
static const char *const pattern_name[P_COUNT] = { "same-order", "random", "coupling" };

static rqspinlock_t ring[NL];
static bool held[NL];    /* worker's view of what it holds */
static unsigned nheld;
static unsigned aa_failures; /* spot checks that failed, to cap their cost */

static int index_of(const void *l)
{
	for (int i = 0; i < NL; i++)
		if (l == &ring[i])
			return i;
	return -1;
}

/* Every recorded entry below the count is a lock we hold (NULL and
 * RELEASED marks allowed). Reported once per pattern. */
static bool table_failed;

static void check_table(enum pattern p, const char *when)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();
	uint32_t cnt = h->cnt, n = cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;

	if (table_failed)
		return;
	for (uint32_t i = 0; i < n; i++) {
		const void *e = h->locks[i];
		int k;

		if (!e || e == RQSPIN__HELD_RELEASED)
			continue;
		k = index_of(e);
		RU_EXPECT(k >= 0 && held[k],
			  "%s: %s: entry %u of %u is lock %d, which the thread does not hold",
			  pattern_name[p], when, i, cnt, k);
		if (!(k >= 0 && held[k])) {
			table_failed = true;
			return;
		}
	}
}

/* Locks taken past the table's 31 entries are counted, not recorded, and
 * stay unrecorded until released (an out-of-order unlock below them does
 * not tell the table who they are): AA on them is not promised. */
static bool recorded[NL];

static void take(int i)
{
	RU_CHECK_RET(rqspin_lock(&ring[i]), 0);
	held[i] = true;
	recorded[i] = nheld < RQSPIN_NR_HELD;
	nheld++;
}

static void drop(int i)
{
	rqspin_unlock(&ring[i]);
	held[i] = false;
	nheld--;
}

/* Re-lock of a held lock: AA at once. */
static void spot_check_aa(enum pattern p, int i, const char *when)
{
	uint64_t t0, el;
	int r;

	if (aa_failures >= 3 || !recorded[i])
		return; /* each failure costs up to AA_TIMEOUT */
	t0 = tu_now_ns();
	r = rqspin_lock_timeout(&ring[i], AA_TIMEOUT);
	el = tu_now_ns() - t0;
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(&ring[i]); /* cannot happen; keep the state sane */
	RU_EXPECT(r == -EDEADLK && el < AA_BOUND,
		  "%s: %s: re-lock of held lock %d at depth %u: %s after %llu ms, want -EDEADLK "
		  "at once",
		  pattern_name[p], when, i, nheld, ru_err_name(r), (unsigned long long)(el / RU_MS));
	if (!(r == -EDEADLK && el < AA_BOUND))
		aa_failures++;
}

static void run_pattern(enum pattern p)
{
	tu_rng rng;

	tu_rng_seed(&rng, 1234 + p);
	switch (p) {
	case P_SAME_ORDER:
		for (int round = 0; round < 3; round++) {
			for (int i = 0; i < DEPTH; i++)
				take(i);
			for (int i = 0; i < DEPTH; i++) {
				drop(i);
				check_table(p, "unlocking in order");
			}
		}
		break;
	case P_RANDOM:
		for (int round = 0; round < 40; round++) {
			int perm[NL], d = round % 4 == 0 ? DEPTH : 1 + (int)tu_rng_below(&rng, DEPTH);

			for (int i = 0; i < NL; i++)
				perm[i] = i;
			tu_shuffle(&rng, perm, NL);
			for (int i = 0; i < d; i++)
				take(perm[i]);
			tu_shuffle(&rng, perm, d);
			for (int i = 0; i < d; i++) {
				drop(perm[i]);
				check_table(p, "unlocking in random order");
			}
		}
		break;
	case P_COUPLING: {
		int fifo[NL], head = 0, tail = 0; /* held indices, oldest first */
		int next = 0;

		for (int s = 0; s < COUPLING_STEPS; s++) {
			/* window 2..40..2 over the run */
			int phase = s * 78 / COUPLING_STEPS;
			unsigned w = (unsigned)(2 + (phase < 39 ? phase : 77 - phase));

			if (nheld < w || nheld == 0) {
				take(next);
				fifo[tail++ % NL] = next;
				next = (next + 1) % NL;
			}
			if (nheld > w || (nheld == w && s % 2)) {
				drop(fifo[head++ % NL]);
				check_table(p, "hand-over-hand");
			}
			if (s % 10 == 0 && nheld > 0 && nheld <= RQSPIN_NR_HELD)
				spot_check_aa(p, fifo[(head + (int)tu_rng_below(&rng, nheld)) % NL],
					      "hand-over-hand");
		}
		while (nheld)
			drop(fifo[head++ % NL]);
		break;
	}
	default:
		break;
	}
}

/* ---- contended lock, with a helper that holds for HOLD_US ---------------- */

static _Atomic int helper_in;

static int hold_briefly(struct ru_actor *a)
{
	rqspinlock_t *l = a->user;
	int r = rqspin_lock(l);

	if (r)
		return r;
	atomic_store(&helper_in, 1);
	tu_sleep_us(HOLD_US);
	atomic_store(&helper_in, 0);
	rqspin_unlock(l);
	return 0;
}

/* ---- the worker ---------------------------------------------------------- */

static tu_event worker_checked, worker_may_exit;

static void *worker(void *arg)
{
	enum pattern p = (enum pattern)(intptr_t)arg;
	const struct rqspin_held_locks *h;
	struct ru_actor helper;
	unsigned fails = 0;

	aa_failures = 0;
	table_failed = false;
	run_pattern(p);
	h = rqspin_held_locks();
	RU_EXPECT(h->cnt == 0, "%s: all locks released, but the held count is %u",
		  pattern_name[p], h->cnt);

	ru_actor_start(&helper, 1);
	for (int i = 0; i < NL && fails < 5; i++) {
		uint64_t t0;
		int r, hr;

		atomic_store(&helper_in, 0);
		ru_actor_post_call(&helper, hold_briefly, &ring[i]);
		RU_WAIT_FOR(atomic_load(&helper_in) || ru_actor_is_done(&helper), 30,
			    "helper holds the lock");
		t0 = tu_now_ns();
		r = rqspin_lock_timeout(&ring[i], 5 * RU_SEC);
		RU_EXPECT(r == 0, "%s: contended lock of lock %d (held 10 ms by another thread): "
				  "%s after %llu ms, want 0",
			  pattern_name[p], i, ru_err_name(r),
			  (unsigned long long)((tu_now_ns() - t0) / RU_MS));
		if (r == 0 || r == -EOWNERDEAD)
			rqspin_unlock(&ring[i]);
		else
			fails++;
		hr = ru_actor_wait(&helper, 30);
		RU_CHECK_RET(hr, 0);
	}
	ru_actor_exit(&helper);

	for (int i = 0; i < NL; i++) {
		take(i);
		spot_check_aa(p, i, "after the pattern");
		drop(i);
	}
	h = rqspin_held_locks();
	RU_EXPECT(h->cnt == 0, "%s: after the checks the held count is %u", pattern_name[p],
		  h->cnt);

	tu_event_set(&worker_checked, 1);
	tu_event_wait(&worker_may_exit, 1);
	return NULL; /* exits: its table must name no lock */
}

/* ---- the live holder and the prober --------------------------------------- */

static volatile int inside; /* set while the live holder holds the ring */
static tu_event holder_go, holder_has;

static void *live_holder(void *arg)
{
	(void)arg;
	for (int i = 0; i < NL; i++)
		RU_CHECK_RET(rqspin_lock(&ring[i]), 0);
	inside = 1;
	tu_event_set(&holder_has, 1);
	tu_event_wait(&holder_go, 1); /* blocked, not spinning */
	inside = 0;
	for (int i = NL - 1; i >= 0; i--)
		rqspin_unlock(&ring[i]);
	return NULL;
}

static void *prober(void *arg)
{
	enum pattern p = (enum pattern)(intptr_t)arg;
	unsigned bad = 0, entered = 0;

	for (int i = 0; i < NL; i++) {
		int r = rqspin_lock_timeout(&ring[i], PROBE_TIMEOUT);

		if (r == -ETIMEDOUT)
			continue;
		if (++bad <= 3)
			fprintf(stderr, "%s: after the worker exited, lock %d held by a live thread "
					"(inside=%d) gave a third thread %s, want -ETIMEDOUT\n",
				pattern_name[p], i, inside, ru_err_name(r));
		/* Keep an acquired lock: the live holder's unlock frees it. */
		if ((r == 0 || r == -EOWNERDEAD) && inside)
			entered++;
	}
	RU_EXPECT(bad == 0, "%s: %u of %d locks held by a live thread did not time out for a "
			    "third thread after the worker exited; %u entered while the holder was "
			    "inside (mutual exclusion lost)",
		  pattern_name[p], bad, NL, entered);
	return NULL;
}

static void run(enum pattern p)
{
	pthread_t w, hth, pth;
	uint64_t t0 = tu_now_ns();
	unsigned before = atomic_load(&ru_failures);

	for (int i = 0; i < NL; i++)
		rqspin_lock_init(&ring[i]);
	memset(held, 0, sizeof(held));
	nheld = 0;
	atomic_store(&worker_checked.v, 0);
	atomic_store(&worker_may_exit.v, 0);
	atomic_store(&holder_go.v, 0);
	atomic_store(&holder_has.v, 0);

	w = tu_thread_start(worker, (void *)(intptr_t)p);
	tu_event_wait(&worker_checked, 1);
	hth = tu_thread_start(live_holder, NULL);
	tu_event_wait(&holder_has, 1);
	tu_event_set(&worker_may_exit, 1);
	tu_thread_join(w); /* gone; the ring is held by the live holder */
	pth = tu_thread_start(prober, (void *)(intptr_t)p);
	tu_thread_join(pth);
	tu_event_set(&holder_go, 1);
	tu_thread_join(hth);
	for (int i = 0; i < NL; i++)
		CHECK_EQ_U64(ru_word(&ring[i]), 0);
	printf("%-10s: %s in %llu ms\n", pattern_name[p],
	       atomic_load(&ru_failures) == before ? "ok" : "FAILED",
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	for (int p = 0; p < P_COUNT; p++)
		run((enum pattern)p);
	return ru_finish("rqspin_held_order");
}
