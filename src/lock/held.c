/* SPDX-License-Identifier: MIT */
/*
 * Held-lock tables: exact bookkeeping for any unlock order, cross-thread
 * unlocks, and the checks other threads make on them.
 *
 * Who writes a table: its thread, and that thread's signal handlers, which
 * run to completion on top of whatever the thread was doing. A handler
 * pushes above the interrupted code's entries and pops back to them before
 * it returns, so it never disturbs an outer operation, with one care: an
 * outer slow operation that moves entries (table_busy) must not see them
 * rewritten under it, so handlers leave the entries below them alone then.
 * Other threads never write a table; a cross-thread unlock posts the lock
 * in the owner's `released` cells, and the owner drops the entry later.
 *
 * Entry states, at index i < min(cnt, RQSPIN_NR_HELD):
 *
 *   lock pointer ──(unlock by this thread)──────────> removed, gap closed
 *        │
 *        └──(another thread unlocks: cell posted)──> still there, but every
 *              reader subtracts posted cells ──(owner drains)──> RELEASED
 *   RELEASED ──(reaches the top)──> trimmed
 *   NULL: an untracked lock that moved below the table's top after an
 *         out-of-order unlock (held; identity unknown)
 *
 * A lock pointer enters plain before the acquiring CAS. A slow path that
 * starts to wait marks it as an attempt (RQSPIN__HELD_ATTEMPT set, in
 * place) and clears the mark once the lock is taken; a failed attempt is
 * removed. Only plain entries receive posted releases.
 */
#include <stddef.h>

#include <rqspin/rqspinlock.h>

#include "arch.h"
#include "arch/clock.h"
#include "common/os.h"
#include "lock/held.h"
#include "lock/pshared.h"
#include "lock/settings.h"

static inline uint32_t tracked(uint32_t cnt)
{
	return cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;
}

static inline void set_entry(struct rqspin_thread *t, uint32_t i, const void *v)
{
	__atomic_store_n(&t->hot.held.locks[i], v, __ATOMIC_RELAXED);
}

static inline void set_count(struct rqspin_thread *t, uint32_t cnt)
{
	__atomic_store_n(&t->hot.held.cnt, cnt, __ATOMIC_RELAXED);
}

/* Cells of t that name lock: releases by other threads not yet dropped. */
static uint32_t posted(const struct rqspin_thread *t, const void *lock)
{
	uint32_t i, n = 0;

	/* acquire: pairs with the poster's release increment, which follows
	 * its cell store. (A post still under way is not counted; the lock is
	 * not released before it completes, see post_release.) */
	if (!atomic_load_explicit(&t->nposted, memory_order_acquire))
		return 0;
	for (i = 0; i < RELEASED_CELLS; i++)
		/* acquire: pairs with the owner's release when it clears a
		 * cell after marking the entry RELEASED, so a reader that
		 * finds the cell empty then reads the mark, not the lock. */
		if (atomic_load_explicit(&t->released[i], memory_order_acquire) == lock)
			n++;
	return n;
}

bool rqs_held_by(const struct rqspin_thread *t, const void *lock, bool attempt)
{
	uint32_t cnt = held_count_acquire(t);
	uint32_t n = tracked(cnt), i, holds = 0, marked = 0, entries, p;
	bool newest_marked = false;

	for (i = 0; i < n; i++) {
		const void *e = held_entry(t, i);

		if (e == lock) {
			holds++;
			newest_marked = false;
		} else if (e == attempt_entry(lock)) {
			marked++;
			newest_marked = true;
		}
	}
	/* The attempt is the newest entry for lock, and not a hold; past
	 * the table it was never recorded. */
	attempt = attempt && holds + marked && cnt <= RQSPIN_NR_HELD;
	entries = holds + marked - attempt;
	if (!entries)
		return false;
	/* A process-shared word that names another holder (or none) makes
	 * t's plain entries stale: another process released the lock. (Only
	 * now: a slow path's own check, with its one plain entry, must not
	 * read the busy word.) */
	if (holds && !rqs_pshared_may_hold(lock, t)) {
		entries = marked - (attempt && newest_marked);
		if (!entries)
			return false;
	}
	p = posted(t, lock);
	return entries > p;
}

bool rqs_held_owns(const struct rqspin_thread *t, const void *lock)
{
	uint32_t cnt = held_count_acquire(t);
	uint32_t n = tracked(cnt), i, holds = 0;

	/* Exact: an attempt entry is lock | RQSPIN__HELD_ATTEMPT. */
	for (i = 0; i < n; i++)
		if (held_entry(t, i) == lock)
			holds++;
	return holds > posted(t, lock) && rqs_pshared_may_hold(lock, t);
}

bool rqs_held_while_waiting(const struct rqspin_thread *t, const void *lock, const void *waiting)
{
	uint32_t n = tracked(held_count_acquire(t)), i = n;

	/* The newest entry of the wait (marked or not yet marked). */
	while (i-- > 0) {
		const void *e = held_entry(t, i);

		if (e == waiting || e == attempt_entry(waiting))
			break;
	}
	if (i == UINT32_MAX)
		return true;
	/* Either kind below it: an attempt there is an interrupted wait's,
	 * which blocks others through its pending bit (rqs_held_by). */
	while (i-- > 0)
		if (entry_lock(held_entry(t, i)) == lock)
			return true;
	return false;
}

bool rqs_held_newest_marked(const struct rqspin_thread *self, const void *lock)
{
	uint32_t i = tracked(held_count(self));

	while (i-- > 0) {
		const void *e = held_entry(self, i);

		/* (A mark's entry_lock is the mark, never a lock.) */
		if (entry_lock(e) == lock)
			return e == attempt_entry(lock);
	}
	return false;
}

bool rqs_held_holds_any_slow(const struct rqspin_thread *t, bool attempt)
{
	uint32_t cnt = held_count(t);
	uint32_t n = tracked(cnt), i, live = 0;

	if (cnt > RQSPIN_NR_HELD)
		return true;
	for (i = 0; i < n; i++) {
		const void *e = held_entry(t, i);

		if (e != RQSPIN__HELD_RELEASED)
			live++;
	}
	if (attempt && live)
		live--;
	/* Posted releases make this an over-estimate: the answer only
	 * decides whether a deadlock search is worth making. */
	return live > 0;
}

static int find_newest(const struct rqspin_thread *t, uint32_t cnt, const void *v);

/* Close the gap at i; the table has cnt entries. */
static void remove_at(struct rqspin_thread *self, uint32_t i, uint32_t cnt)
{
	uint32_t n = tracked(cnt);
	uint32_t busy = self->table_busy;

	/* The gap is a tracked entry of a non-empty table. */
	rqs_assert(cnt > 0 && i < n);
	self->table_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	/* Copy down before clearing: every held lock stays in the table at
	 * all times (a handler landing here may see one twice, never not). */
	for (; i + 1 < n; i++)
		set_entry(self, i, held_entry(self, i + 1));
	/* Past the table, the next untracked lock moves into the last entry:
	 * held, identity unknown (NULL). Otherwise the entry is now free. */
	set_entry(self, n - 1, NULL);
	atomic_signal_fence(memory_order_seq_cst);
	set_count(self, cnt - 1);
	atomic_signal_fence(memory_order_seq_cst);
	self->table_busy = busy;
}

/*
 * Drop RELEASED entries that have reached the top. Only the top moves, so
 * this is safe in a signal handler unless an outer operation moves
 * entries: an interrupted inline push has its slot already counted (the
 * count's bump is one instruction, rqspin__counter_bump32) and still
 * NULL, where we stop; an interrupted inline pop has its entry, or NULL,
 * on top.
 * Busy while it goes: between our read of a top mark and the count's
 * store, a handler of ours could take that mark over
 * (rqspin__held_push_full), and our count would then drop its entry.
 */
static void trim(struct rqspin_thread *self)
{
	uint32_t cnt = held_count(self);

	if (self->table_busy || !cnt || cnt > RQSPIN_NR_HELD ||
	    held_entry(self, cnt - 1) != RQSPIN__HELD_RELEASED)
		return;
	self->table_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	cnt = held_count(self);
	while (cnt && cnt <= RQSPIN_NR_HELD && held_entry(self, cnt - 1) == RQSPIN__HELD_RELEASED) {
		set_entry(self, cnt - 1, NULL);
		atomic_signal_fence(memory_order_seq_cst);
		set_count(self, --cnt);
		atomic_signal_fence(memory_order_seq_cst);
	}
	self->table_busy = 0;
	atomic_signal_fence(memory_order_seq_cst);
}

/* Another thread released one of our untracked holds: one past the table
 * goes from the count, else one moved into it (NULL) is marked. */
static void drop_untracked(struct rqspin_thread *self)
{
	uint32_t cnt = held_count(self);
	int k = find_newest(self, cnt, NULL);

	if (cnt > RQSPIN_NR_HELD) {
		set_count(self, cnt - 1);
		atomic_signal_fence(memory_order_seq_cst);
	} else if (k >= 0) {
		set_entry(self, (uint32_t)k, RQSPIN__HELD_RELEASED);
	}
}

/* Turn entries whose locks other threads released into RELEASED marks,
 * the oldest matching entry for each cell. In place, one store each, so a
 * handler may do it as long as no outer operation moves entries. */
void rqs_held_drain_slow(struct rqspin_thread *self)
{
	uint32_t c, i, n;

	if (self->table_busy)
		return;
	/* Busy while we go: a handler that drained too, between our read of
	 * a cell and our clearing it, could see its cell refilled by a new
	 * post that we would then clear unconsumed. (A handler landing
	 * before this store drains everything itself and returns.) */
	self->table_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	for (c = 0; c < RELEASED_CELLS; c++) {
		const void *lock = atomic_load_explicit(&self->released[c], memory_order_relaxed);

		if (!lock)
			continue;
		n = tracked(held_count(self));
		for (i = 0; i < n; i++) {
			/* Holds only (an attempt entry never equals lock):
			 * posts are made for holds. */
			if (held_entry(self, i) == lock) {
				set_entry(self, i, RQSPIN__HELD_RELEASED);
				break;
			}
		}
		/* None (the entry went meanwhile): as an untracked one. */
		if (i == n)
			drop_untracked(self);
		/* release: the mark is visible before the cell empties (see
		 * posted()); the signal fence is the same for our handlers. */
		atomic_signal_fence(memory_order_seq_cst);
		atomic_store_explicit(&self->released[c], NULL, memory_order_release);
		atomic_fetch_sub_explicit(&self->nposted, 1, memory_order_relaxed);
	}
	/* Releases of our untracked holds (post_untracked). The count
	 * publishes nothing: the order that matters (the post before the
	 * lock is free) is the poster's; acquire only keeps this exchange
	 * after the nposted load that brought us here. */
	c = atomic_exchange_explicit(&self->released_untracked, 0, memory_order_acquire);
	if (c) {
		for (i = 0; i < c; i++)
			drop_untracked(self);
		atomic_signal_fence(memory_order_seq_cst);
		atomic_fetch_sub_explicit(&self->nposted, c, memory_order_relaxed);
	}
	atomic_signal_fence(memory_order_seq_cst);
	self->table_busy = 0;
	trim(self);
}

/* A RELEASED mark of a full table that a new entry for lock may take
 * over, or -1: the newest one above every entry for lock (the newest
 * entry for lock is the caller's: the slow path marks, confirms and on
 * failure drops that one) and above every wait, marked (an attempt entry)
 * or not yet marked (the entry of the wait our thread has published, when
 * we are a signal handler that interrupted it in its first spins): a
 * handler's hold placed below the wait it interrupted would read as taken
 * before that wait (rqs_held_while_waiting), a false link of a cycle. */
static int reusable_mark(const struct rqspin_thread *self, const void *lock)
{
	const void *wait = held_waiting_for(self);
	uint32_t i = RQSPIN_NR_HELD;

	while (i-- > 0) {
		const void *e = held_entry(self, i);

		if (e == RQSPIN__HELD_RELEASED)
			return (int)i;
		if (e && (entry_is_attempt(e) || entry_lock(e) == lock ||
			  (wait && entry_lock(e) == wait)))
			return -1;
	}
	return -1;
}

/*
 * Marks that never reach the top. A mark is trimmed only from the top
 * (only the top may move in a signal handler, see trim), and a thread
 * whose locks other threads unlock keeps gaining marks under live
 * entries: it locks L0 again while its old entry for L0 waits for a
 * drain, the drain (in a later slow path) marks the older entry, under
 * the new one. After about 29 such rounds its locks went past the table:
 * no AA detection for them, and a count that never came down
 * (tests/rqspin_handoff_marks.c). So a full table's marks are taken over
 * by new holds (here) and a full table's entries are released in place
 * (own_remove): marks count among the 31 entries, but no lock goes past
 * the table while a mark is left that it may take.
 */
void rqspin__held_push_full(struct rqspin__thread_hot *hot, const void *lock)
{
	struct rqspin_thread *self = (struct rqspin_thread *)hot;
	uint32_t cnt, busy;
	int j;

	/* Called when the inline push found the table full. A signal
	 * handler of ours may have lowered the count since (its drain drops
	 * an untracked hold that another thread released, between the
	 * push's bump and its taking back): what follows takes any count. */
	rqs_held_drain(self);
	/* Marks on top go first (the drain trims only when it had posts). */
	trim(self);
	/* Inside an outer table operation (we are its signal handler) the
	 * entries must not change: past the table, as before. Else busy
	 * while we pick a mark, so that a handler of ours picks none (it
	 * goes past the table and leaves the count as it found it). A
	 * takeover changes one entry in place, never the count: an outer
	 * inline pop that we interrupted (its top entry is live, so never
	 * the mark) completes as if we had not run. */
	if (!self->table_busy && held_count(self) >= RQSPIN_NR_HELD) {
		self->table_busy = 1;
		atomic_signal_fence(memory_order_seq_cst);
		j = reusable_mark(self, lock);
		if (j >= 0)
			set_entry(self, (uint32_t)j, lock);
		atomic_signal_fence(memory_order_seq_cst);
		self->table_busy = 0;
		atomic_signal_fence(memory_order_seq_cst);
		if (j >= 0)
			return;
	}
	/* On top as the inline push does (the trim made room), or past the
	 * table. Busy unless an outer operation is (then its handlers' rule
	 * holds: our entry goes above, and the count comes back as we found
	 * it): a handler's drain or trim must not lower the count between
	 * our load and our store. */
	busy = self->table_busy;
	self->table_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	cnt = held_count(self);
	set_count(self, cnt + 1);
	atomic_signal_fence(memory_order_seq_cst);
	if (cnt < RQSPIN_NR_HELD)
		set_entry(self, cnt, lock);
	atomic_signal_fence(memory_order_seq_cst);
	self->table_busy = busy;
	atomic_signal_fence(memory_order_seq_cst);
}

/* Index of the newest tracked entry equal to v, or -1. */
static int find_newest(const struct rqspin_thread *t, uint32_t cnt, const void *v)
{
	uint32_t i = tracked(cnt);

	while (i-- > 0)
		if (held_entry(t, i) == v)
			return (int)i;
	return -1;
}

/* own_remove's work, with the table busy. */
static bool own_remove_busy(struct rqspin_thread *self, const void *lock)
{
	uint32_t cnt = held_count(self);
	int i = find_newest(self, cnt, lock);

	if (i < 0 && cnt > RQSPIN_NR_HELD) {
		/* One of the untracked locks above the table. */
		set_count(self, cnt - 1);
		atomic_signal_fence(memory_order_seq_cst);
		return true;
	}
	if (i < 0)
		i = find_newest(self, cnt, NULL); /* an untracked one that moved down */
	if (i < 0)
		return false;
	/* A full table: released in place, a mark for a later push to take
	 * (rqspin__held_push_full). Moving the entries above it down would
	 * move, under a signal handler's out-of-order unlock of a lock that
	 * took over a mark, the entry an interrupted inline pop is about to
	 * clear (a 31-entry table's top). */
	if (cnt >= RQSPIN_NR_HELD && (uint32_t)i + 1 < RQSPIN_NR_HELD) {
		set_entry(self, (uint32_t)i, RQSPIN__HELD_RELEASED);
		return true;
	}
	remove_at(self, (uint32_t)i, cnt);
	return true;
}

/* Drop this thread's entry for lock. Returns false when lock is not this
 * thread's as far as the table can tell (no entry, nothing untracked).
 * Busy throughout: the count read first is written back, and a handler's
 * drain or trim in between would make it stale. */
static bool own_remove(struct rqspin_thread *self, const void *lock)
{
	uint32_t busy = self->table_busy;
	bool found;

	self->table_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	found = own_remove_busy(self, lock);
	atomic_signal_fence(memory_order_seq_cst);
	self->table_busy = busy;
	atomic_signal_fence(memory_order_seq_cst);
	trim(self);
	return found;
}

void rqs_held_drop_stale(struct rqspin_thread *self, const void *lock, uint32_t keep)
{
	uint32_t below, k;
	int i;

	/* No entry (the usual case), or a handler inside an outer table
	 * operation: leave the table alone. */
	if (find_newest(self, held_count(self), lock) < 0 || self->table_busy)
		return;
	/* A thread of this process that unlocked it for us posted the
	 * release before its release store, which the caller's read of the
	 * word saw: acquire makes the post visible, and the drain turns its
	 * entry into a mark. Dropped without the drain, the post would
	 * later mark a new hold of the lock as released. */
	atomic_thread_fence(memory_order_acquire);
	rqs_held_drain(self);
	below = held_count(self);
	for (k = 0; k < keep; k++) {
		i = find_newest(self, below, lock);
		if (i < 0)
			return;
		below = (uint32_t)i;
	}
	while ((i = find_newest(self, below, lock)) >= 0) {
		remove_at(self, (uint32_t)i, held_count(self));
		trim(self);
		below = (uint32_t)i;
	}
}

void rqspin__held_pop_slow(struct rqspin__thread_hot *hot, const void *lock)
{
	(void)own_remove((struct rqspin_thread *)hot, lock);
}

/* Entry i from old to new if it still is old, in one instruction: a
 * signal handler of ours cannot land between the compare and the store.
 * Only this thread and its handlers write the table (remote readers take
 * either value), so x86 needs no LOCK prefix; relaxed elsewhere. */
static bool entry_swap(struct rqspin_thread *self, uint32_t i, const void *old, const void *new)
{
#if defined(__x86_64__) && !defined(RQSPIN__TSAN)
	bool ok;

	__asm__ __volatile__("cmpxchgq %3, %1"
			     : "=@ccz"(ok), "+m"(self->hot.held.locks[i]), "+a"(old)
			     : "r"(new));
	return ok;
#else
	return __atomic_compare_exchange_n(&self->hot.held.locks[i], &old, new, 0,
					   __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

/* The newest entry equal to from becomes to. A handler may move entries
 * between the search and the swap (the swap then fails): search again.
 * None: the entry is past the table, or a handler dropped it. */
static void entry_retag(struct rqspin_thread *self, const void *from, const void *to)
{
	for (;;) {
		int i = find_newest(self, held_count(self), from);

		if (i < 0 || entry_swap(self, (uint32_t)i, from, to))
			return;
	}
}

void rqs_held_mark_attempt(struct rqspin_thread *self, const void *lock)
{
	/* The top entry, unless a handler left a lock above it. */
	uint32_t cnt = held_count(self);

	if (cnt == 0 || cnt > RQSPIN_NR_HELD ||
	    held_entry(self, cnt - 1) == attempt_entry(lock)) /* marked already (the watch) */
		return;
	if (!entry_swap(self, cnt - 1, lock, attempt_entry(lock)))
		entry_retag(self, lock, attempt_entry(lock));
}

void rqs_held_confirm(struct rqspin_thread *self, const void *lock)
{
	uint32_t cnt = held_count(self);

	/* The top entry, unless a handler left a lock above it. */
	if (cnt == 0 || cnt > RQSPIN_NR_HELD ||
	    !entry_swap(self, cnt - 1, attempt_entry(lock), lock))
		entry_retag(self, attempt_entry(lock), lock);
}

/* The same for librqspin-pthread.so (which sees only exported symbols). */
void rqspin__held_mark_attempt(struct rqspin__thread_hot *hot, const void *lock)
{
	rqs_held_mark_attempt((struct rqspin_thread *)hot, lock);
}

void rqspin__held_confirm(struct rqspin__thread_hot *hot, const void *lock)
{
	rqs_held_confirm((struct rqspin_thread *)hot, lock);
}

void rqs_held_release_entry(struct rqspin_thread *self, const void *lock)
{
	uint32_t cnt = held_count(self);
	int i;

	if (cnt == 0)
		return;
	/* Ours is the top entry, unless it took over a mark of a full table
	 * (rqspin__held_push_full) or a handler left a lock above it: then
	 * it is released in place, as own_remove does in a full table (the
	 * top may be what an interrupted inline pop is about to clear). A
	 * remote reader may still see it until the store reaches it; a
	 * deadlock search confirms each link and needs the lock busy. */
	if (cnt <= RQSPIN_NR_HELD && entry_lock(held_entry(self, cnt - 1)) != lock) {
		for (i = (int)cnt - 1; i >= 0; i--)
			if (entry_lock(held_entry(self, (uint32_t)i)) == lock)
				break;
		if (i >= 0) {
			set_entry(self, (uint32_t)i, RQSPIN__HELD_RELEASED);
			atomic_signal_fence(memory_order_seq_cst);
			trim(self);
			return;
		}
	}
	if (cnt <= RQSPIN_NR_HELD)
		set_entry(self, cnt - 1, NULL);
	/* release: the NULL store is ordered before the count for remote
	 * readers, whose acquire load (held_count_acquire) pairs with it: a
	 * reader that sees this count, or a later one, does not see the stale
	 * entry there. The kernel's smp_wmb. */
	__atomic_store_n(&self->hot.held.cnt, cnt - 1, __ATOMIC_RELEASE);
	atomic_signal_fence(memory_order_seq_cst);
	trim(self);
}

/* The live threads other than self whose tables hold lock: the first
 * one in *first; how many (counting stops at 2). */
static unsigned owners_of(const struct rqspin_thread *self, const void *lock,
			  struct rqspin_thread **first)
{
	uint32_t n = rqs_registry_high_water(), i;
	unsigned found = 0;

	*first = NULL;
	for (i = 0; i < n && found < 2; i++) {
		struct rqspin_slot *s = rqs_registry_slot(i);

		if (!s || &s->t == self || held_count(&s->t) == 0 ||
		    atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_USED)
			continue;
		if (rqs_held_owns(&s->t, lock) && found++ == 0)
			*first = &s->t;
	}
	return found;
}

/* Spins before each look, then yields. */
#define OWNER_SPINS 64u

/* Does self hold locks its table cannot name (past the table, or moved
 * into it as NULL by an out-of-order unlock)? */
static bool holds_untracked(const struct rqspin_thread *self)
{
	uint32_t cnt = held_count(self);

	return cnt > RQSPIN_NR_HELD || find_newest(self, cnt, NULL) >= 0;
}

/*
 * The live thread that holds lock, for a cross-thread unlock, or NULL.
 *
 * A plain entry is a hold, or a lock call between instructions: pushed
 * before its CAS and not yet marked by the slow path (the CAS failed, as
 * the lock is held), or released and not yet removed. Both last a few
 * instructions, so one thread with the entry is the holder, unless we
 * hold the lock ourselves past our table (then nobody's entry says so).
 * Two or more, or one while we hold untracked locks: look again until
 * one is left (or none: ours) -- those in such a window leave it as soon
 * as they run. A thread kept off the CPU in its window keeps us looking,
 * for at most the default timeout; after that the first one found is
 * taken (crediting the release to it leaves the holder's entry behind).
 */
static struct rqspin_thread *foreign_owner(const struct rqspin_thread *self, const void *lock)
{
	struct rqspin_thread *first;
	unsigned found = owners_of(self, lock, &first), looks;
	bool untracked_ours = holds_untracked(self);
	uint64_t until = 0;

	for (looks = 1; found > 1 || (found == 1 && untracked_ours); looks++) {
		if (looks <= OWNER_SPINS) {
			arch_cpu_relax();
		} else {
			uint64_t now = rqs_arch_now_ns();

			if (!until)
				until = now + rqs_lock_default_timeout();
			else if (now >= until)
				break;
			rqs_os_yield();
		}
		found = owners_of(self, lock, &first);
	}
	return first;
}

/* The one live thread other than self that holds locks its table cannot
 * name, or NULL (none, or several: which one holds the lock is unknown). */
static struct rqspin_thread *untracked_owner(const struct rqspin_thread *self)
{
	uint32_t n = rqs_registry_high_water(), i;
	struct rqspin_thread *found = NULL;

	for (i = 0; i < n; i++) {
		struct rqspin_slot *s = rqs_registry_slot(i);

		if (!s || &s->t == self || held_count(&s->t) == 0 ||
		    atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_USED ||
		    !holds_untracked(&s->t))
			continue;
		if (found)
			return NULL;
		found = &s->t;
	}
	return found;
}

/* A cell for lock in owner's: false when all are taken. They are one per
 * tracked entry, and an entry gets at most one post (readers subtract the
 * posted cells, so a posted entry is no owner's any more), so only a post
 * made while the owner's drain is still emptying its cells can find none;
 * rqspin__unlock_slow then waits for it. */
static bool post_release(struct rqspin_thread *owner, const void *lock)
{
	uint32_t c;

	for (c = 0; c < RELEASED_CELLS; c++) {
		const void *expect = NULL;

		/* relaxed: the release store of the lock word that follows
		 * orders this post before the lock can be taken again. */
		if (atomic_compare_exchange_strong_explicit(&owner->released[c], &expect, lock,
							    memory_order_relaxed,
							    memory_order_relaxed)) {
			/* release: a reader that sees the count sees the cell. */
			atomic_fetch_add_explicit(&owner->nposted, 1, memory_order_release);
			return true;
		}
	}
	return false;
}

/* A release of one of owner's untracked holds: no entry names it, so no
 * cell; a count. */
static void post_untracked(struct rqspin_thread *owner)
{
	/* relaxed: as a cell's CAS. */
	atomic_fetch_add_explicit(&owner->released_untracked, 1, memory_order_relaxed);
	/* release: a drain that sees the count sees the increment above. */
	atomic_fetch_add_explicit(&owner->nposted, 1, memory_order_release);
}

static inline void release_word(void *lock)
{
	/* release: publishes the critical section to the next acquirer. */
	__atomic_store_n(&((union rqspin__word *)lock)->b.locked, 0, __ATOMIC_RELEASE);
	atomic_signal_fence(memory_order_seq_cst);
}

void rqspin__unlock_slow(struct rqspin__thread_hot *hot, void *lock)
{
	struct rqspin_thread *self = (struct rqspin_thread *)hot;
	struct rqspin_thread *owner;

	rqs_held_drain(self);
	/* A hold of ours (exact: an attempt entry of ours is not one; a
	 * handler that unlocks the lock its interrupted code waits for
	 * releases the holder's lock). */
	if (find_newest(self, held_count(self), lock) >= 0) {
		/* Ours, out of LIFO order. Store first, as in the inline
		 * unlock: our handlers must never find the lock held by us
		 * and missing from the table. */
		release_word(lock);
		(void)own_remove(self, lock);
		return;
	}
	owner = foreign_owner(self, lock);
	if (owner) {
		uint64_t until = 0, now;

		/* Taken by another thread: its entry is marked released
		 * before the lock is free, so the owner, once it takes the
		 * lock again, never mistakes the old entry for a hold. No
		 * free cell (see post_release): the owner is draining them;
		 * wait for it, at most the default timeout (then its entry
		 * stays, and it reports false AA on this lock). */
		while (!post_release(owner, lock)) {
			now = rqs_arch_now_ns();
			if (!until)
				until = now + rqs_lock_default_timeout();
			else if (now >= until)
				break;
			rqs_os_yield();
		}
		release_word(lock);
		return;
	}
	/* No table names it, and we hold nothing untracked: the hold is
	 * untracked in another thread's table (past it, or moved into it as
	 * NULL), or an exited thread's (an orphan). An orphan's release is
	 * credited to the orphans first: crediting a live thread with it
	 * would hide one of that thread's real holds from orphan_repair
	 * (slowpath.c), which could then mark that lock owner-dead under it;
	 * a live thread's release credited to an orphan only leaves it a
	 * phantom hold (safe: it keeps repairs away, and slows its own
	 * cross-thread unlocks). Else, with exactly one such live thread, it
	 * is the owner: its count must go too, or it keeps a phantom hold
	 * for good (and every cross-thread unlock it makes waits out
	 * foreign_owner's bound). Not with a thread whose table nobody can
	 * read (slotless): the hold may be its. */
	if (!holds_untracked(self)) {
		if (rqs_held_orphan_take()) {
			release_word(lock);
			return;
		}
		if (!rqs_registry_has_slotless())
			owner = untracked_owner(self);
	}
	if (owner) {
		post_untracked(owner);
		release_word(lock);
		return;
	}
	/* Untracked (ours past the table, or nobody's table knows it). */
	release_word(lock);
	(void)own_remove(self, lock);
}

bool rqs_held_claim_ghost_entry(struct rqspin_thread *ghost, const void *lock)
{
	uint32_t i = tracked(held_count(ghost));

	while (i-- > 0) {
		/* A ghost that took the lock may have vanished before it
		 * confirmed its entry: either kind. */
		const void *expect = held_entry(ghost, i);

		if (entry_lock(expect) != lock)
			continue;
		/* Repairers of the same lock race here; the one whose CAS
		 * turns the entry into a mark owns the repair. relaxed: the
		 * lock word CAS that follows carries no data of the ghost's
		 * (its writes have been in this address space since fork). */
		if (__atomic_compare_exchange_n(&ghost->hot.held.locks[i], &expect,
						RQSPIN__HELD_RELEASED, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* The thread is gone: whatever it still holds is abandoned. The lock byte
 * becomes RQSPIN__LOCKED_OWNER_DEAD so the next waiter takes the lock over
 * with -EOWNERDEAD instead of waiting for a timeout. Only entries that are
 * still holds count: released cells are subtracted first. */
static bool pshared_taken(const struct rqspin_thread *t, const void *lock)
{
	uint32_t i;

	for (i = 0; i < RQS_PSHARED_TAKEN; i++)
		if (t->pshared_taken[i] == lock)
			return true;
	return false;
}

void rqs_held_note_pshared(struct rqspin_thread *self, const void *lock)
{
	/* A handler landing between the look and the store may note its
	 * own lock in the same cell: one of the two is forgotten early,
	 * and thread exit then reads that lock as it did before. */
	if (!pshared_taken(self, lock))
		self->pshared_taken[self->pshared_next++ % RQS_PSHARED_TAKEN] = lock;
}

static _Atomic uint64_t orphans;

uint64_t rqs_held_orphans(void)
{
	return atomic_load_explicit(&orphans, memory_order_relaxed);
}

bool rqs_held_orphan_take(void)
{
	uint64_t n = atomic_load_explicit(&orphans, memory_order_relaxed);

	/* relaxed: the count publishes nothing (see orphan_repair for the
	 * fences). */
	do {
		if (n == 0)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&orphans, &n, n - 1, memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

void rqs_held_orphan_return(void)
{
	atomic_fetch_add_explicit(&orphans, 1, memory_order_relaxed);
}

bool rqs_held_untracked_anywhere(void)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		const struct rqspin_slot *s = rqs_registry_slot(i);
		uint32_t state;

		if (!s)
			continue;
		state = atomic_load_explicit(&s->state, memory_order_relaxed);
		if ((state == SLOT_USED || state == RQS_TABLE_RETIRED) && holds_untracked(&s->t))
			return true;
	}
	return false;
}

/* The untracked holds in t's table: past it, and moved into it (NULL). */
static uint32_t untracked_holds(const struct rqspin_thread *t)
{
	uint32_t cnt = held_count(t), n = tracked(cnt), i, u;

	u = cnt > RQSPIN_NR_HELD ? cnt - RQSPIN_NR_HELD : 0;
	for (i = 0; i < n; i++)
		u += held_entry(t, i) == NULL;
	return u;
}

void rqs_held_abandon(struct rqspin_thread *t)
{
	uint32_t cnt, n, i, u;

	rqs_held_drain(t);
	cnt = held_count(t);
	n = tracked(cnt);
	/* Counted before the table empties: a waiter that reads the emptied
	 * table (after the release fence below) also reads this count. */
	u = untracked_holds(t);
	if (u)
		atomic_fetch_add_explicit(&orphans, u, memory_order_relaxed);
	for (i = 0; i < n; i++) {
		const void *e = held_entry(t, i);
		union rqspin__word *w = (union rqspin__word *)e;
		uint32_t val;

		/* An attempt is no hold (a thread exits between lock calls,
		 * not inside one). */
		if (!w || e == RQSPIN__HELD_RELEASED || entry_is_attempt(e))
			continue;
		/* A process-shared lock (abandoning never changes one): its
		 * entry may be stale, its memory gone or reused. */
		if (pshared_taken(t, e)) {
			set_entry(t, i, NULL);
			continue;
		}
		val = __atomic_load_n(&w->val, __ATOMIC_RELAXED);
		/* We run on the owner: tell TSan it lets go, so that the
		 * takeover is no double lock -- before the word says so, as a
		 * waiter may take the lock over (and TSan see that lock) as
		 * soon as the CAS lands (a double-lock report in 2 of 6 runs
		 * of rqspin_exit_destructor). */
		if ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL) {
			RQSPIN__TSAN_PRE_UNLOCK(w);
			RQSPIN__TSAN_POST_UNLOCK(w);
		}
		/* release: whatever the dead thread wrote under the lock is
		 * visible to the waiter that takes it over (acquire CAS). */
		while ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL &&
		       !__atomic_compare_exchange_n(&w->val, &val,
						    (val & ~RQSPIN__LOCKED_MASK) |
							    RQSPIN__LOCKED_OWNER_DEAD,
						    1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		set_entry(t, i, NULL);
	}
	/* release: the orphan count above, and everything this thread wrote
	 * under its untracked locks, before the table says it holds none
	 * (pairs with the acquire fence in slowpath.c, orphan_repair). */
	atomic_thread_fence(memory_order_release);
	set_count(t, 0);
}

const struct rqspin_held_locks *rqspin_held_locks(void)
{
	struct rqspin__thread_hot *hot = rqspin__self();

	/* Marks that reached the top go, so that a thread that released
	 * everything reads a count of 0 (an unlock's inline pop leaves a
	 * mark under its entry in place). */
	trim((struct rqspin_thread *)hot);
	return &hot->held;
}
