/* SPDX-License-Identifier: MIT */
#include <string.h>

#include <rqspin/lock_diag.h>

#include "lock/registry.h"

/* Counts of threads that have exited (or vanished in a fork). */
static struct {
	_Atomic uint64_t fast;
	_Atomic uint64_t pending, queued, stolen, parked, yielded, nonode;
	_Atomic uint64_t aa, abba, cycle, nest_fail, timeout, owner_dead;
	_Atomic uint64_t deadlock_checks, stall_checks, deadline_extended;
} retired;

#define FOR_EACH_STAT(X) \
	X(pending) X(queued) X(stolen) X(parked) X(yielded) X(nonode) \
	X(aa) X(abba) X(cycle) X(nest_fail) X(timeout) X(owner_dead) \
	X(deadlock_checks) X(stall_checks) X(deadline_extended)

void rqs_stats_retire(const struct rqspin_thread *t)
{
#define RETIRE(f) \
	atomic_fetch_add_explicit(&retired.f, __atomic_load_n(&t->stats.f, __ATOMIC_RELAXED), \
				  memory_order_relaxed);
	FOR_EACH_STAT(RETIRE)
#undef RETIRE
	atomic_fetch_add_explicit(&retired.fast,
				  __atomic_load_n(&t->hot.fast_acquired, __ATOMIC_RELAXED),
				  memory_order_relaxed);
}

static void add_thread(struct rqspin_lock_stats *out, const struct rqspin_thread *t)
{
#define ADD(f) out->f += __atomic_load_n(&t->stats.f, __ATOMIC_RELAXED);
	FOR_EACH_STAT(ADD)
#undef ADD
	out->fast += __atomic_load_n(&t->hot.fast_acquired, __ATOMIC_RELAXED);
}

void rqspin_lock_stats_get(struct rqspin_lock_stats *out)
{
	const struct rqspin_thread *me = (const struct rqspin_thread *)rqspin__tls_self;
	uint32_t n = rqs_registry_high_water();
	uint32_t i;

	memset(out, 0, sizeof(*out));
#define LOAD(f) out->f = atomic_load_explicit(&retired.f, memory_order_relaxed);
	FOR_EACH_STAT(LOAD)
#undef LOAD
	out->fast = atomic_load_explicit(&retired.fast, memory_order_relaxed);
	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);

		if (s && atomic_load_explicit(&s->state, memory_order_relaxed) == SLOT_USED)
			add_thread(out, &s->t);
	}
	if (me && me->slot == NO_SLOT)
		add_thread(out, me);
	out->slots_in_use = rqs_registry_in_use();
	out->slots_high_water = n;
	out->slot_limit = RQSPIN_SLOT_LIMIT;
}
