/*
 * SPIN model of librqspin's lock slow path (src/lock/slowpath.c) and the
 * inline fast paths (include/rqspin/qspinlock.h, rqspinlock.h).
 *
 * NT threads each do ROUNDS lock/unlock rounds on ONE lock. Every C atomic
 * operation on the lock word or on an MCS node is one Promela step; waits
 * that C spins or sleeps in are blocking guards, so a waiter nobody will
 * ever release is an invalid end state (SPIN's deadlock check).
 *
 *   spin -a qspinlock.pml              qspinlock: no timeouts
 *   spin -a -DRQSPIN qspinlock.pml     rqspinlock: the pending waiter and
 *                                      the queue head may fail (timeout or
 *                                      deadlock) at every wait_step()
 *   -DNT=<threads> -DROUNDS=<rounds>   sizes (defaults 3 and 2)
 *
 * Labels are named after the C code; "l.N" is the line in slowpath.c.
 * See README.md for what is abstracted away.
 */

#ifndef NT
#define NT 3
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif

/* Lock word layout (lock_common.h): locked byte, pending byte, tail
 * (idx in bits 16-17, slot+1 in bits 18-31). One int, as in C. */
#define LOCKED_VAL       1
#define LOCKED_MASK      255          /* 0x000000ff */
#define PENDING_VAL      256          /* 0x00000100 */
#define PENDING_MASK     65280        /* 0x0000ff00 */
#define LP_MASK          65535        /* locked + pending, the low half-word */
#define TAIL_MASK        (~65535)     /* 0xffff0000 */
#define TAIL_SLOT_OFFSET 18
/* tail_encode(slot, idx 0): the model's threads are slots 0..NT-1 and
 * never nest (idx is always 0). */
#define TAIL(t)          (((t) + 1) << TAIL_SLOT_OFFSET)
#define TAIL_SLOT(tl)    ((((tl) >> TAIL_SLOT_OFFSET) & 16383) - 1)

/* mcs_node.locked values (registry.h); MCS_PARKED is 0x100 in C. */
#define MCS_WAIT   0
#define MCS_GO     1
#define MCS_ABORT  2
#define MCS_PARKED 3

/* Slow-path results. */
#define OK        0
#define ETIMEDOUT 1
#define EDEADLK   2

int  word = 0;          /* the lock word */
byte nxt[NT];           /* mcs_node.next: 0 = NULL, else slot+1 */
byte mlocked[NT];       /* mcs_node.locked */

/* Ghost state, for the assertions only. */
byte cs = 0;            /* threads inside the critical section */
byte finished = 0;      /* threads that did all their rounds */
byte acquired_n = 0;    /* successful acquisitions */
byte failed_n = 0;      /* failed acquisitions (rqspin only) */
bool inq[NT];           /* node t published as a tail and not yet released */

/* A write into another thread's node is only legal while that node is in
 * a queue, and each node gets exactly one hand-off per queueing. */
#define HANDOFF(n, val) \
	atomic { \
		assert(inq[n] && (mlocked[n] == MCS_WAIT || mlocked[n] == MCS_PARKED)); \
		mlocked[n] = val \
	}

active [NT] proctype thread()
{
	int  val;           /* the C variable val (a lock-word snapshot) */
	int  old;           /* old tail from the exchange */
	byte prev, nx;      /* predecessor / successor slot */
	byte v;             /* value received / passed in an MCS node */
	byte ret;           /* OK, ETIMEDOUT, EDEADLK */
	bool hp;            /* have_pending (head_wait) */
	byte r = 0;

	do
	:: r < ROUNDS ->
		/* qspin_lock() / rqspin_lock_timeout(): one acquire CAS
		 * 0 -> LOCKED_VAL; on failure val is the word it saw. The
		 * rqspin held-table push before it concerns AA checks only
		 * (one lock, no nesting here: never a deadlock). */
		atomic {
			if
			:: word == 0 -> word = LOCKED_VAL; goto acquired
			:: else -> val = word
			fi
		}

		/* slowpath(), l.652-661: while val == LOCKED_VAL, reload and
		 * CAS 0 -> LOCKED_VAL when seen free, at most ENTRY_SPINS
		 * times (leaving the loop is possible at any iteration). The
		 * load and the CAS are merged: a CAS that fails reloads val,
		 * one that succeeds needs the word still 0. A spurious failure
		 * of the weak CAS leaves val == 0, which goes on exactly as
		 * the budget exit below does (to the fetch_or). */
entry_spin:
		do
		:: val == LOCKED_VAL ->
progress_entry:		atomic {
				val = word;
				if
				:: val == 0 -> word = LOCKED_VAL; goto acquired
				:: else
				fi
			}
		:: break
		od;

		/* l.663-668: a pending waiter is taking the lock: wait a
		 * bounded while for (0,1,0) to change. */
pending_loops:
		do
		:: val == PENDING_VAL ->
progress_pending:	val = word
		:: break
		od;

		/* l.670-671: anybody waiting already: queue. */
		if
		:: (val & ~LOCKED_MASK) != 0 -> val = 0; goto queue
		:: else
		fi;

#ifdef RQSPIN
		/* l.673-678: pre_wait_check() may find a cycle before the
		 * first wait (a search; no word access): fail unchanged. */
		if
		:: goto failed
		:: skip
		fi;
#endif
		/* l.682: become the pending waiter (fetch_or, acquire). */
fetch_or:
		atomic { val = word; word = word | PENDING_VAL };
		if
		:: (val & ~LOCKED_MASK) != 0 ->
			if
			:: (val & PENDING_MASK) == 0 ->
				/* l.686 clear_pending(): fetch_and, a separate RMW */
				word = word & ~PENDING_MASK
			:: else
			fi;
			val = 0;
			goto queue
		:: else
		fi;

		/* pending_take(), l.552-572: wait for the locked byte to
		 * clear (val from the fetch_or is checked first). */
pending_take:
		if
		:: (val & LOCKED_MASK) == 0 -> skip
		:: else ->
			do
			:: (word & LOCKED_MASK) == 0 -> break   /* l.566 acquire load */
#ifdef RQSPIN
			/* l.559: wait_step() after a load that saw the lock
			 * held reports a timeout (or a deadlock: same path);
			 * l.561 clear_pending(), a separate fetch_and. */
			:: (word & LOCKED_MASK) != 0 ->
				word = word & ~PENDING_MASK;
				goto failed
#endif
			od
		fi;
		/* l.569 clear_pending_set_locked(): 16-bit store (*,1,0) -> (*,0,1). */
		atomic { word = (word & TAIL_MASK) | LOCKED_VAL; val = 0 };
		goto acquired;

queue:
		/* l.697 (rqspin) AA check: never true with one lock. */
#ifdef RQSPIN
		/* l.703-708: pre_wait_check(), when the pending path did not
		 * run it, may fail before queueing (no word access). */
		if
		:: goto failed
		:: skip
		fi;
#endif
		/* l.713-721: steal spins. steal_once() takes a word with no
		 * pending and a free locked byte (CAS, acquire); the budget
		 * may run out at any iteration. */
steal_spins:
		do
		:: atomic { (word & LP_MASK) == 0 -> word = word | LOCKED_VAL; goto acquired }
		:: break
		od;

		/* l.726-728: no registry slot (NONODE: thread 0 is slotless),
		 * else node idx 0 (the model does not nest). */
#ifdef NONODE
		if
		:: _pid == 0 -> goto nonode
		:: else
		fi;
#endif
		/* l.733-741: claim the node and initialise it. */
node_init:
		nxt[_pid] = 0;                 /* l.739 */
		mlocked[_pid] = MCS_WAIT;      /* l.740 */

		/* l.743: one more steal_once(). */
		atomic {
			if
			:: (word & LP_MASK) == 0 -> word = word | LOCKED_VAL; goto acquired
			:: else
			fi
		}

		/* l.754: exchange the tail half-word (acq_rel). */
xchg_tail:
		atomic {
			old = word & TAIL_MASK;
			word = (word & ~TAIL_MASK) | TAIL(_pid);
			inq[_pid] = true;
			if
			:: old != 0 -> prev = TAIL_SLOT(old)
			:: else
			fi
		}
		if
		:: old != 0 ->
			/* l.763: link behind the predecessor (release). */
			atomic {
				assert(inq[prev] && nxt[prev] == 0);
				nxt[prev] = _pid + 1;
				old = 0
			}
			/* l.764-767 (rqspin): predecessor's slot is a fork ghost:
			 * become the head; no fork in the model. */
			/* mcs_wait(), l.357-392: spin on node->locked; after the
			 * budget CAS MCS_WAIT -> MCS_PARKED (a failed CAS returns
			 * the hand-over value) and futex_wait until it changes. */
mcs_wait:
			if
			:: atomic { mlocked[_pid] != MCS_WAIT -> v = mlocked[_pid] }
			:: atomic { mlocked[_pid] == MCS_WAIT -> mlocked[_pid] = MCS_PARKED };
				atomic { mlocked[_pid] != MCS_PARKED -> v = mlocked[_pid] }
			fi;
			/* l.767-775: told to leave: pass MCS_ABORT on. */
			if
			:: v == MCS_ABORT -> ret = ETIMEDOUT; goto queue_leave
			:: else -> v = 0
			fi
		:: else
		fi;

		/* We are the queue head. head_wait(), l.450-479. */
head_wait:
		hp = false;
		do
		/* l.457-466: no pending bit seen: CAS it in (a failed CAS
		 * reloads and retries: merged with the load). */
		:: atomic { !hp && (word & PENDING_MASK) == 0 -> word = word | PENDING_VAL; hp = true }
		/* l.467-471: pending held, acquire load sees the lock free. */
		:: hp && (word & LOCKED_MASK) == 0 -> break
#ifdef RQSPIN
		/* l.474-476: wait_step() fails (timeout, or a deadlock the
		 * check found elsewhere) after a load that saw someone
		 * else's pending bit, or the locked byte held. */
		:: !hp && (word & PENDING_MASK) != 0 -> ret = ETIMEDOUT; goto head_err
		:: !hp && (word & PENDING_MASK) != 0 -> ret = EDEADLK; goto head_err
		:: hp && (word & LOCKED_MASK) != 0 -> ret = ETIMEDOUT; goto head_err
		:: hp && (word & LOCKED_MASK) != 0 -> ret = EDEADLK; goto head_err
#endif
		od;

		/* l.797-800 claim: if we are the tail, CAS (me,1,0) -> (0,0,1)
		 * (a failed CAS reloads: merged with the load). */
claim:
		atomic {
			if
			:: (word & TAIL_MASK) == TAIL(_pid) ->
				word = LOCKED_VAL; inq[_pid] = false; hp = false;
				goto acquired
			:: else
			fi
		}
		/* l.802 clear_pending_set_locked(): 16-bit store. */
		atomic { word = (word & TAIL_MASK) | LOCKED_VAL; hp = false };
		/* l.804 wait_next(): wait for the successor's link. */
		atomic { nxt[_pid] != 0 -> nx = nxt[_pid] - 1 };
		/* l.805 mcs_handoff(): exchange MCS_GO in (then futex_wake if
		 * it was MCS_PARKED: the model's waiter just waits). */
		HANDOFF(nx, MCS_GO);
		atomic { inq[_pid] = false; nx = 0 };
		goto acquired;

head_err:
		/* l.781-790: drop the pending bit (fetch_and), then leave the
		 * queue: ABORT on a timeout, GO on a deadlock. */
		if
		:: hp -> atomic { word = word & ~PENDING_MASK; hp = false }
		:: else
		fi;
		if
		:: ret == ETIMEDOUT -> v = MCS_ABORT
		:: else -> v = MCS_GO
		fi;

		/* queue_leave(), l.437-446: the last waiter removes the tail
		 * (CAS keeping locked/pending; a failed CAS reloads: merged),
		 * anybody else waits for the successor and passes v on. */
queue_leave:
		atomic {
			if
			:: (word & TAIL_MASK) == TAIL(_pid) ->
				word = word & ~TAIL_MASK; inq[_pid] = false;
				goto failed
			:: else
			fi
		}
		atomic { nxt[_pid] != 0 -> nx = nxt[_pid] - 1 };
		HANDOFF(nx, v);
		atomic { inq[_pid] = false; nx = 0 };
		goto failed;

#ifdef NONODE
		/* nonode_lock(), l.581-619, for a slotless thread (both
		 * flavours: the rqspin one-try rule needs a slot). Compete
		 * for the pending bit like a queue head; the loads and the
		 * CASes are merged (a failed CAS reloads and retries). */
nonode:
		do
		/* l.597-605: free, no pending: CAS it held (acquire). */
		:: atomic { (word & LP_MASK) == 0 -> word = word | LOCKED_VAL; goto acquired }
		/* l.606-610: held, no pending: CAS the pending bit in,
		 * then pending_take() with val as it was. */
		:: atomic {
			(word & PENDING_MASK) == 0 && (word & LOCKED_MASK) != 0 ->
			val = word; word = word | PENDING_VAL
		   };
		   goto pending_take
#ifdef RQSPIN
		/* l.611-614: pending seen, wait_step() fails (4T timeout). */
		:: (word & PENDING_MASK) != 0 -> goto failed
#endif
		od;
#endif

acquired:
		cs++;
		assert(cs == 1);
		acquired_n++;
		cs--;
		/* qspin_unlock() / rqspin_unlock(): release byte store. */
		atomic { word = word & ~LOCKED_MASK; r++; val = 0; ret = OK; v = 0; prev = 0 };
		goto next_round;

failed:
#ifndef RQSPIN
		assert(false);   /* qspinlock never fails */
#endif
		atomic { failed_n++; r++; val = 0; ret = OK; v = 0; prev = 0 };

next_round:
		skip
	:: else -> break
	od;
	finished++
}

/* After everybody is done the lock is free, with no pending bit and no
 * queue, and every thread's rounds are accounted for. */
active proctype observer()
{
	byte t;

	finished == NT;
	assert(word == 0 && cs == 0);
	assert(acquired_n + failed_n == NT * ROUNDS);
#ifndef RQSPIN
	assert(acquired_n == NT * ROUNDS);
#endif
	t = 0;
	do
	:: t < NT -> assert(!inq[t]); t++
	:: else -> break
	od
}
