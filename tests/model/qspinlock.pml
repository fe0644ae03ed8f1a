/*
 * SPIN model of librqspin's lock slow path (src/lock/slowpath.c) and the
 * inline fast paths (include/rqspin/qspinlock.h, rqspinlock.h).
 *
 * NT threads do lock/unlock rounds on lock A. Signal handlers (threads
 * 0..NH-1, one invocation each) interrupt their thread at any step of a
 * lock call, hold or unlock, and take lock B (or, rqspin, lock A again:
 * AA). Every C atomic operation on a lock word or an MCS node is one
 * Promela step; waits that C spins on are blocking guards, and a parked
 * queued waiter sleeps in a modelled futex wait queue (woken only by
 * futex_wake or, up to SPUR times per lock call, spuriously), so a lost
 * wake-up is an invalid end state (SPIN's deadlock check).
 *
 *   spin -a qspinlock.pml              qspinlock: no timeouts
 *   spin -a -DRQSPIN qspinlock.pml     rqspinlock: the pending waiter and
 *                                      the queue head may fail (timeout or
 *                                      deadlock) at every wait_step()
 *   -DNT=<threads> -DROUNDS=<rounds>   sizes (defaults 3 and 2)
 *   -DROUNDS_N=<n>                     only threads 0..n-1 do ROUNDS
 *                                      rounds, the others one (default NT)
 *   -DNH=<n>                           threads 0..n-1 get a handler
 *   -DNONODE                           thread 0 has no registry slot
 *   -DOWNERDEAD                        (rqspin) thread NT-1 exits holding
 *                                      A in its last round
 *   -DFORK                             (rqspin, NT=3) thread 0 forks
 *                                      between its calls; threads 1 and 2
 *                                      vanish (ghosts); thread 3 is
 *                                      created in the child
 *   -DFORK_IN_HANDLER                  (FORK, NH=1) thread 0's signal
 *                                      handler forks, at any step of a
 *                                      lock call of thread 0
 *   -DPATIENT                          (FORK) no wait in the child fails:
 *                                      the repairs alone must free what
 *                                      the ghosts left
 *   -DCHILD_ROUNDS=<n>                 (FORK) calls of the child thread
 *                                      (default 1)
 *   -DTRYLOCK                          (FORK) the child thread's first
 *                                      call is rqspin_trylock(), retried
 *                                      until it succeeds (or, with a
 *                                      second call, given up for that
 *                                      rqspin_lock())
 *   -DFAILERS=<n>                      (rqspin) only threads 0..n-1 may
 *                                      fail (default all)
 *   -DSPUR=<n>                         spurious wake-ups per lock call
 *   -DBARGE                            barging mode (the pthread_spin shim)
 *   -DHOG                              (BARGE) thread NT-1 barges forever,
 *                                      as long as the others are not done
 *   -DLOST_CLAIM_ASKS                  (BARGE) a change proposed for
 *                                      slowpath.c: a head whose claim a
 *                                      barger beat asks for the hand-off
 *   -DMUTANT_<name>                    a known-bad variant (mutants.txt)
 *
 * Labels and comments name the C functions; see README.md for the table
 * and for what is abstracted away.
 */

#ifndef NT
#define NT 3
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef ROUNDS_N
#define ROUNDS_N NT
#endif
#ifndef NH
#define NH 0
#endif
#ifndef SPUR
#define SPUR 1
#endif
#ifndef CHILD_ROUNDS
#define CHILD_ROUNDS 1
#endif
/* Thread NT exists only with FORK: the thread created in the child. */
#define ROUNDS_OF(t) ((t) == NT -> CHILD_ROUNDS : ((t) < ROUNDS_N -> ROUNDS : 1))

/* Lock word layout (lock_common.h): locked byte, pending byte, tail
 * (idx in bits 16-17, slot+1 in bits 18-31). One int, as in C. */
#define LOCKED_VAL       1
#define LOCKED_DEAD      222          /* RQSPIN__LOCKED_OWNER_DEAD, 0xde */
#define LOCKED_MASK      255          /* 0x000000ff */
#define PENDING_VAL      256          /* 0x00000100 */
#define PENDING_MASK     65280        /* 0x0000ff00 */
#define LP_MASK          65535        /* locked + pending, the low half-word */
#define TAIL_MASK        (~65535)     /* 0xffff0000 */
/* lock_free_or_dead() */
#define FREE_OR_DEAD(w)  (((w) & LOCKED_MASK) == 0 || ((w) & LOCKED_MASK) == LOCKED_DEAD)
#define NO_PENDING_FREE(w) (((w) & PENDING_MASK) == 0 && FREE_OR_DEAD(w))
#ifndef MUTANT_STEAL_IGNORES_PENDING
#define STEALABLE(w)     NO_PENDING_FREE(w)
#else
#define STEALABLE(w)     FREE_OR_DEAD(w)
#endif

#ifdef BARGE
/*
 * Barging (slowpath.c, "Barging"; pthread_shim.c): the hand-off bit h is
 * bit 9, inside the pending byte. Only the pending bit's holder sets it,
 * and every claim that clears the pending bit clears it too. A barger
 * takes a free lock whatever the pending bit and the tail say, unless h
 * is set: steal_once(.., barge) takes free or owner-dead, the fast path
 * (shim_lock, shim_trylock) only free.
 */
#define HANDOFF_VAL      512          /* RQSPIN__HANDOFF_VAL, 1 << 9 */
#undef STEALABLE
#ifndef MUTANT_BARGE_IGNORES_HANDOFF
#define STEALABLE(w)     (((w) & HANDOFF_VAL) == 0 && FREE_OR_DEAD(w))
#define BARGE_KEEP(w)    (((w) & HANDOFF_VAL) == 0)
#else
#define STEALABLE(w)     FREE_OR_DEAD(w)
#define BARGE_KEEP(w)    true
#endif
/*
 * wait_step()'s hand-off request: the holder of the pending bit sets h
 * once HANDOFF_NS have passed. Time is not modelled: the request may come
 * at any wait_step(), i.e. after any load that saw the lock held; the
 * liveness search's weak fairness makes a waiter that keeps seeing the
 * lock held make it.
 */
#define ASK_HANDOFF(L)   word[L] = word[L] | HANDOFF_VAL; ha = true
/*
 * LOST_CLAIM_ASKS, a change proposed for slowpath.c: a claim that finds
 * the lock taken by a barger counts as a wait_step(), so the head asks for
 * the hand-off (once HANDOFF_NS have passed: here at once) before it waits
 * again. Today it goes back to head_wait(), which calls wait_step() only
 * when its load sees the lock held: a barger that holds the lock at each
 * claim and has released it at each head_wait() load starves the head for
 * ever (README.md, "Barging").
 */
#if defined(LOST_CLAIM_ASKS) && !defined(MUTANT_BARGE_NO_HANDOFF_ASK) && \
    !defined(MUTANT_BARGE_LOST_CLAIM_NO_ASK)
#define LOST_CLAIM_ASK(L) if :: !ha -> ASK_HANDOFF(L) :: else fi
#else
#define LOST_CLAIM_ASK(L) skip
#endif
/* nonode_lock(): a nested rqspin call's one steal_once(.., barge). */
#define NESTED_STEALABLE(w) STEALABLE(w)
/* handoff_asked is per pending hold: back to false when the call ends. */
#define HA_RESET         ; ha = false
#else
#define NESTED_STEALABLE(w) NO_PENDING_FREE(w)
#define HA_RESET
#endif

/*
 * HOG (liveness of barging; no handlers, no fork): the last thread locks
 * and unlocks for as long as any other thread still has rounds to do. Its
 * round counter stays at 0 or 1 (one more round while the others are not
 * done) and its acquisitions are not counted: unbounded counts would make
 * the state space infinite.
 */
#ifdef HOG
#define IS_HOG(t)        ((t) == NT - 1)
#undef ROUNDS_OF
#define ROUNDS_OF(t)     (IS_HOG(t) -> (finished < NT - 1 -> r + 1 : 0) : \
			  ((t) < ROUNDS_N -> ROUNDS : 1))
#define HOG_UNCOUNT(t)   acquired_n = acquired_n - (IS_HOG(t) -> 1 : 0); \
			 r = (IS_HOG(t) -> 0 : r)
#define CALLS_N          (NT - 1 + (ROUNDS - 1) * (ROUNDS_N < NT - 1 -> ROUNDS_N : NT - 1))
#else
#define HOG_UNCOUNT(t)   skip
#define CALLS_N          (NT + (ROUNDS - 1) * ROUNDS_N)
#endif

/* fork() (rqspin, NT=3, no handlers): thread 0 forks between its lock
 * calls; in the child, threads 1 and 2 vanish wherever they are (ghosts,
 * their slots SLOT_GHOST) and a thread created in the child (pid NT)
 * takes the lock. */
#ifdef FORK
#define NTH              (NT + 1)
#else
#define NTH              NT
#endif

/* MCS nodes: thread t has node 2t (idx 0) and 2t+1 (idx 1, used by its
 * signal handler). tail_encode(slot, idx) and back. */
#define NN               (2 * NTH)
#define TAIL(n)          (((((n) / 2) + 1) << 18) | (((n) % 2) << 16))
#define TAIL_NODE(tl)    ((((((tl) >> 18) & 16383) - 1) * 2) + (((tl) >> 16) & 3))

/* mcs_node.locked values (registry.h); MCS_PARKED is 0x100 in C. */
#define MCS_WAIT   0
#define MCS_GO     1
#define MCS_ABORT  2
#define MCS_PARKED 3
#define GHOST_GO   4   /* model only: mcs_wait's MCS_GO behind a ghost */

/* Slow-path results. */
#define OK         0
#define ETIMEDOUT  1
#define EDEADLK    2
#define EOWNERDEAD 3

#ifdef BARGE
/* waiter.handoff_asked of each thread and handler (by _pid): we set h in
 * this pending hold. */
bool handoff_asked[NTH + NH];
#define ha               handoff_asked[_pid]
#endif

int  word[2];           /* lock words: A = 0, B = 1 */
byte nxt[NN];           /* mcs_node.next: 0 = NULL, else node+1 */
byte mlocked[NN];       /* mcs_node.locked */
bool fq[NN];            /* the node's owner sleeps in its futex wait queue */
byte nesting[NTH];      /* rqspin_thread.nesting: MCS nodes in use */
bool inh[NTH];          /* thread t's signal handler is running */
bool incall[NTH];       /* thread t is inside a lock call or holds A */

/* Ghost state, for the properties only. */
byte cs[2];             /* threads inside each critical section */
byte nheads[2];         /* queue heads of each lock */
bool inq[NN];           /* node published as a tail, not yet released */
bool drain[NN];         /* predecessor left the queue by timeout */
byte spur[NN] = SPUR;        /* spurious wake-ups left for this queueing */
byte finished = 0;      /* threads that did all their rounds */
byte hfired = 0;        /* handlers that ran */
byte acquired_n = 0;    /* successful acquisitions (incl. owner-dead) */
byte failed_n = 0;      /* failed acquisitions (rqspin only) */
byte abandoned = 0;     /* locks left owner-dead by an exiting thread */
byte taken_dead = 0;    /* -EOWNERDEAD acquisitions */

#ifdef FORK
bool forked;            /* the fork happened; we are the child */
bool ghost[NTH];        /* vanished in the fork */
byte nghosts;
bool fin[NTH];          /* thread did all its rounds */
bool entry[NTH];        /* held-table entry for A (pushed before the fast CAS) */
bool wf[NTH];           /* waiting_for == A (wait_publish .. wait_unpublish) */
byte role[NTH];         /* rqspin_thread.role: 0 none, 1 pending, 2 queued, 3 head, 4 no-node */
bool incs[NTH];         /* ghost: thread t is in A's critical section */
bool gtimed[NN];        /* the node's timed park returned behind a ghost */
bool rflag;             /* registry.c's repair flag: a pending repair is under way */
/* held_by(t, A, attempt = waiting_for == A): the entry is a hold only
 * when t is not in A's slow path. */
/* registry_has_ghosts() */
#define HAS_GHOSTS       (nghosts > 0)
#define HOLDS(t)         (entry[t] && !wf[t])
/* ghost_repair(): deadlock_holder() (a live holder other than self) and
 * deadlock_ghost_holder(). */
#define LIVE_HOLDER(me)  ((me != 0 && HOLDS(0)) || (me != 1 && !ghost[1] && HOLDS(1)) || \
			  (me != 2 && !ghost[2] && HOLDS(2)) || (me != 3 && HOLDS(3)))
#ifdef MUTANT_GHOST_ATTEMPT_IGNORED
#define GHOST_HOLDS(t)   (ghost[t] && HOLDS(t))
#else
/* deadlock_ghost_holder() or deadlock_ghost_taker(): a ghost whose
 * held-table attempt is for A may have taken it and vanished before
 * wait_unpublish(); with no live holder or taker, its entry counts too. */
#define GHOST_HOLDS(t)   (ghost[t] && entry[t])
#endif
#define GHOST_HOLDER     (GHOST_HOLDS(1) || GHOST_HOLDS(2))
/* deadlock_live_taker(): a live waiter other than self whose role can
 * take the lock (not queued, not a head without the pending bit). */
#define TAKER(t)         (wf[t] && role[t] != 2 && role[t] != 3)
#define LIVE_TAKER(me)   ((me != 0 && TAKER(0)) || (me != 1 && !ghost[1] && TAKER(1)) || \
			  (me != 2 && !ghost[2] && TAKER(2)) || (me != 3 && TAKER(3)))
/* ghost_repair(): claim the ghost's entry (held_claim_ghost_entry, a CAS
 * to RELEASED: the ghost stops holding), then the word CAS to owner-dead
 * while the byte is still LOCKED_VAL. */
#define GHOST_REPAIR(L, T) \
	atomic { \
		HAS_GHOSTS && (word[L] & LOCKED_MASK) == LOCKED_VAL && \
		!LIVE_HOLDER(T) && !LIVE_TAKER(T) && GHOST_HOLDER -> \
		if \
		:: GHOST_HOLDS(1) -> entry[1] = false \
		:: else -> entry[2] = false \
		fi \
	}; \
	atomic { \
		if \
		:: (word[L] & LOCKED_MASK) == LOCKED_VAL -> \
			word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_DEAD \
		:: else \
		fi \
	}
/* deadlock_waiter(self, lock, SLOT_USED, role): a live thread other than
 * me that waits for A (waiting_for) in that role; and the SLOT_GHOST
 * query of the pending rule. */
#define LIVE_ROLE(me, t, r) (me != t && !ghost[t] && wf[t] && role[t] == r)
#define LIVE_IN_ROLE(me, r) (LIVE_ROLE(me, 0, r) || LIVE_ROLE(me, 1, r) || \
			     LIVE_ROLE(me, 2, r) || LIVE_ROLE(me, 3, r))
#define GHOST_PENDING    ((ghost[1] && wf[1] && role[1] == 1) || (ghost[2] && wf[2] && role[2] == 1))
/*
 * ghost_repair(), the pending rule (pending_repair()): a waiter that does
 * not hold the bit itself, seeing it set while no live thread waits as
 * ROLE_PENDING and a ghost does (the look: the load and the two registry
 * scans, one step), takes the repair flag (a CAS; busy: no repair this
 * time), then under the flag (after a full fence) looks again, clears the
 * bit (a CAS loop whose failure reloads and retries while the bit is set:
 * merged), sets the ghosts' ROLE_PENDING for the lock to ROLE_NONE and
 * drops the flag (those stores only matter to readers under the flag:
 * one step). A live thread sets the pending bit only after
 * set_role(ROLE_PENDING), a fence and a wait while the flag is set
 * (PENDING_GATE): of a repairer and a setter, either the repairer's look
 * sees the setter's role, or the setter waits until the repair is done.
 */
#ifndef MUTANT_REPAIR_KEEPS_PENDING
#define PENDING_CLEAR(L) word[L] = word[L] & ~PENDING_MASK
#else
#define PENDING_CLEAR(L) skip
#endif
#define REPAIR_LOOK(L, T) \
	((word[L] & PENDING_MASK) != 0 && !LIVE_IN_ROLE(T, 1) && GHOST_PENDING)
#ifndef MUTANT_REPAIR_KEEPS_GHOST_ROLE
#define GHOST_ROLE_NONE(t) role[t] = (ghost[t] && wf[t] && role[t] == 1 -> 0 : role[t])
#else
#define GHOST_ROLE_NONE(t) skip
#endif
#ifndef MUTANT_REPAIR_NO_FLAG
#ifndef MUTANT_REPAIR_FLAG_ONLY
#define PENDING_GATE     (!rflag);
#else
#define PENDING_GATE
#endif
/* The flag is taken (rs = 1); the look under it (rs = 2: clear). */
#define REPAIR_UNDER_FLAG(L, T) \
	atomic { \
		if \
		:: REPAIR_LOOK(L, T) -> rs = 2 \
		:: else \
		fi \
	}; \
	if \
	:: rs == 2 -> \
		atomic { \
			if \
			:: (word[L] & PENDING_MASK) != 0 -> PENDING_CLEAR(L) \
			:: else \
			fi \
		} \
	:: else \
	fi; \
	atomic { \
		if \
		:: rs == 2 -> GHOST_ROLE_NONE(1); GHOST_ROLE_NONE(2) \
		:: else \
		fi; \
		rflag = false \
	}
#define PENDING_REPAIR(L, T) \
	atomic { HAS_GHOSTS && !hp && REPAIR_LOOK(L, T) -> skip }; \
	atomic { \
		if \
		:: !rflag -> rflag = true; rs = 1 \
		:: else \
		fi \
	}; \
	if \
	:: rs == 1 -> REPAIR_UNDER_FLAG(L, T) \
	:: else \
	fi; \
	rs = 0
#else
/* The rule before the flag (slowpath.c until the fix): the look, then the
 * CAS loop; setters do not wait. */
#define PENDING_GATE
#define PENDING_REPAIR(L, T) \
	atomic { HAS_GHOSTS && !hp && REPAIR_LOOK(L, T) -> skip }; \
	atomic { \
		if \
		:: (word[L] & PENDING_MASK) != 0 -> PENDING_CLEAR(L) \
		:: else \
		fi \
	}
#endif
/* fork(): threads 1 and 2 vanish wherever they are. The forking thread
 * keeps its critical section (it may fork while holding A). */
#define DO_FORK \
	atomic { \
		forked = true; \
		ghost[1] = !fin[1]; ghost[2] = !fin[2]; \
		nghosts = ghost[1] + ghost[2]; \
		cs[0] = incs[0]; \
		FORK_HEADS \
	}
#ifdef FORK_IN_HANDLER
/* The forking thread may be a queue head in the child, and a waiter
 * behind a ghost becomes head too: one head per lock holds only in the
 * parent (the pending bit still admits one taker at a time). */
#define FORK_HEADS       skip
#define ONE_HEAD(L)      (nheads[L] == 1 || forked)
#else
/* The forking thread is in no lock call: the ghosts' heads are gone. */
#define FORK_HEADS       nheads[0] = 0
#define ONE_HEAD(L)      (nheads[L] == 1)
#endif
/* PATIENT: waits in the child never fail (wait_step() gives no error),
 * so every live waiter must leave by acquiring. */
#ifdef PATIENT
#define NOT_PATIENT      (!forked)
#else
#define NOT_PATIENT      true
#endif
/* No thread holds two locks here: pre_wait_check() and the deadlock
 * search never fail (tok.holding is false); only timeouts remain. */
#define MAY_DEADLOCK(T)  false
#define FK(x)            x
#else
#define FK(x)            skip
#define PENDING_GATE
#define NOT_PATIENT      true
#define MAY_DEADLOCK(T)  MAYFAIL(T)
#define ONE_HEAD(L)      (nheads[L] == 1)
#endif
/* Which waits may fail (rqspin): FAILERS=n lets only threads 0..n-1
 * (and their handlers) fail; a size choice, like ROUNDS. */
#ifndef FAILERS
#define FAILERS          NTH
#endif
#define MAYFAIL(T)       ((T) < FAILERS && NOT_PATIENT)

/* wait_next()'s NULL: no successor node. */
#define NONE             255

/*
 * mcs_handoff(): exchange v into node n (release), then futex_wake when
 * the old value was MCS_PARKED. The exchange also ends our time as queue
 * head (ghost), and marks n as drained when we leave by timeout (ghost:
 * the FIFO-drain property, from why we leave, not from what we pass).
 * A write into another node is only legal while that node is queued and
 * waiting: exactly one hand-off per queueing.
 */
#ifdef MUTANT_WAKE_IF_WAIT
#define WAKE_IF(was) (was == MCS_WAIT)
#else
#define WAKE_IF(was) (was == MCS_PARKED)
#endif
#define HANDOFF(L, n, val) \
	atomic { \
		assert(inq[n] && (mlocked[n] == MCS_WAIT || mlocked[n] == MCS_PARKED)); \
		assert(val == MCS_GO || val == MCS_ABORT); \
		was = mlocked[n]; mlocked[n] = val; \
		drain[n] = (ret == ETIMEDOUT); \
		if \
		:: ishead -> nheads[L]--; ishead = false \
		:: else \
		fi \
	}; \
	if \
	:: WAKE_IF(was) -> fq[n] = false \
	:: else \
	fi; \
	was = 0

/* mcs_handoff(NULL): the successor vanished in fork() before linking;
 * nothing to write, we stop being the head. */
#define HANDOFF_NULL(L) \
	atomic { \
		if \
		:: ishead -> nheads[L]--; ishead = false \
		:: else \
		fi \
	}

/* mcs_handoff(next, v), next possibly NULL (only in a forked child). */
#ifdef FORK
#define HANDOFF_OR_NULL(L, n, val) \
	if \
	:: n != NONE -> HANDOFF(L, n, val) \
	:: else -> HANDOFF_NULL(L) \
	fi
#else
#define HANDOFF_OR_NULL(L, n, val) HANDOFF(L, n, val)
#endif

/*
 * wait_next(): wait until the successor has linked itself. In a forked
 * child (rqspin) the spin budget ends with a registry scan: no live thread
 * queued on the lock (ROLE_QUEUED) means the successor vanished between
 * its tail exchange and its link: NULL. The scan and the NULL load are
 * one step.
 */
#ifndef FORK
#define WAIT_NEXT(L, T)  atomic { nxt[me] != 0 -> nx = nxt[me] - 1 }
#else
#ifndef MUTANT_NEXT_NULL_ANY
#define NEXT_GONE(T)     (!LIVE_IN_ROLE(T, 2))
#else
#define NEXT_GONE(T)     true
#endif
#ifndef MUTANT_NEXT_NEVER_NULL
#define WAIT_NEXT(L, T) \
	if \
	:: atomic { nxt[me] != 0 -> nx = nxt[me] - 1 } \
	:: atomic { nxt[me] == 0 && HAS_GHOSTS && NEXT_GONE(T) -> nx = NONE } \
	fi
#else
#define WAIT_NEXT(L, T)  atomic { nxt[me] != 0 -> nx = nxt[me] - 1 }
#endif
#endif

/* Bounded spins may end at any iteration: their loops make progress. */
#ifndef MUTANT_NO_PROGRESS
#define PROGRESS_ENTRY progress_entry:
#define PROGRESS_PENDING progress_pending:
#else
#define PROGRESS_ENTRY
#define PROGRESS_PENDING
#endif

/* Thread t may run only while its handler does not (provided clause);
 * the handler may fire while incall[t]. */
#if NH > 0
#define PROVIDED provided (!inh[_pid])
#define INCALL(ish, t, b) if :: !ish -> incall[t] = b :: else fi
#else
#define PROVIDED
#define INCALL(ish, t, b) skip
#endif

/*
 * One lock call on lock L by thread T (ISH: from T's signal handler),
 * the critical section and the unlock. Ends at label "done". Uses the
 * calling proctype's locals.
 */
inline lock_call(L, T, ISH)
{
	/* qspin_lock() / rqspin_lock_timeout(): the held-table push (not
	 * modelled: AA is decided below), one acquire CAS 0 -> LOCKED_VAL;
	 * on failure val is the word it saw. */
	atomic {
		INCALL(ISH, T, true);
		FK(entry[T] = true);
		if
#ifndef BARGE
		:: word[L] == 0 -> word[L] = LOCKED_VAL; goto acquired
#else
		/* shim_lock(), barge_fast(): a load of the pending byte (h
		 * set: the slow path), then, as a separate step, an exchange
		 * of the locked byte alone (take_byte), whatever the pending
		 * bit and the tail say. shim_trylock() does the same. */
		:: BARGE_KEEP(word[L]) -> val = 0
#endif
		:: else -> val = word[L]
		fi
	}
#ifdef BARGE
	/* take_byte(): the exchange stores LOCKED_VAL whatever the byte
	 * holds. Free: taken. A dead holder's: taken over (-EOWNERDEAD, as
	 * the slow path's steal). Held: the value is unchanged, so the step
	 * only reads the word. */
	if
#ifndef MUTANT_BARGE_XCHG_DEAD_AS_HELD
	:: atomic { val == 0 && FREE_OR_DEAD(word[L]) ->
		if
		:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
		word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired }
	:: atomic { val == 0 && !FREE_OR_DEAD(word[L]) -> val = word[L] }
#else
	:: atomic { val == 0 && (word[L] & LOCKED_MASK) == 0 ->
		word[L] = word[L] | LOCKED_VAL; goto acquired }
	:: atomic { val == 0 && (word[L] & LOCKED_MASK) != 0 ->
		word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; val = word[L] }
#endif
	:: val != 0 -> skip /* h was set: the slow path */
	fi;
#endif
#if defined(RQSPIN) && !defined(BARGE)
	/* slowpath(): a word seen free with only a queue on it (val) is
	 * taken first, before held_aa() and the bookkeeping: steal_once(),
	 * which reloads the word and CASes a free (or owner-dead) locked
	 * byte while no pending bit is set. */
	if
	:: val != 0 && (val & (LOCKED_MASK | PENDING_MASK)) == 0 ->
		if
		:: atomic {
			STEALABLE(word[L]) ->
			if
			:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
			:: else
			fi;
			word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired
		   }
		:: skip
		fi
	:: else
	fi;
#endif
#ifdef RQSPIN
	/* slowpath(): held_aa() on entry. Lock A is in the table of T for the
	 * whole call of the interrupted code: a handler taking A fails at
	 * once with -EDEADLK. */
	if
	:: ISH && L == 0 -> ret = EDEADLK; goto failed
	:: else
	fi;
#endif
#ifdef FORK
	/* slowpath(): held_drain(), held_aa(), then wait_publish(). */
	wf[T] = true;
	role[T] = 0;
#endif
#ifdef RQSPIN
	/* slowpath(): a waiter that holds another lock runs pre_wait_check()
	 * right after wait_publish(), before any spin; it may find a cycle
	 * (a search, no word access) and fail unchanged. */
	if
	:: MAY_DEADLOCK(T) -> goto failed
	:: skip
	fi;
#endif

#ifdef BARGE
	/* slowpath(), barging: the entry watch, steal_once(.., barge) up to
	 * ENTRY_SPINS times, whoever else waits; it stops early when h is
	 * seen. A failed try changes nothing, so the loop is one optional
	 * take, at any time before the thread moves on. Then reload val;
	 * no PENDING_LOOPS wait. */
barge_watch:
	if
	:: atomic {
		STEALABLE(word[L]) ->
		if
		:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
		word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired
	   }
	:: skip
	fi;
	val = word[L];
#else
	/* slowpath() entry watch: while val == LOCKED_VAL, reload and CAS
	 * 0 -> LOCKED_VAL when seen free, for a bounded time (ENTRY_WATCH_NS,
	 * or ENTRY_SPINS pauses: leaving the loop is possible at any
	 * iteration; the attempt mark it makes touches no word). Load and CAS are merged: a
	 * CAS that fails reloads val, one that succeeds needs the word still
	 * 0. A spurious failure of the weak CAS leaves val == 0, which goes
	 * on exactly as the budget exit does (to the fetch_or). */
entry_spin:
	do
	:: val == LOCKED_VAL ->
PROGRESS_ENTRY	atomic {
			val = word[L];
			if
			:: val == 0 -> word[L] = LOCKED_VAL; goto acquired
			:: else
			fi
		}
	:: break
	od;

	/* slowpath(): a pending waiter is taking the lock, (0,1,0) ->
	 * (0,0,1): wait PENDING_LOOPS for it. */
pending_loops:
	do
	:: val == PENDING_VAL ->
PROGRESS_PENDING
		val = word[L]
	:: break
	od;
#endif

	/* Anybody waiting already (pending or queued): queue. */
	if
	:: (val & ~LOCKED_MASK) != 0 -> val = 0; goto queue
	:: else
	fi;

#ifdef RQSPIN
	/* pre_wait_check() may find a cycle before the first wait (a
	 * search; no word access): fail unchanged. */
	if
	:: MAY_DEADLOCK(T) -> goto failed
	:: skip
	fi;
#endif
	/* slowpath(): become the pending waiter (fetch_or, acquire); undo
	 * with clear_pending() (a separate RMW) when others wait. */
	FK(role[T] = 1);   /* set_role(ROLE_PENDING) */
	/* pending_gate(): in a child with ghosts, wait out a repair. */
	PENDING_GATE
fetch_or:
	atomic { val = word[L]; word[L] = word[L] | PENDING_VAL };
	if
	:: (val & ~LOCKED_MASK) != 0 ->
		if
#ifndef MUTANT_NO_PENDING_UNDO
		:: (val & PENDING_MASK) == 0 -> word[L] = word[L] & ~PENDING_MASK
#endif
		:: else
		fi;
		val = 0;
		goto queue
	:: else
	fi;

#if defined(BARGE) && !defined(MUTANT_BARGE_PENDING_STORE)
	/* pending_take(), barging: bargers may take the lock between our
	 * look and our claim, so the claim is a CAS (*,1,h,0) -> (*,0,0,1),
	 * merged with the acquire load that saw the locked byte free (a
	 * failed CAS reloads and waits again). While it sees the lock held,
	 * wait_step() may ask for the hand-off (ASK_HANDOFF). */
pending_take:
	do
	:: atomic {
		FREE_OR_DEAD(word[L]) ->
		if
		:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
#ifndef MUTANT_BARGE_KEEPS_HANDOFF
		word[L] = (word[L] & TAIL_MASK) | LOCKED_VAL;
#else
		word[L] = (word[L] & (TAIL_MASK | HANDOFF_VAL)) | LOCKED_VAL;
#endif
		val = 0; goto acquired
	   }
#ifndef MUTANT_BARGE_NO_HANDOFF_ASK
	/* wait_step() after a load that saw the lock held: the hand-off
	 * request (fetch_or of h), once per pending hold. */
	:: atomic { !ha && !FREE_OR_DEAD(word[L]) -> ASK_HANDOFF(L) }
#endif
#ifdef RQSPIN
	/* wait_step() fails after a load that saw the lock held;
	 * clear_pending() clears h with the pending bit. */
	:: !FREE_OR_DEAD(word[L]) ->
		word[L] = word[L] & ~PENDING_MASK;
		ret = ETIMEDOUT;
		goto failed
#endif
	od;
#else
	/* pending_take(): wait for the locked byte to clear (or turn
	 * owner-dead); val from the fetch_or is checked first. */
pending_take:
	if
	:: FREE_OR_DEAD(val) -> skip
	:: else ->
		do
		:: FREE_OR_DEAD(word[L]) -> val = word[L]; break   /* acquire load */
#ifdef RQSPIN
		/* wait_step() fails after a load that saw the lock held;
		 * clear_pending(), a separate fetch_and. */
		:: MAYFAIL(T) && !FREE_OR_DEAD(word[L]) ->
#ifndef MUTANT_TIMEOUT_KEEPS_PENDING
			word[L] = word[L] & ~PENDING_MASK;
#endif
			ret = ETIMEDOUT;
			goto failed
#endif
#ifdef FORK
		/* res_check(): ghost_repair() of the locked byte. */
		:: GHOST_REPAIR(L, T)
#endif
		od
	fi;
	/* clear_pending_set_locked(): 16-bit store (*,1,x) -> (*,0,1). */
	atomic {
		if
		:: (val & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
		word[L] = (word[L] & TAIL_MASK) | LOCKED_VAL; val = 0
	};
	goto acquired;
#endif

queue:
	/* slowpath() "queue": AA before queueing (covered by the entry
	 * check in this model). */
#ifdef RQSPIN
	/* pre_wait_check(), when the pending path did not run it, may fail
	 * before queueing (no word access). */
	if
	:: MAY_DEADLOCK(T) -> goto failed
	:: skip
	fi;
#endif
	/* Steal spins: steal_once() takes a word with no pending bit and a
	 * free (or owner-dead) locked byte (CAS, acquire); the budget may
	 * run out at any iteration. */
steal_spins:
	do
	:: atomic {
		STEALABLE(word[L]) ->
		if
		:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
		word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired
	   }
	:: break
	od;

	/* slowpath(): node idx = nesting. No registry slot (NONODE: thread
	 * 0), or rqspin nested (idx > 0): nonode_lock(). */
	idx = nesting[T];
#ifdef NONODE
	if
	:: T == 0 -> goto nonode
	:: else
	fi;
#endif
#ifdef RQSPIN
	if
	:: idx > 0 -> goto nonode
	:: else
	fi;
#endif
	/* Claim node idx (nesting = idx + 1) before using it: a handler
	 * arriving from here on takes the next node. */
	me = 2 * T + idx;
#ifndef MUTANT_LATE_NESTING
	nesting[T] = idx + 1;
#endif
node_init:
	atomic { nxt[me] = 0; drain[me] = false; spur[me] = SPUR; FK(gtimed[me] = false); tl = TAIL(me) };
	mlocked[me] = MCS_WAIT;
#ifdef MUTANT_LATE_NESTING
	nesting[T] = idx + 1;
#endif

	/* One more steal_once(). */
	atomic {
		if
		:: STEALABLE(word[L]) ->
			if
			:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
			:: else
			fi;
			word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto release_node
		:: else
		fi
	}

	FK(role[T] = 2);   /* set_role(ROLE_QUEUED) */
	/* Exchange the tail half-word (acq_rel). */
xchg_tail:
	atomic {
		old = word[L] & TAIL_MASK;
		word[L] = (word[L] & ~TAIL_MASK) | tl;
		inq[me] = true;
		if
		:: old != 0 -> prev = TAIL_NODE(old)
		:: else -> nheads[L]++; ishead = true; assert(ONE_HEAD(L))
		fi
	}
	if
	:: old != 0 ->
		/* prev->next = node (release). */
		atomic {
			assert(inq[prev] && nxt[prev] == 0);
			nxt[prev] = me + 1;
			old = 0
		}
#ifdef FORK
		/* Behind a thread that vanished in fork(): we are the head. */
		if
		:: ghost[prev / 2] ->
			atomic { nheads[L]++; ishead = true; assert(ONE_HEAD(L)); prev = 0 };
			goto head_begin
		:: else
		fi;
#endif
		/* mcs_wait(): spin on node->locked; after the budget CAS
		 * MCS_WAIT -> MCS_PARKED (a failed CAS returns the hand-over
		 * value), then futex_wait until it changes; re-check after
		 * every return (wake-up, spurious, timed period). */
mcs_wait:
		if
		:: atomic { mlocked[me] != MCS_WAIT -> v = mlocked[me] }
		:: atomic {
#ifndef MUTANT_SLEEP_WITHOUT_PARKED
			mlocked[me] == MCS_WAIT -> mlocked[me] = MCS_PARKED
#else
			mlocked[me] == MCS_WAIT
#endif
		   };
park:
			/* futex_wait(&node->locked, MCS_PARKED): the kernel
			 * compares and queues under its bucket lock, atomic
			 * with respect to futex_wake. */
			atomic {
#ifndef MUTANT_SLEEP_WITHOUT_PARKED
				if
				:: mlocked[me] == MCS_PARKED -> fq[me] = true
				:: else
				fi
#else
				if
				:: mlocked[me] == MCS_WAIT -> fq[me] = true
				:: else
				fi
#endif
			};
			/* Asleep until futex_wake dequeues us, or a spurious
			 * (EINTR; rqspin: the timed period) return. */
			if
			:: atomic { !fq[me] -> v = mlocked[me] }
			:: atomic { fq[me] && spur[me] > 0 -> fq[me] = false; spur[me]--; v = mlocked[me] }
#ifdef FORK
			/* futex_wait_ns(): the timed period always ends, the
			 * way out behind a ghost (not counted in SPUR; once per
			 * queueing is all a correct wait needs, and a wait that
			 * sleeps again is then stuck for good). */
			:: atomic { fq[me] && ghost[prev / 2] && !gtimed[me] -> fq[me] = false; gtimed[me] = true; v = mlocked[me] }
#endif
			fi;
#ifndef MUTANT_NO_RECHECK
#ifndef MUTANT_SLEEP_WITHOUT_PARKED
			if
#if defined(FORK) && !defined(MUTANT_IGNORE_GHOST_PREV)
			/* mcs_wait(): still MCS_PARKED and the predecessor's
			 * slot is a ghost (a child forked from a handler that
			 * interrupted this very wait): no hand-off will come,
			 * return MCS_GO, unless the value loaded again shows
			 * one the predecessor wrote after the first load,
			 * before it vanished (nobody writes the node any more:
			 * the reload and its test are one step). */
#ifndef MUTANT_GHOST_GO_STALE
			:: v == MCS_PARKED && ghost[prev / 2] ->
				v = (mlocked[me] == MCS_PARKED -> GHOST_GO : mlocked[me])
#else
			:: v == MCS_PARKED && ghost[prev / 2] -> v = GHOST_GO
#endif
			:: v == MCS_PARKED && !ghost[prev / 2] -> goto park
#else
			:: v == MCS_PARKED -> goto park
#endif
			:: else
			fi
#else
			if
			:: v == MCS_WAIT -> goto park
			:: else
			fi
#endif
#endif
		fi;
#if defined(BARGE) && !defined(MUTANT_BARGE_WAIT_AS_GO)
		/* mcs_wait(), barging: MCS_WAIT after a wake-up is the head's
		 * early wake (mcs_prewake), not a hand-off: poll (short
		 * naps) until the value changes. */
		if
		:: v == MCS_WAIT -> atomic { mlocked[me] != MCS_WAIT -> v = mlocked[me] }
		:: else
		fi;
#endif
		/* The value received: GO (become the head) or ABORT (leave,
		 * -ETIMEDOUT). FIFO drain: ABORT exactly when the predecessor
		 * left by timeout. One head per lock. */
		atomic {
			if
			:: v == MCS_ABORT -> assert(drain[me]); ret = ETIMEDOUT
			:: v == GHOST_GO -> assert(!drain[me]); nheads[L]++; ishead = true; assert(ONE_HEAD(L))
			:: else -> assert(!drain[me]); nheads[L]++; ishead = true; assert(ONE_HEAD(L))
			fi;
			/* ghosts back to their resting values */
			prev = 0; drain[me] = false; spur[me] = SPUR; FK(gtimed[me] = false)
		}
		if
		:: v == MCS_ABORT -> goto queue_leave
		:: else -> v = 0
		fi
	:: else
	fi;

	/* We are the queue head: head_wait(). */
head_begin:
	FK(role[T] = 3);   /* set_role(ROLE_HEAD) */
#ifdef BARGE
	/* mcs_prewake(): load our next (acquire) and, when it is linked
	 * and asleep, CAS its node MCS_PARKED -> MCS_WAIT (merged: only we
	 * write GO/ABORT there, and only later), then futex_wake it. Once
	 * per queue head: head_again comes back below. */
	atomic {
		if
		:: nxt[me] != 0 && mlocked[nxt[me] - 1] == MCS_PARKED ->
			nx = nxt[me] - 1;
			assert(inq[nx]);
			mlocked[nx] = MCS_WAIT; was = MCS_PARKED
		:: else
		fi
	};
	if
	:: was == MCS_PARKED ->
#ifndef MUTANT_BARGE_PREWAKE_NO_WAKE
		atomic { fq[nx] = false; nx = 0; was = 0 }
#else
		atomic { nx = 0; was = 0 }
#endif
	:: else
	fi;
#endif
head_wait:
	do
	/* No pending bit seen: CAS it in (a failed CAS reloads and retries:
	 * merged with the load). */
#ifndef MUTANT_HEAD_NO_PENDING
#ifndef FORK
	:: atomic { !hp && (word[L] & PENDING_MASK) == 0 -> word[L] = word[L] | PENDING_VAL; hp = true }
#else
	/* set_role(ROLE_PENDING) comes before the CAS, and stays when the
	 * CAS fails (repairs read it); pending_gate() in between waits out a
	 * repair. The CAS fails when the bit is back (merged: it succeeds
	 * whenever the bit is clear; a C retry after a change of other bits
	 * passes the gate once more, which the model does not require). */
	:: atomic { !hp && (word[L] & PENDING_MASK) == 0 -> role[T] = 1 };
	   PENDING_GATE
	   atomic {
		if
		:: (word[L] & PENDING_MASK) == 0 -> word[L] = word[L] | PENDING_VAL; hp = true
		:: else
		fi
	   }
#endif
#else
	:: atomic { !hp && (word[L] & LP_MASK) == 0 -> val = word[L] }; break
#endif
	/* Pending held, acquire load sees the lock free (or owner-dead). */
#ifndef MUTANT_DEAD_NOT_FREE
	:: atomic { hp && FREE_OR_DEAD(word[L]) -> val = word[L] }; break
#else
	:: atomic { hp && (word[L] & LOCKED_MASK) == 0 -> val = word[L] }; break
#endif
#if defined(BARGE) && !defined(MUTANT_BARGE_NO_HANDOFF_ASK)
	/* wait_step(), barging: the pending holder asks for the hand-off
	 * (after a load that saw the lock held). */
	:: atomic { hp && !ha && !FREE_OR_DEAD(word[L]) -> ASK_HANDOFF(L) }
#endif
#ifdef RQSPIN
	/* wait_step() fails (timeout, or a deadlock a search found) after a
	 * load that saw someone else's pending bit, or the lock held. */
	:: MAYFAIL(T) && !hp && (word[L] & PENDING_MASK) != 0 -> ret = ETIMEDOUT; goto head_err
	:: MAY_DEADLOCK(T) && !hp && (word[L] & PENDING_MASK) != 0 -> ret = EDEADLK; goto head_err
	:: MAYFAIL(T) && hp && !FREE_OR_DEAD(word[L]) -> ret = ETIMEDOUT; goto head_err
	:: MAY_DEADLOCK(T) && hp && !FREE_OR_DEAD(word[L]) -> ret = EDEADLK; goto head_err
#endif
#ifdef FORK
	/* res_check(): ghost_repair(), the owner-dead and the pending rule. */
	:: GHOST_REPAIR(L, T)
#ifndef MUTANT_NO_PENDING_REPAIR
	:: PENDING_REPAIR(L, T)
#endif
#endif
	od;
	if
	:: (val & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
	:: else
	fi;

#if defined(BARGE) && !defined(MUTANT_BARGE_HEAD_STORE)
	/* Claim, barging (slowpath() after head_again): both claims are
	 * CASes that need the locked byte still free (merged with their
	 * load). A barger took the lock first: wait again, still holding
	 * the pending bit (and h, if asked). Last in the queue:
	 * (me,1,h,0) -> (0,0,0,1); otherwise (*,1,h,0) -> (*,0,0,1), then
	 * hand the queue on. */
barge_claim:
	atomic {
		if
		:: !FREE_OR_DEAD(word[L]) -> LOST_CLAIM_ASK(L); goto head_wait
		:: else ->
			if
			:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
			:: else -> ret = OK
			fi;
			if
			:: (word[L] & TAIL_MASK) == tl ->
#ifndef MUTANT_BARGE_KEEPS_HANDOFF
				word[L] = LOCKED_VAL;
#else
				word[L] = (word[L] & HANDOFF_VAL) | LOCKED_VAL;
#endif
				inq[me] = false; hp = false;
				nheads[L]--; ishead = false;
				goto release_node_queued
			:: else ->
#ifndef MUTANT_BARGE_KEEPS_HANDOFF
				word[L] = (word[L] & TAIL_MASK) | LOCKED_VAL;
#else
				word[L] = (word[L] & (TAIL_MASK | HANDOFF_VAL)) | LOCKED_VAL;
#endif
				hp = false; goto wait_next
			fi
		fi
	}
#endif
	/* Claim: if we are the tail, CAS (me,1,x) -> (0,0,1) (a failed CAS
	 * reloads: merged with the load). */
claim:
#ifndef MUTANT_CLAIM_STORE
	atomic {
		if
		:: (word[L] & TAIL_MASK) == tl ->
			word[L] = LOCKED_VAL; inq[me] = false; hp = false;
			nheads[L]--; ishead = false;
			goto release_node_queued
		:: else
		fi
	}
#else
	/* Mutant: a load, then a plain store. */
	if
	:: (word[L] & TAIL_MASK) == tl ->
		atomic {
			word[L] = LOCKED_VAL; inq[me] = false; hp = false;
			nheads[L]--; ishead = false
		};
		goto release_node_queued
	:: else
	fi;
#endif
	/* clear_pending_set_locked(): 16-bit store. */
#ifndef MUTANT_CPSL_WORD
	atomic { word[L] = (word[L] & TAIL_MASK) | LOCKED_VAL; hp = false };
#else
	atomic { word[L] = LOCKED_VAL; hp = false };
#endif
wait_next:
	/* wait_next(): wait for the successor's link. */
	WAIT_NEXT(L, T);
#ifndef MUTANT_NO_HANDOFF
	HANDOFF_OR_NULL(L, nx, MCS_GO);
#else
	atomic { nheads[L]--; ishead = false };
#endif
	atomic { inq[me] = false; nx = 0 };
	goto release_node_queued;

head_err:
	/* Drop the pending bit (fetch_and), then queue_leave(): ABORT on a
	 * timeout, GO on a deadlock. */
	if
	:: hp -> atomic { word[L] = word[L] & ~PENDING_MASK; hp = false }
	:: else
	fi;
	if
#ifndef MUTANT_GO_ON_TIMEOUT
	:: ret == ETIMEDOUT -> v = MCS_ABORT
#else
	:: ret == ETIMEDOUT -> v = MCS_GO
#endif
	:: else -> v = MCS_GO
	fi;

	/* queue_leave(): the last waiter removes the tail (CAS keeping
	 * locked/pending; a failed CAS reloads: merged), anybody else waits
	 * for the successor (wait_next) and passes v on (mcs_handoff). */
queue_leave:
	atomic {
		if
#ifndef MUTANT_LEAVE_NO_TAIL_RESET
		:: (word[L] & TAIL_MASK) == tl ->
			word[L] = word[L] & ~TAIL_MASK; inq[me] = false;
			if
			:: ishead -> nheads[L]--; ishead = false
			:: else
			fi;
			goto release_node_failed
#endif
		:: else
		fi
	}
	WAIT_NEXT(L, T);
#ifdef MUTANT_NO_ABORT_PASS
	v = MCS_GO;
#endif
#ifndef MUTANT_HANDOFF_NULL
	HANDOFF_OR_NULL(L, nx, v);
#else
	HANDOFF(L, nx, v);   /* mcs_handoff() without its NULL check */
#endif
	atomic { inq[me] = false; nx = 0; v = 0 };
	goto release_node_failed;

	/* nonode_lock(): slotless (NONODE, both flavours: compete for the
	 * pending bit like a queue head), or rqspin nested in a queued wait
	 * of its own thread (one steal_once(), else -EDEADLK). */
nonode:
#ifdef RQSPIN
	if
	:: idx > 0 ->
		atomic {
			if
			:: NESTED_STEALABLE(word[L]) ->
				if
				:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
				:: else
				fi;
				word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired
			:: else -> ret = EDEADLK; goto failed
			fi
		}
	:: else
	fi;
#endif
	FK(role[T] = 4);   /* set_role(ROLE_NONODE) */
	do
	/* Free, no pending: CAS it held (acquire). */
	:: atomic {
#ifndef MUTANT_NONODE_IGNORES_PENDING
		NO_PENDING_FREE(word[L]) ->
#else
		FREE_OR_DEAD(word[L]) ->
#endif
		if
		:: (word[L] & LOCKED_MASK) == LOCKED_DEAD -> ret = EOWNERDEAD
		:: else
		fi;
		word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_VAL; goto acquired
	   }
	/* Held, no pending: CAS the pending bit in, then pending_take(). */
	:: atomic {
		(word[L] & PENDING_MASK) == 0 && !FREE_OR_DEAD(word[L]) ->
		FK(role[T] = 1);
		val = word[L]; word[L] = word[L] | PENDING_VAL
	   };
	   goto pending_take
#ifdef RQSPIN
	/* Pending seen, wait_step() fails (4T timeout). */
	:: MAYFAIL(T) && (word[L] & PENDING_MASK) != 0 -> ret = ETIMEDOUT; goto failed
#endif
	od;

release_node_queued:
	/* The queue's slow path leaves with the lock: nesting = idx. */
	nesting[T] = idx;
	goto acquired;
release_node:
	nesting[T] = idx;
	goto acquired;
release_node_failed:
	nesting[T] = idx;
	goto failed;

acquired:
#ifdef FORK
	/* wait_unpublish(), then the caller's critical section. */
	wf[T] = false;
#endif
	atomic {
		cs[L]++;
		assert(cs[L] == 1);
		FK(incs[T] = true);
		acquired_n++;
		HOG_UNCOUNT(T);
		if
		:: ret == EOWNERDEAD -> taken_dead++
		:: else
		fi;
		me = 0; idx = 0; tl = 0; val = 0; ret = OK HA_RESET
	};
#ifdef OWNERDEAD
	/* held_abandon(): the thread exits holding A (its last round): CAS
	 * the locked byte to owner-dead (release). */
	if
	:: !ISH && T == NT - 1 && r == ROUNDS_OF(T) - 1 ->
		atomic {
			cs[L]--; abandoned++;
			word[L] = (word[L] & ~LOCKED_MASK) | LOCKED_DEAD;
			INCALL(ISH, T, false)
		};
		goto done
	:: else
	fi;
#endif
	/* qspin_unlock() / rqspin_unlock(): release byte store (then the
	 * held-table pop). */
	atomic {
		cs[L]--;
		FK(entry[T] = false; incs[T] = false);
#ifndef MUTANT_UNLOCK_WORD
		word[L] = word[L] & ~LOCKED_MASK;
#else
		word[L] = 0;
#endif
		INCALL(ISH, T, false)
	};
	goto done;

failed:
#ifndef RQSPIN
	assert(false);   /* qspinlock never fails */
#endif
	atomic {
		failed_n++;
		FK(entry[T] = false; wf[T] = false);
		INCALL(ISH, T, false);
		me = 0; idx = 0; tl = 0; val = 0; ret = OK HA_RESET
	};
done:
	skip
}

#ifdef TRYLOCK
/*
 * rqspin_trylock() in the forked child (include/rqspin/rqspinlock.h), by
 * a program that retries until it gets the lock, then unlocks. A retry
 * that would see the same word and the same live pending waiters fails
 * the same way, so the model retries only after one of them changed: a
 * trylock that can never succeed is an invalid end state.
 */
inline trylock_call(L, T)
{
	/* The locked byte first (relaxed load), then the held push and the
	 * CAS 0 -> LOCKED_VAL (acquire); on failure val is the word seen. */
	val = 0;
try_start:
	if
	:: atomic { (word[L] & LOCKED_MASK) != 0 -> val = word[L]; hp = LIVE_IN_ROLE(T, 1) }; goto try_retry
	:: atomic { (word[L] & LOCKED_MASK) == 0 -> entry[T] = true }
	fi;
	atomic {
		if
		:: word[L] == 0 -> word[L] = LOCKED_VAL; goto try_acquired
		:: else -> val = word[L]
		fi
	};
	/* rqspin__trylock_pending(), when the word had the pending bit: in a
	 * child (registry_has_ghosts), no live ROLE_PENDING waiter and a
	 * ghost one: clear the bit (CAS loop, merged), then one CAS
	 * 0 -> LOCKED_VAL. */
	if
	:: (val & PENDING_MASK) != 0 ->
		atomic {
			hp = LIVE_IN_ROLE(T, 1);
			if
			:: HAS_GHOSTS && !hp && GHOST_PENDING
			:: else -> goto try_failed
			fi
		};
#ifndef MUTANT_TRYLOCK_NO_REPAIR
#ifndef MUTANT_REPAIR_NO_FLAG
		/* pending_repair(): the flag (busy: fail, rs = 3, and retry
		 * once it is dropped), the look under it, the clear. */
		atomic {
			if
			:: !rflag -> rflag = true; rs = 1
			:: else -> rs = 3; goto try_failed
			fi
		};
		REPAIR_UNDER_FLAG(L, T);
		atomic {
			if
			:: rs == 2 -> rs = 0
			:: else -> rs = 0; hp = LIVE_IN_ROLE(T, 1); goto try_failed
			fi
		};
#else
		atomic { word[L] = word[L] & ~PENDING_MASK };
#endif
#endif
		atomic {
			if
			:: word[L] == 0 -> word[L] = LOCKED_VAL; goto try_acquired
			:: else -> val = word[L]
			fi
		}
	:: else -> hp = LIVE_IN_ROLE(T, 1)
	fi;
try_failed:
	/* held pop */
	entry[T] = false;
try_retry:
	/* val: the word the attempt saw last; hp: whether its registry scan
	 * (or, without one, the step it failed at) saw a live pending waiter.
	 * Once every other live thread is done, the program gives up on a
	 * word that trylock does not repair and never will: a held byte (a
	 * ghost's hold becomes owner-dead only through a waiter) or a tail (a
	 * ghost's queue). A pending bit alone it must get past. Or the
	 * program falls back to rqspin_lock() (its next call), when it has
	 * one: decided first, so that a retry may wait for ever. */
	if
	:: atomic { r + 1 < ROUNDS_OF(T) -> val = 0; hp = false; rs = 0 }; goto try_done
	:: skip
	fi;
	if
	:: atomic {
		word[L] != val || LIVE_IN_ROLE(T, 1) != hp || (rs == 3 && !rflag) ->
		val = 0; hp = false; rs = 0
	   };
		goto try_start
	:: atomic {
		finished + nghosts == NTH - 1 && (word[L] & ~PENDING_MASK) != 0 ->
		val = 0; hp = false; rs = 0
	   };
		goto try_done
	fi;
try_acquired:
	atomic {
		cs[L]++;
		assert(cs[L] == 1);
		incs[T] = true;
		acquired_n++;
		val = 0
	};
	/* rqspin_unlock(): release byte store, held pop. */
	atomic {
		cs[L]--;
		entry[T] = false; incs[T] = false;
		word[L] = word[L] & ~LOCKED_MASK
	};
try_done:
	skip
}
#endif

#define LOCALS \
	int  val;           /* the C variable val (a lock-word snapshot) */ \
	int  old;           /* old tail from the exchange */ \
	int  tl;            /* our tail value */ \
	byte me;            /* our MCS node */ \
	byte idx;           /* its index (nesting level) */ \
	byte prev, nx;      /* predecessor / successor node */ \
	byte v;             /* value received / passed in an MCS node */ \
	byte was;           /* mcs_handoff: value exchanged out */ \
	byte ret;           /* OK, ETIMEDOUT, EDEADLK, EOWNERDEAD */ \
	bool hp;            /* have_pending (head_wait) */ \
	bool ishead;        /* ghost: we are the queue head */ \
	byte r              /* rounds done (threads) */ \
	FORK_LOCALS
#ifdef FORK
/* pending_repair(): 0 idle, 1 holds the repair flag, 2 and clears the bit,
 * 3 (trylock) failed on a busy flag. */
#define FORK_LOCALS ; byte rs
#else
#define FORK_LOCALS
#endif

active [NTH] proctype thread() PROVIDED
{
	LOCALS;

#ifdef FORK
	if
	:: _pid == NT -> forked   /* created in the child */
	:: else
	fi;
	{
#endif
	do
#ifdef FORK
#ifndef FORK_IN_HANDLER
	/* Thread 0 forks between its calls (before it finishes). */
	:: _pid == 0 && !forked -> DO_FORK
#else
	/* Thread 0's handler forks during a lock call; if it did not, thread
	 * 0 forks after its calls. */
	:: _pid == 0 && !forked && r >= ROUNDS_OF(_pid) -> DO_FORK
#endif
#endif
	:: r < ROUNDS_OF(_pid) ->
#ifdef TRYLOCK
		if
		:: _pid == NT && r == 0 -> trylock_call(0, _pid)
		:: else -> lock_call(0, _pid, false)
		fi;
#else
		lock_call(0, _pid, false);
#endif
		r++
	:: else -> break
	od;
	FK(fin[_pid] = true);
	finished++
#ifdef FORK
	} unless { ghost[_pid] }
#endif
}

#if NH > 0
/* A signal handler of thread t: interrupts it once, at any step of a lock
 * call (until its unlock), and takes lock B (qspin: nested, node 1 when
 * its thread has claimed node 0; rqspin: nested in a queued wait, one
 * try), or, rqspin only, lock A (AA). */
active [NH] proctype handler()
{
	LOCALS;
	byte t = _pid - NTH;
	byte hl;

#ifdef FORK_IN_HANDLER
	/* fork() from the handler (async-signal-safe): the child's thread 0
	 * goes on with the interrupted lock call, hold or unlock. */
end_idle_fork:
	atomic { incall[t] && !inh[t] && !forked -> inh[t] = true; hfired++ };
	DO_FORK;
	inh[t] = false;
	goto handler_done;
#endif
end_idle:
	atomic { incall[t] && !inh[t] -> inh[t] = true; hfired++ };
	if
	:: hl = 1
#ifdef RQSPIN
	:: hl = 0
#endif
	fi;
	lock_call(hl, t, true);
	inh[t] = false;
handler_done:
	skip
}
#endif

/* After everybody is done every lock is free, with no pending bit and no
 * queue, every call is accounted for, and each abandoned lock was taken
 * over exactly once. */
active proctype observer()
{
	byte t;

#ifdef FORK
	/* The live threads are done; what ghosts left may stay. */
	forked && finished + nghosts == NTH;
	assert(cs[0] == 0)
#else
	finished == NT;
	assert(word[1] == 0 && cs[0] == 0 && cs[1] == 0);
	assert((word[0] == 0 && taken_dead == abandoned) ||
	       (word[0] == LOCKED_DEAD && taken_dead + 1 == abandoned));
	assert(nheads[0] == 0 && nheads[1] == 0);
	assert(acquired_n + failed_n == CALLS_N + hfired);
#ifndef RQSPIN
	assert(failed_n == 0);
#endif
	t = 0;
	do
	:: t < NN -> assert(!inq[t] && !fq[t]); t++
	:: else -> break
	od;
	t = 0;
	do
	:: t < NT -> assert(nesting[t] == 0 && !inh[t]); t++
	:: else -> break
	od
#endif
}
