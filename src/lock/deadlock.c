/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "lock/deadlock.h"
#include "lock/held.h"

/* Does lock keep its waiters waiting? Held, or its pending bit taken: a
 * pending waiter stuck in one of its own signal handlers blocks the queue
 * as surely as a holder (its table lists the lock below the handler's
 * attempt, so find_holder finds it). An owner-dead lock blocks nobody. */
static bool lock_is_busy(const void *lock)
{
	const union rqspin__word *w = lock;
	uint32_t val = __atomic_load_n(&w->val, __ATOMIC_RELAXED);

	return (val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL || (val & RQSPIN__PENDING_MASK);
}

/* The thread holding lock: a live slot whose table has lock below its top
 * entry (the top entry is the holder's own attempt). */
static const struct rqspin_thread *find_holder(const void *lock)
{
	uint32_t n = registry_high_water();
	uint32_t i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = registry_slot(i);
		uint32_t cnt;

		if (!s || atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_USED)
			continue;
		cnt = held_count(&s->t);
		if (cnt >= 2 && held_contains(&s->t, cnt, lock))
			return &s->t;
	}
	return NULL;
}

/* One walk. Returns the length of the cycle found (the chain closes on
 * chain->thread[n - len]), or 0. */
static unsigned walk(const struct rqspin_thread *self, const void *lock, struct deadlock_chain *c)
{
	uint32_t self_cnt = held_count(self);
	const void *cur = lock;
	unsigned k;

	c->n = 1;
	c->thread[0] = self;
	c->waits[0] = lock;
	while (c->n < RQSPIN_REPORT_MAX_CYCLE) {
		const struct rqspin_thread *h;
		uint32_t cnt;
		const void *next;

		if (!lock_is_busy(cur))
			return 0;
		h = find_holder(cur);
		if (!h || h == self)
			return 0; /* (self: AA, reported elsewhere) */
		for (k = 1; k < c->n; k++)
			if (c->thread[k] == h)
				return c->n - k; /* a cycle ahead of us */
		cnt = held_count(h);
		/* Past the tracked entries the holder's attempt is unknown. */
		if (cnt < 2 || cnt > RQSPIN_NR_HELD)
			return 0;
		next = held_entry(h, cnt - 1);
		if (!next)
			return 0;
		c->thread[c->n] = h;
		c->waits[c->n] = next;
		c->n++;
		if (held_contains(self, self_cnt, next))
			return c->n; /* back to us */
		cur = next;
	}
	return 0;
}

int deadlock_find(const struct rqspin_thread *self, const void *lock,
		  struct deadlock_chain *chain)
{
	struct deadlock_chain c1, c2;
	unsigned len = walk(self, lock, &c1), k;

	if (len < 2 || walk(self, lock, &c2) != len || c2.n != c1.n)
		return 0;
	for (k = 0; k < c1.n; k++)
		if (c1.thread[k] != c2.thread[k] || c1.waits[k] != c2.waits[k])
			return 0;
	if (chain)
		*chain = c1;
	return len == 2 ? RQSPIN_EV_ABBA : RQSPIN_EV_CYCLE;
}

void report_fill_thread(struct rqspin_report_thread *out, const struct rqspin_thread *t,
			const void *waits_for)
{
	uint32_t cnt = held_count(t);
	uint32_t n = cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;
	uint32_t i;

	out->tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
	out->waits_for = waits_for;
	out->nheld = cnt;
	for (i = 0; i < RQSPIN_NR_HELD; i++)
		out->held[i] = i < n ? held_entry(t, i) : NULL;
}
