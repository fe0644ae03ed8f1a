/* SPDX-License-Identifier: MIT */
/*
 * Thread registry: lock-free slot assignment, release at thread exit,
 * reset in a forked child. See registry.h.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common/os.h"
#include "common/table.h"
#include "lock/held.h"
#include "lock/registry.h"

#define SLOTS_PER_CHUNK 64u
#define NCHUNKS RQS_TABLE_NCHUNKS(RQSPIN_SLOT_LIMIT, SLOTS_PER_CHUNK)

__attribute__((visibility("default")))
__thread struct rqspin__thread_hot *rqspin__tls_self __attribute__((tls_model("initial-exec")));

/* For threads that find every slot taken. Not visible to other threads. */
static __thread struct rqspin_thread tls_fallback __attribute__((tls_model("initial-exec")));

static _Atomic(void *) chunks[NCHUNKS];
/* Slots handed out by bumping; may run past the limit (clamped on read). */
static _Atomic uint32_t bump;
/* The slots: mapped a chunk at a time, never unmapped (common/table.h). */
static const struct rqs_table slots = {
	.chunks = chunks,
	.bump = &bump,
	.entry_size = sizeof(struct rqspin_slot),
	.per_chunk = SLOTS_PER_CHUNK,
	.limit = RQSPIN_SLOT_LIMIT,
};
static _Atomic uint32_t in_use;
/* Live threads without a slot (the TLS fallback record): other threads
 * cannot read their tables. */
static _Atomic uint32_t slotless;
/* Released slots waiting for a new thread: when there are none, a new
 * thread takes a fresh slot without scanning (16 000 threads starting
 * would otherwise scan quadratically). */
static _Atomic uint32_t nfree;
/* Set in a forked child whose parent had other threads. */
static _Atomic bool ghosts;
/* The thread id of the child thread that repairs a ghost's pending bit
 * now, or 0 (so that a waiter can tell a preempted repairer from a
 * stopped one). */
static _Atomic pid_t repairing;
static pthread_key_t exit_key;
static bool exit_key_ok;

struct rqspin_slot *rqs_registry_slot(uint32_t i)
{
	return rqs_table_at(&slots, i);
}

uint32_t rqs_registry_high_water(void)
{
	return rqs_table_count(&slots);
}

uint32_t rqs_registry_in_use(void)
{
	return atomic_load_explicit(&in_use, memory_order_relaxed);
}

bool rqs_registry_has_slotless(void)
{
	return atomic_load_explicit(&slotless, memory_order_relaxed) != 0;
}

bool rqs_registry_has_ghosts(void)
{
	return atomic_load_explicit(&ghosts, memory_order_relaxed);
}

/* acquire: the previous repairer's writes (the cleared bit, the ghosts'
 * roles) are seen by this one, which reads them under the flag. */
bool rqs_registry_repair_begin(void)
{
	pid_t clear = 0;

	return atomic_compare_exchange_strong_explicit(&repairing, &clear,
						       (pid_t)rqs_os_gettid(),
						       memory_order_acquire, memory_order_relaxed);
}

/* release: pairs with begin's acquire and busy's. */
void rqs_registry_repair_end(void)
{
	atomic_store_explicit(&repairing, 0, memory_order_release);
}

/* acquire: a thread that saw the flag drop sets the pending bit after the
 * repair's clearing CAS in the word's modification order (happens-before),
 * so the CAS cannot have read, and cleared, that thread's bit. */
pid_t rqs_registry_repair_busy(void)
{
	return atomic_load_explicit(&repairing, memory_order_acquire);
}

#define CAND_WORDS ((RQSPIN_SLOT_LIMIT + 63) / 64)
static _Atomic uint64_t candidates[CAND_WORDS];

/* relaxed: the search that must see the bit runs after a seq_cst fence
 * that follows the marking thread's own fence (slowpath.c,
 * pre_wait_check): the store-buffering pair that those fences order. */
bool rqs_registry_candidate_mark(uint32_t slot)
{
	uint64_t bit = 1ull << (slot % 64);

	return !(atomic_fetch_or_explicit(&candidates[slot / 64], bit, memory_order_relaxed) &
		 bit);
}

void rqs_registry_candidate_clear(uint32_t slot)
{
	atomic_fetch_and_explicit(&candidates[slot / 64], ~(1ull << (slot % 64)),
				  memory_order_relaxed);
}

struct rqspin_slot *rqs_registry_candidate_find(bool (*fn)(const struct rqspin_slot *, void *),
					    void *arg)
{
	uint32_t n = (rqs_registry_high_water() + 63) / 64, w;

	for (w = 0; w < n; w++) {
		uint64_t bits = atomic_load_explicit(&candidates[w], memory_order_relaxed);

		while (bits) {
			uint32_t slot = w * 64 + (uint32_t)__builtin_ctzll(bits);
			struct rqspin_slot *s = rqs_registry_slot(slot);

			bits &= bits - 1;
			if (s && fn(s, arg))
				return s;
		}
	}
	return NULL;
}

static void thread_record_init(struct rqspin_thread *t, uint32_t slot)
{
	t->slot = slot;
	t->nesting = 0;
	t->exit_rounds = 0;
	t->pshared_next = 0;
	memset(t->pshared_taken, 0, sizeof(t->pshared_taken));
	atomic_store_explicit(&t->tid, (pid_t)rqs_os_gettid(), memory_order_relaxed);
}

static struct rqspin_slot *slot_claim(void)
{
	uint32_t n = rqs_registry_high_water();
	uint32_t i;

	/* Reuse a released slot first: keeps the registry as small as the
	 * peak number of live threads, however many come and go. */
	for (i = 0; i < n && atomic_load_explicit(&nfree, memory_order_relaxed); i++) {
		struct rqspin_slot *s = rqs_registry_slot(i);
		uint32_t expect = SLOT_FREE;

		/* acquire: the previous owner reset the record, then released
		 * it with a release store of SLOT_FREE. */
		if (s && atomic_load_explicit(&s->state, memory_order_relaxed) == SLOT_FREE &&
		    atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_USED,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			atomic_fetch_sub_explicit(&nfree, 1, memory_order_relaxed);
			thread_record_init(&s->t, i);
			return s;
		}
	}
	/* A fresh slot. It reads SLOT_FRESH, which scanners never take, until
	 * we mark it used: nobody else can claim it in between. */
	{
		struct rqspin_slot *s = rqs_table_bump(&slots, &i, NULL);

		if (!s)
			return NULL;
		thread_record_init(&s->t, i);
		atomic_store_explicit(&s->state, SLOT_USED, memory_order_relaxed);
		return s;
	}
}

struct rqspin__thread_hot *rqspin__self_slow(void)
{
	struct rqspin_slot *s;
	struct rqspin_thread *t;
	sigset_t all, old;

	/* Registration runs with signals blocked: a handler that lands
	 * between the claim and the TLS store below would see no record and
	 * claim a second slot, which nobody would ever free. (First call of
	 * each thread only; pthread_sigmask is async-signal-safe.) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (rqspin__tls_self) {
		/* A handler registered us before we blocked signals. */
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return rqspin__tls_self;
	}
	s = slot_claim();
	if (s) {
		t = &s->t;
		atomic_fetch_add_explicit(&in_use, 1, memory_order_relaxed);
	} else {
		t = &tls_fallback;
		thread_record_init(t, NO_SLOT);
		/* Before the record is used: a lock it takes is then never
		 * mistaken for an exited thread's (rqs_held_orphan_take). */
		atomic_fetch_add_explicit(&slotless, 1, memory_order_seq_cst);
	}
	/* Publish to our own signal handlers only after the record is ready. */
	atomic_signal_fence(memory_order_seq_cst);
	rqspin__tls_self = &t->hot;
	/* Ask for a call at thread exit. For keys below 32 (ours is created
	 * at load time, before almost any other) glibc stores the value in
	 * the thread descriptor without allocating, so this is safe in a
	 * signal handler. */
	if (exit_key_ok)
		pthread_setspecific(exit_key, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return &t->hot;
}

void rqspin__count_fast_cold(void)
{
	rqspin__count_fast_on(rqspin__self_slow());
}

static void slot_reset(struct rqspin_slot *s)
{
	unsigned i;

	atomic_store_explicit(&s->t.tid, 0, memory_order_relaxed);
	for (i = 0; i < RQSPIN_NR_HELD; i++)
		__atomic_store_n(&s->t.hot.held.locks[i], NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&s->t.hot.held.cnt, 0, __ATOMIC_RELAXED);
	s->t.nesting = 0;
	s->t.table_busy = 0;
	atomic_store_explicit(&s->t.waiting_for, NULL, memory_order_relaxed);
	atomic_store_explicit(&s->t.role, ROLE_NONE, memory_order_relaxed);
	for (i = 0; i < RELEASED_CELLS; i++)
		atomic_store_explicit(&s->t.released[i], NULL, memory_order_relaxed);
	atomic_store_explicit(&s->t.nposted, 0, memory_order_relaxed);
	atomic_store_explicit(&s->t.released_untracked, 0, memory_order_relaxed);
	for (i = 0; i < MCS_MAX_NODES; i++) {
		atomic_store_explicit(&s->nodes[i].next, NULL, memory_order_relaxed);
		atomic_store_explicit(&s->nodes[i].locked, MCS_WAIT, memory_order_relaxed);
	}
}

static void thread_exit(void *arg)
{
	struct rqspin_thread *t = arg;

	/* Our key was created at load time, so its destructor runs before
	 * the program's in each round, and a program may end a critical
	 * section in one of its own (a per-thread guard released at exit).
	 * While the thread holds a lock, have glibc call us again in its
	 * next round (it runs rounds while keys are set, at most
	 * PTHREAD_DESTRUCTOR_ITERATIONS); what is still held is abandoned
	 * (owner-dead) one round before the last: the sanitizers' runtimes
	 * tear a thread's state down in the last round (their own keys set
	 * again until then), and ours, after theirs in key order, would
	 * then run on a dead thread (SEGV under ThreadSanitizer). */
	rqs_held_drain(t);
	if (t->exit_rounds + 2 < PTHREAD_DESTRUCTOR_ITERATIONS && rqs_held_holds_any(t, false) &&
	    pthread_setspecific(exit_key, t) == 0) {
		t->exit_rounds++;
		return;
	}
	rqs_held_abandon(t);
	rqs_stats_retire(t);
	rqspin__tls_self = NULL;
	if (t->slot == NO_SLOT) {
		memset(t, 0, sizeof(*t));
		atomic_fetch_sub_explicit(&slotless, 1, memory_order_relaxed);
		return;
	}
	slot_reset(slot_of(t));
	memset(&t->stats, 0, sizeof(t->stats));
	__atomic_store_n(&t->hot.fast_acquired, 0, __ATOMIC_RELAXED);
	atomic_fetch_sub_explicit(&in_use, 1, memory_order_relaxed);
	/* release: the next claimer (acquire CAS) sees the reset record. */
	atomic_store_explicit(&slot_of(t)->state, SLOT_FREE, memory_order_release);
	atomic_fetch_add_explicit(&nfree, 1, memory_order_relaxed);
}

/* A vanished thread's ROLE_PENDING says it holds the pending bit of the
 * lock it waits for, and a child's repair clears that bit when no live
 * thread shows the same role there (slowpath.c, pending_repair). The role
 * may be stale: the thread stores it before it sets the bit (forked in
 * between), and a queue head keeps it after losing its claim to another
 * waiter. Now, while the forking thread is the only one, the word tells:
 * without the bit the role is dropped, else a bit a child thread sets
 * later, whose own wait a signal handler then hides (it publishes the
 * handler's lock), would be taken for the ghost's and cleared under it.
 * With the bit set, it may be the ghost's, and the repair stays due. The
 * lock was mapped at the fork: its waiter was in a lock call on it.
 * relaxed: the other threads are gone; a lock word in shared memory that
 * another process changes meanwhile only makes the answer that of a
 * moment later, and a bit set later is not this ghost's. */
static void ghost_role_settle(struct rqspin_thread *t)
{
	const union rqspin__word *l;

	if (atomic_load_explicit(&t->role, memory_order_relaxed) != ROLE_PENDING)
		return;
	l = atomic_load_explicit(&t->waiting_for, memory_order_relaxed);
	if (!l || !(__atomic_load_n(&l->val, __ATOMIC_RELAXED) & RQSPIN__PENDING_MASK))
		atomic_store_explicit(&t->role, ROLE_NONE, memory_order_relaxed);
}

/* In a forked child only the forking thread exists. The other threads'
 * slots become ghosts: their MCS nodes may sit in lock queues that the
 * child inherited, so the memory is never handed to a new thread, and
 * their held tables, roles and waits stay as they were, for the child's
 * waiters to read. fork() writes no lock word: a lock in MAP_SHARED memory
 * may belong to the parent's threads, which are alive. What the ghosts
 * left in a lock (held byte, pending bit, queue) is found and repaired by
 * a child thread when it waits on that lock (slowpath.c). A ghost costs
 * one slot per vanished thread. */
static void atfork_child(void)
{
	struct rqspin_thread *me = (struct rqspin_thread *)rqspin__tls_self;
	uint32_t n = rqs_registry_high_water();
	uint32_t i, used = 0;

	for (i = 0; i < n; i++) {
		struct rqspin_slot *s = rqs_registry_slot(i);

		if (!s)
			continue;
		if (me && me->slot == i) {
			atomic_store_explicit(&s->t.tid, (pid_t)rqs_os_gettid(),
					      memory_order_relaxed);
			used++;
			continue;
		}
		if (atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_USED)
			continue;
		ghost_role_settle(&s->t);
		rqs_stats_retire(&s->t);
		memset(&s->t.stats, 0, sizeof(s->t.stats));
		__atomic_store_n(&s->t.hot.fast_acquired, 0, __ATOMIC_RELAXED);
		atomic_store_explicit(&s->state, RQS_TABLE_RETIRED, memory_order_relaxed);
		atomic_store_explicit(&ghosts, true, memory_order_relaxed);
	}
	if (me && me->slot == NO_SLOT)
		atomic_store_explicit(&me->tid, (pid_t)rqs_os_gettid(), memory_order_relaxed);
	atomic_store_explicit(&in_use, used, memory_order_relaxed);
	/* A repairer in the parent (a thread of a child forking again) is a
	 * ghost now and will never drop the flag; the forking thread is in
	 * no repair (repairs block signals, so not from a handler either).
	 * What the vanished repairer did or did not do is left as a repair
	 * for the next one. */
	atomic_store_explicit(&repairing, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void registry_init(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
	pthread_atfork(NULL, NULL, atfork_child);
}
