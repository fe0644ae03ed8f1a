/* SPDX-License-Identifier: MIT */
/*
 * Is the thread a waiter depends on stalled, or only preempted?
 *
 * A timeout that counts wall time fails the waiters of an owner that is
 * merely runnable and not running (an overloaded machine, a throttled
 * container, a real-time thread on its CPU). So when a waiter's deadline
 * passes, it asks the kernel about the thread it waits for (found through
 * the held tables):
 *   - asleep, in uninterruptible sleep, stopped or traced: stalled now,
 *     if the tables still name it once the state is read (a thread that
 *     released the lock and then slept, or began to exit, is not);
 *   - runnable or running: wait on; it counts as stalled once it has run
 *     for a whole wait budget of CPU time since the first deadline (an
 *     owner spinning forever while it runs);
 *   - gone (exited since the tables named it), or /proc unreadable: one
 *     more timeout of wall time, once per wait, then stalled (a thread
 *     found in the tables just before it unlocked and exited is the usual
 *     case, and the lock is changing hands).
 * Unknown owner (untracked, no registry slot, another process): stalled
 * (wall time, as before).
 */
#ifndef RQSPIN_STALL_H
#define RQSPIN_STALL_H

#include <stdint.h>
#include <sys/types.h>

/* Scheduling state letter of thread tid (of any process in our PID
 * namespace) from /proc/<tid>/stat ('R', 'S', 'D', 'T', 'Z', ...), or 0
 * when it cannot be read. Async-signal-safe; keeps errno. */
char rqs_stall_thread_state(pid_t tid);

/* CPU time thread tid of this process has used, in ns, or UINT64_MAX.
 * Async-signal-safe (clock_gettime); keeps errno. */
uint64_t rqs_stall_thread_cpu_ns(pid_t tid);

#endif
