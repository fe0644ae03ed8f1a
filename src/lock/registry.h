/* SPDX-License-Identifier: MIT */
/*
 * Thread registry: the userspace stand-in for the kernel's CPU numbers.
 *
 * A thread gets a small slot number on its first lock call (lazily, lock
 * free, so that first call may be inside a signal handler) and gives it back
 * when it exits. A slot record holds the thread's held-lock table, its MCS
 * nodes (one per signal-nesting level) and its statistics. Records live in
 * chunks that are mapped once and never unmapped: a tail decoded from any
 * lock word, or a held table read by another thread, is always valid
 * memory, whatever the thread that owned it has done since.
 */
#ifndef RQSPIN_REGISTRY_H
#define RQSPIN_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <rqspin/static/lock_word.h>

#include "common/assert.h"
#include "common/compiler.h"
#include "common/table.h"

#define MCS_MAX_NODES 4 /* normal code + 3 nested signal handlers */

/* Slot+1 must fit the 14 tail bits. Test builds may shrink the limit. */
#ifndef RQSPIN_SLOT_LIMIT
#define RQSPIN_SLOT_LIMIT ((1u << RQSPIN__TAIL_SLOT_BITS) - 1)
#endif
_Static_assert(RQSPIN_SLOT_LIMIT + 1 <= (1u << RQSPIN__TAIL_SLOT_BITS), "slot+1 must fit the tail");

#define NO_SLOT UINT32_MAX
#define CACHELINE RQS_CACHELINE

/*
 * Values of mcs_node.locked (a futex word), and who moves it (slowpath.c):
 *
 *   WAIT --(waiter, after its spin budget: CAS)--> PARKED   futex-sleeps
 *   WAIT | PARKED --(predecessor: release exchange)--> GO | ABORT
 *        (the exchange returns PARKED: the predecessor wakes it)
 *   PARKED --(head, barging mode only: CAS, then wake)--> WAIT
 *        (mcs_prewake: its turn is near; it polls with short sleeps)
 *   GO: now the queue head.  ABORT: the head timed out; leave with
 *   -ETIMEDOUT and pass ABORT on.
 * The waiter sets WAIT itself before it publishes the node (tail exchange);
 * nothing else is written to the word while it is queued. A resilient
 * waiter whose predecessor vanished in fork() stops waiting without a GO.
 */
#define MCS_WAIT 0u
#define MCS_GO 1u       /* predecessor handed over the queue head */
#define MCS_ABORT 2u    /* RES_TIMEOUT_VAL: head timed out, leave with -ETIMEDOUT */
#define MCS_PARKED 0x100u /* waiter sleeps on the futex; the writer must wake it */

struct mcs_node {
	_Atomic(struct mcs_node *) next;
	_Atomic uint32_t locked;
	/* Set by the waiter behind: a waiter whose own budget ran out asks
	 * the head, from node to node, to dissolve the queue (slowpath.c,
	 * queued_ask_abort). Cleared when the node queues. */
	_Atomic uint32_t abort_req;
} __attribute__((aligned(CACHELINE)));

/* Slow-path event counters. Written by the owning thread (and its signal
 * handlers) with stat_inc, read by anyone with relaxed atomic loads. */
struct thread_stats {
	uint64_t pending, queued, stolen, parked, yielded, nonode;
	uint64_t aa, abba, cycle, nest_fail, timeout, owner_dead;
	uint64_t deadlock_checks, stall_checks, deadline_extended;
};

/* The per-thread record. Slotted threads have one inside a slot; threads
 * past the slot limit use a thread-local one that nobody else can see. */
/* Cross-thread unlocks waiting to be dropped from the owner's table: one
 * cell per table entry, so a post always finds a free cell. */
#define RELEASED_CELLS RQSPIN_NR_HELD

#define RQS_PSHARED_TAKEN 32u

struct rqspin_thread {
	struct rqspin__thread_hot hot; /* first: rqspin__tls_self points here */
	struct thread_stats stats;
	uint32_t slot;     /* NO_SLOT for the thread-local fallback */
	uint32_t nesting;  /* slow paths of this thread in progress (MCS node index) */
	_Atomic pid_t tid; /* for reports and the owner's scheduling state */
	/* The lock this thread's innermost slow path waits for, or NULL.
	 * Written by the thread (and its handlers, which restore it), read
	 * by deadlock checks and cross-thread unlocks of other threads. */
	_Atomic(const void *) waiting_for;
	/* Non-zero while this thread moves entries of its table around; its
	 * signal handlers then leave the table below them alone. */
	uint32_t table_busy;
	/* How the innermost slow path waits (enum wait_role), for the checks
	 * of other threads: the pending waiter is the one a queue head waits
	 * for when the lock is free. */
	_Atomic uint32_t role;
	/* Locks of this thread's table that other threads released (NULL =
	 * free cell): posted by them, consumed by this thread. */
	_Atomic(const void *) released[RELEASED_CELLS];
	/* Cells in use (an upper bound while a post or a drain is under way):
	 * lets the owner's slow path and other threads' searches skip the
	 * cells in the usual case, where nobody releases our locks for us. */
	_Atomic uint32_t nposted;
	/* Releases by other threads of locks this thread holds past its
	 * table (untracked: no entry to name), not yet consumed. They have
	 * no cell, so the cells (one per tracked entry at most) never run
	 * out; each also counts in nposted. */
	_Atomic uint32_t released_untracked;
	/* Destructor rounds our exit key has been set again for (thread_exit:
	 * locks still held at exit may be released by later destructors). */
	uint32_t exit_rounds;
	/* The process-shared locks this thread took last (a ring, written by
	 * the thread and its handlers). Another process may have released
	 * one for us and unmapped or reused its memory since: thread exit
	 * must not read or write a lock through such an entry (and has no
	 * need to: a dead holder of a process-shared word is found by the
	 * thread id in it). */
	uint32_t pshared_next;
	const void *pshared_taken[RQS_PSHARED_TAKEN];
};

enum wait_role { ROLE_NONE = 0, ROLE_PENDING, ROLE_QUEUED, ROLE_HEAD, ROLE_NONODE };

/*
 * Slot lifecycle (registry.c):
 *
 *   FRESH --(first claimer: bump of the high-water mark)--> USED
 *   FREE  --(a thread's first lock call: CAS)--> USED
 *   USED  --(thread exit, pthread key destructor: release store)--> FREE
 *   USED  --(fork child, for every thread but the forking one)--> RETIRED
 * FRESH is a mapped slot nobody has claimed yet; scanners never take it.
 * RETIRED (RQS_TABLE_RETIRED, common/table.h): the slot of a "ghost", a
 * thread that did not survive a fork(). Its nodes
 * may still be linked into lock queues and its table may still name locks
 * (the child repairs what it left, slowpath.c ghost_repair), so it is
 * never reused. A slot's memory is never unmapped in any state.
 */
enum slot_state { SLOT_FRESH = RQS_TABLE_FRESH, SLOT_FREE = 1, SLOT_USED = 2 };

struct rqspin_slot {
	struct rqspin_thread t;
	_Atomic uint32_t state;
	struct mcs_node nodes[MCS_MAX_NODES];
} __attribute__((aligned(CACHELINE)));

static inline struct rqspin_thread *registry_self(void)
{
	return (struct rqspin_thread *)rqspin__self();
}

static inline struct rqspin_slot *slot_of(struct rqspin_thread *t)
{
	return (struct rqspin_slot *)t; /* t is the first member */
}

/* Slot i, or NULL when its chunk is not mapped yet. Async-signal-safe. */
struct rqspin_slot *rqs_registry_slot(uint32_t i);
/* Slots that may be in use are below this bound. */
uint32_t rqs_registry_high_water(void);
uint32_t rqs_registry_in_use(void);
/* Slots left by threads that vanished in fork() (only in a forked child). */
bool rqs_registry_has_ghosts(void);
/* Is a thread without a registry slot (tables nobody else reads) alive? */
bool rqs_registry_has_slotless(void);
/* The forked child's pending-repair flag (slowpath.c, pending_repair): one
 * repair of a ghost's pending bit at a time, process-wide. begin takes it
 * (false when another thread holds it; acquire), end drops it (release),
 * busy reads it (acquire). fork() leaves it clear in the child. All three
 * are async-signal-safe. */
bool rqs_registry_repair_begin(void);
void rqs_registry_repair_end(void);
pid_t rqs_registry_repair_busy(void); /* the repairer's thread id, or 0 */

/* Deadlock candidates: threads waiting for a lock while they hold another
 * (every member of a cycle is one). A bitmap by slot, set and cleared in
 * the slow path only by such waiters, so a search reads a few hundred
 * bytes instead of every slot, and single-lock waiters never write it.
 * mark returns false when the bit was already set (by the code a signal
 * handler interrupted: that one clears it). */
bool rqs_registry_candidate_mark(uint32_t slot);
void rqs_registry_candidate_clear(uint32_t slot);
/* Calls fn(slot record, arg) for each candidate until it returns true;
 * returns that record, or NULL. */
struct rqspin_slot *rqs_registry_candidate_find(bool (*fn)(const struct rqspin_slot *, void *),
					    void *arg);

static inline uint32_t tail_encode(uint32_t slot, uint32_t idx)
{
	return ((slot + 1) << RQSPIN__TAIL_SLOT_OFFSET) | (idx << RQSPIN__TAIL_IDX_OFFSET);
}

static inline struct rqspin_slot *tail_slot(uint32_t tail)
{
	return rqs_registry_slot((tail >> RQSPIN__TAIL_SLOT_OFFSET) - 1);
}

static inline struct mcs_node *tail_decode(uint32_t tail)
{
	uint32_t idx = (tail >> RQSPIN__TAIL_IDX_OFFSET) & ((1u << RQSPIN__TAIL_IDX_BITS) - 1);
	struct rqspin_slot *s = tail_slot(tail);

	/* A tail names a slot that a queued waiter had, so its chunk is
	 * mapped (and stays so), and a node index below MCS_MAX_NODES. */
	rqs_assert(s != NULL && idx < MCS_MAX_NODES);
	return &s->nodes[idx];
}

/* Owner-only counter increment, safe against our own signal handlers. */
static inline void stat_inc(uint64_t *c)
{
	rqspin__counter_inc(c);
}

/* Counters of exited threads, folded in when they leave. */
void rqs_stats_retire(const struct rqspin_thread *t);

/* Thread exit: locks this thread still holds become "owner dead". */
void rqs_held_abandon(struct rqspin_thread *t);

#endif
