/* SPDX-License-Identifier: MIT */
/*
 * Waiting in userspace (docs/design.md, "Waiting in userspace").
 *
 * The kernel never preempts a spinlock holder or waiter; userspace does, so
 * a waiter that spins forever on a descheduled owner or predecessor burns
 * the very CPU that owner needs. Every wait here is therefore staged:
 *
 *   1. spin with the CPU's pause hint for SPIN_BUDGET iterations (the
 *      owner is most likely running and about to release);
 *   2. then stop burning the CPU: queued (non-head) MCS waiters sleep on a
 *      futex in their own node and are woken by the predecessor's hand-off
 *      (the kernel's pv_wait_node/pv_kick_node); the pending waiter and the
 *      queue head, which watch the shared lock word that a plain-store
 *      unlock never signals, yield the CPU between checks instead.
 *
 * The unlock stays one release store because nobody ever sleeps on the
 * lock word itself. The price is that the head yields rather than sleeps;
 * with at most one head and one pending waiter per lock that is two
 * runnable threads, not N.
 *
 * Running threads may also take a free lock ahead of sleeping queued
 * waiters ("stealing"), but only while no waiter has the pending bit: the
 * queue head sets it as soon as it is at the front, so when the head is
 * running the queue is FIFO, and when it sleeps (being woken, preempted)
 * the lock does not sit idle. See slowpath.c.
 */
#ifndef RQSPIN_WAIT_H
#define RQSPIN_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Pause iterations before a waiter stops spinning (~10-40 us). */
#define SPIN_BUDGET (1u << 10)
/* Iterations between clock reads while spinning. */
#define CHECK_INTERVAL 64u

/* The futex sleeps and the yield (common/futex.h, common/os.h). */
#include "common/futex.h"
#include "common/os.h"

#endif
