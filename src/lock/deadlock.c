/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "lock/deadlock.h"
#include "lock/held.h"

static bool lock_is_held(const void *lock)
{
	const union rqspin__word *w = lock;
	uint32_t locked = __atomic_load_n(&w->val, __ATOMIC_RELAXED) & RQSPIN__LOCKED_MASK;

	return locked == RQSPIN__LOCKED_VAL;
}

/* The thread (other than those on the chain) that holds lock, if any. */
static const struct rqspin_thread *find_holder(const void *lock, const struct rqspin_thread *const *chain,
					       unsigned nchain)
{
	uint32_t n = registry_high_water();
	uint32_t i;
	unsigned k;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = registry_slot(i);
		uint32_t cnt;

		if (!s || atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_USED)
			continue;
		cnt = held_count(&s->t);
		if (cnt < 2 || !held_contains(&s->t, cnt, lock))
			continue;
		for (k = 0; k < nchain; k++)
			if (chain[k] == &s->t)
				return NULL; /* a cycle that does not pass through us */
		return &s->t;
	}
	return NULL;
}

/* One walk; fills chain[] and waits[] and returns its length, or 0. */
static unsigned walk(const struct rqspin_thread *self, const void *lock,
		     const struct rqspin_thread **chain, const void **waits)
{
	uint32_t self_cnt = held_count(self);
	const void *cur = lock;
	unsigned n = 1;

	chain[0] = self;
	waits[0] = lock;
	while (n < RQSPIN_REPORT_MAX_CYCLE) {
		const struct rqspin_thread *h;
		uint32_t cnt;
		const void *next;

		if (!lock_is_held(cur))
			return 0;
		h = find_holder(cur, chain, n);
		if (!h)
			return 0;
		cnt = held_count(h);
		/* Past the tracked entries the holder's attempt is unknown. */
		if (cnt < 2 || cnt > RQSPIN_NR_HELD)
			return 0;
		next = held_entry(h, cnt - 1);
		if (!next)
			return 0;
		chain[n] = h;
		waits[n] = next;
		n++;
		if (held_contains(self, self_cnt, next))
			return n;
		cur = next;
	}
	return 0;
}

int deadlock_find(const struct rqspin_thread *self, const void *lock, struct rqspin_report *rep)
{
	const struct rqspin_thread *c1[RQSPIN_REPORT_MAX_CYCLE], *c2[RQSPIN_REPORT_MAX_CYCLE];
	const void *w1[RQSPIN_REPORT_MAX_CYCLE], *w2[RQSPIN_REPORT_MAX_CYCLE];
	unsigned n = walk(self, lock, c1, w1), k;

	if (n < 2 || walk(self, lock, c2, w2) != n)
		return 0;
	for (k = 0; k < n; k++)
		if (c1[k] != c2[k] || w1[k] != w2[k])
			return 0;
	if (rep) {
		rep->nthreads = n;
		for (k = 0; k < n; k++)
			report_fill_thread(&rep->threads[k], c1[k], w1[k]);
	}
	return n == 2 ? RQSPIN_EV_ABBA : RQSPIN_EV_CYCLE;
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
