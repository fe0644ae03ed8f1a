/* SPDX-License-Identifier: MIT */
#include <stddef.h>
#include <string.h>

#include <rqspin/rqspinlock.h>

#include "lock/deadlock.h"
#include "lock/held.h"

/* Does lock keep its waiters waiting? Held, or its pending bit taken: a
 * pending waiter stuck in one of its own signal handlers blocks the queue
 * as surely as a holder. An owner-dead lock blocks nobody. A process-
 * shared word (its permanent mark sits in the pending byte) is busy while
 * its locked byte says held. */
static bool lock_is_busy(const void *lock)
{
	const union rqspin__word *w = lock;
	uint32_t val = __atomic_load_n(&w->val, __ATOMIC_RELAXED);

	if (val & RQSPIN__PSHARED_MARK)
		return (val & RQSPIN__LOCKED_MASK) == RQSPIN__PSHARED_LOCKED;
	return (val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL || (val & RQSPIN__PENDING_MASK);
}

static inline bool slot_in(const struct rqspin_slot *s, uint32_t state)
{
	return atomic_load_explicit(&s->state, memory_order_relaxed) == state;
}

/* Does t hold lock, as far as its table tells? */
static inline bool holds(const struct rqspin_thread *t, const void *lock)
{
	return rqs_held_by(t, lock, held_waiting_for(t) == lock);
}

/* A thread in the given slot state, other than self, that holds lock. The
 * count is read first: most slots hold nothing, and the scan then touches
 * one cache line per slot. */
static const struct rqspin_thread *find_holder_in(const struct rqspin_thread *self,
						  const void *lock, uint32_t state)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);

		if (!s)
			continue;
		/* Slots are about a kilobyte apart: ask for the count a few
		 * slots ahead, so that the misses of a long scan overlap. */
		if (i + 8 < n) {
			const struct rqspin_slot *ahead = rqs_registry_slot(i + 8);

			if (ahead)
				__builtin_prefetch(&ahead->t.hot.held.cnt);
		}
		if (&s->t == self || held_count(&s->t) == 0 || !slot_in(s, state))
			continue;
		if (holds(&s->t, lock))
			return &s->t;
	}
	return NULL;
}

const struct rqspin_thread *rqs_deadlock_holder(const struct rqspin_thread *self, const void *lock)
{
	return find_holder_in(self, lock, SLOT_USED);
}

const struct rqspin_thread *rqs_deadlock_waiter(const struct rqspin_thread *self, const void *lock,
					    uint32_t state, uint32_t role)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);

		if (!s || &s->t == self || held_waiting_for(&s->t) != lock || !slot_in(s, state))
			continue;
		if (role == ROLE_NONE || atomic_load_explicit(&s->t.role, memory_order_relaxed) == role)
			return &s->t;
	}
	return NULL;
}

struct holder_query {
	const struct rqspin_thread *self;
	const void *lock;
};

static bool waiting_holder(const struct rqspin_slot *s, void *arg)
{
	const struct holder_query *q = arg;

	return &s->t != q->self && slot_in(s, SLOT_USED) && holds(&s->t, q->lock);
}

/* A holder of lock that waits for another lock. Every such holder is a
 * deadlock candidate (it waits while holding this one); a holder that is
 * not waiting ends the chain anyway (it runs, and will release). */
static const struct rqspin_thread *candidate_holder(const struct rqspin_thread *self,
						    const void *lock)
{
	struct holder_query q = { self, lock };
	struct rqspin_slot *s = rqs_registry_candidate_find(waiting_holder, &q);

	return s ? &s->t : NULL;
}

const struct rqspin_thread *rqs_deadlock_live_taker(const struct rqspin_thread *self,
						const void *lock)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);
		uint32_t role;

		if (!s || &s->t == self || held_waiting_for(&s->t) != lock || !slot_in(s, SLOT_USED))
			continue;
		role = atomic_load_explicit(&s->t.role, memory_order_relaxed);
		if (role != ROLE_QUEUED && role != ROLE_HEAD)
			return &s->t;
	}
	return NULL;
}

const struct rqspin_thread *rqs_deadlock_ghost_holder(const void *lock)
{
	return find_holder_in(NULL, lock, RQS_TABLE_RETIRED);
}

const struct rqspin_thread *rqs_deadlock_ghost_taker(const void *lock)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);

		if (s && slot_in(s, RQS_TABLE_RETIRED) && held_waiting_for(&s->t) == lock &&
		    rqs_held_by(&s->t, lock, false))
			return &s->t;
	}
	return NULL;
}

/* One walk. Returns the length of the cycle through self, or 0. */
static unsigned walk(const struct rqspin_thread *self, const void *lock, struct deadlock_chain *c)
{
	const void *cur = lock;
	unsigned k;

	c->n = 1;
	c->thread[0] = self;
	c->waits[0] = lock;
	while (c->n < RQSPIN_REPORT_MAX_CYCLE) {
		const struct rqspin_thread *h;
		const void *next;

		if (!lock_is_busy(cur))
			return 0;
		h = candidate_holder(self, cur);
		if (!h)
			return 0;
		/* A cycle that does not pass through us is not ours to
		 * break: its members find it themselves. */
		for (k = 1; k < c->n; k++)
			if (c->thread[k] == h)
				return 0;
		next = held_waiting_for(h);
		/* h runs: it will release (also when its hold of cur is a
		 * signal handler's, above the wait that handler interrupted). */
		if (!next || !rqs_held_while_waiting(h, cur, next))
			return 0;
		c->thread[c->n] = h;
		c->waits[c->n] = next;
		c->n++;
		if (rqs_held_by(self, next, next == lock))
			return c->n; /* back to us */
		cur = next;
	}
	return 0;
}

int rqs_deadlock_find(struct rqspin_thread *self, const void *lock, struct deadlock_chain *chain)
{
	struct deadlock_chain c1;
	unsigned len, k;

	/* A thread that holds no lock is in no cycle: the search is skipped,
	 * which keeps it off every single-lock workload. */
	if (!rqs_held_holds_any(self, true))
		return 0;
	stat_inc(&self->stats.deadlock_checks);
	len = walk(self, lock, &c1);
	if (len < 2)
		return 0;
	/* Confirm: the tables were read without locks, so read every link
	 * of the chain again, after the whole walk (each lock still busy,
	 * still held by the same thread, which still waits for the same
	 * next lock). The kernel's double read; checking the links found
	 * costs O(chain), where a second walk would scan the registry at
	 * each step again. */
	for (k = 1; k < c1.n; k++) {
		const struct rqspin_thread *h = c1.thread[k];

		if (!lock_is_busy(c1.waits[k - 1]) || !holds(h, c1.waits[k - 1]) ||
		    held_waiting_for(h) != c1.waits[k] ||
		    !rqs_held_while_waiting(h, c1.waits[k - 1], c1.waits[k]))
			return 0;
	}
	if (!rqs_held_by(self, c1.waits[c1.n - 1], c1.waits[c1.n - 1] == lock))
		return 0;
	if (chain)
		*chain = c1;
	return len == 2 ? RQSPIN_EV_ABBA : RQSPIN_EV_CYCLE;
}

void rqs_failure_count(struct rqspin_thread *self, int event)
{
	struct thread_stats *st = &self->stats;

	switch (event) {
	case RQSPIN_EV_AA: stat_inc(&st->aa); break;
	case RQSPIN_EV_ABBA: stat_inc(&st->abba); break;
	case RQSPIN_EV_CYCLE: stat_inc(&st->cycle); break;
	case RQSPIN_EV_NEST_FAIL: stat_inc(&st->nest_fail); break;
	default: stat_inc(&st->timeout); break;
	}
}

void rqs_failure_report_build(struct rqspin_report *rep, int event, int error, const void *lock,
			  uint64_t waited_ns, const struct rqspin_thread *self,
			  const struct deadlock_chain *chain)
{
	unsigned k;

	memset(rep, 0, sizeof(*rep));
	rep->event = (enum rqspin_event)event;
	rep->error = error;
	rep->lock = lock;
	rep->waited_ns = waited_ns;
	rep->nthreads = 1;
	if (event == RQSPIN_EV_ABBA || event == RQSPIN_EV_CYCLE) {
		rep->nthreads = chain->n;
		for (k = 0; k < chain->n; k++)
			rqs_report_fill_thread(&rep->threads[k], chain->thread[k], chain->waits[k]);
	} else {
		rqs_report_fill_thread(&rep->threads[0], self, lock);
	}
}

void rqs_report_fill_thread(struct rqspin_report_thread *out, const struct rqspin_thread *t,
			const void *waits_for)
{
	uint32_t cnt = held_count(t);
	uint32_t n = cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;
	uint32_t i;

	out->tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
	out->waits_for = waits_for;
	out->nheld = cnt;
	for (i = 0; i < RQSPIN_NR_HELD; i++) {
		const void *e = i < n ? held_entry(t, i) : NULL;

		out->held[i] = e == RQSPIN__HELD_RELEASED ? NULL : entry_lock(e);
	}
}
