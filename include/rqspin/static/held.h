/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the layout of a thread's held-lock
 * table, which the inline rqspinlock fast paths write and the diagnostics
 * (rqspin_held_locks(), failure reports) show.
 */
#ifndef RQSPIN_STATIC_HELD_H
#define RQSPIN_STATIC_HELD_H

#include <stdint.h>
#include <rqspin/defs.h>

/* Held-lock table: 31 entries + count = 256 bytes (the kernel's size). */
#define RQSPIN_NR_HELD 31

/*
 * A stack of the locks the thread holds, oldest first. cnt is the number
 * of locks held (plus the one being acquired, on top, during a lock call);
 * it may exceed RQSPIN_NR_HELD, and locks pushed past the table are not
 * recorded ("untracked"). The table stays exact for any unlock order: an
 * unlock removes the lock's own entry and closes the gap, except in a
 * full table (cnt >= RQSPIN_NR_HELD), where an entry below the top is
 * marked RQSPIN__HELD_RELEASED in place (moving entries could undo an
 * inline pop that a signal handler interrupted). A NULL entry below cnt
 * stands for an untracked lock that moved down after an out-of-order
 * unlock (held, identity unknown). Entries equal to RQSPIN__HELD_RELEASED
 * were released out of order in a full table or by another thread
 * (cross-thread unlock); they are dropped lazily once on top, and a lock
 * taken while the table is full reuses one in place (so the entries of a
 * full table are not always in the order the locks were taken) before
 * it goes past the table. An entry with the RQSPIN__HELD_ATTEMPT
 * bit set is a lock the thread is waiting for in a slow path, not yet
 * held (set when the slow path starts to wait, cleared once the lock is
 * taken; a
 * table read from a signal handler that interrupted such a wait shows
 * one). The inline paths push plain entries.
 */
struct rqspin_held_locks {
	uint32_t cnt;
	uint32_t pad_;
	const void *locks[RQSPIN_NR_HELD];
};

/* Marks an entry whose lock another thread released (see above). */
#define RQSPIN__HELD_RELEASED ((const void *)1)

/* The attempt bit of an entry (see above). Lock words are 4-byte aligned,
 * so bit 1 of a lock's address is free; it is not RELEASED's bit. */
#define RQSPIN__HELD_ATTEMPT ((uintptr_t)2)

#endif /* RQSPIN_STATIC_HELD_H */
