# rqspinlock tests. Included by
# tests/CMakeLists.txt, which defines rqspin_add_test(). Every test is
# bounded by iteration counts (scaled down under ThreadSanitizer) and uses
# time only for lower bounds ("waited at least the timeout") or as a loose
# hang guard.

# AA: re-lock, handlers interrupting the holder and waiters, trylock,
# sigsave, the held table, argument checks. Runs under TSan too.
rqspin_add_test(NAME rqspin_aa SOURCES rqspin_aa.c
  TIMEOUT 120 LABELS rqspin unit signal)

# Cross-thread unlock credits the holder, not a thread that only has an
# entry for the lock (acquiring: handler-interrupted, or before its CAS;
# releasing); a stress of the same; unlocks past the table under
# contention. TSan does not allow cross-thread unlocks.
rqspin_add_test(NAME rqspin_cross_unlock_owner SOURCES rqspin_cross_unlock_owner.c NO_TSAN
  TIMEOUT 240 LABELS rqspin stress signal)

# Cross-thread unlock of a lock its owner holds untracked (past its table,
# or moved into it as NULL): the owner's count goes too, so no phantom hold
# stays (later cross-thread unlocks waited out the timeout; AA was lost).
rqspin_add_test(NAME rqspin_cross_unlock_untracked SOURCES rqspin_cross_unlock_untracked.c
  NO_TSAN TIMEOUT 180 LABELS rqspin unit)

# Cross-thread unlock of all of more than 31 locks, in non-LIFO orders:
# every release reaches the owner's table (the untracked ones as a count,
# not in the 31 cells, which ran out and dropped the rest).
rqspin_add_test(NAME rqspin_cross_unlock_many SOURCES rqspin_cross_unlock_many.c
  NO_TSAN TIMEOUT 120 LABELS rqspin unit)

# A lock handed off (this thread locks it, another unlocks it) while other
# locks come and go: the RELEASED marks its releases leave under the live
# hold are reused once the table is full, so no lock goes past the table
# (AA on every one of them, in random unlock orders and from a handler).
rqspin_add_test(NAME rqspin_handoff_marks SOURCES rqspin_handoff_marks.c
  NO_TSAN TIMEOUT 240 LABELS rqspin unit signal)

# White-box: a full table's mark is never reused below the entry of a wait
# the thread has published (a handler over a slow path's first spins): the
# hold would read as taken before the wait, a false deadlock link.
rqspin_add_test(NAME rqspin_marks_wait SOURCES rqspin_marks_wait.c LIBS rqspin_static
  NO_TSAN TIMEOUT 120 LABELS rqspin unit)
if(TARGET rqspin_marks_wait)
  target_include_directories(rqspin_marks_wait PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# A lock released by one of the program's key destructors at thread exit
# is not taken over (owner-dead) before that destructor runs; one nobody
# releases still is.
rqspin_add_test(NAME rqspin_exit_destructor SOURCES rqspin_exit_destructor.c
  TIMEOUT 120 LABELS rqspin unit)

# A process-shared lock released from another process: the word, not the
# locker's stale entry, decides who holds it (deadlock search, cross-thread
# unlock).
rqspin_add_test(NAME rqspin_pshared_cross_unlock SOURCES rqspin_pshared_cross_unlock.c
  LIBS rqspin_static NO_TSAN TIMEOUT 120 LABELS rqspin unit)
if(TARGET rqspin_pshared_cross_unlock)
  target_include_directories(rqspin_pshared_cross_unlock PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# A process-shared lock taken here and released by another process, over
# and over (rqspin_lock, rqspin_trylock): each acquisition drops the old
# entry but the newest (perhaps an interrupted call's), so the table never
# overflows; a release posted by a thread of this process goes with it.
rqspin_add_test(NAME rqspin_pshared_handoff SOURCES rqspin_pshared_handoff.c NO_TSAN
  TIMEOUT 120 LABELS rqspin unit)

# Held-table overflow: 34 locks, re-lock of an untracked one -> -ETIMEDOUT
# after >= the timeout (100 ms here).
rqspin_add_test(NAME rqspin_held_overflow SOURCES rqspin_held_overflow.c
  TIMEOUT 120 LABELS rqspin unit)

# ABBA: 16 threads A->B against one B->A until a failure (-EDEADLK only),
# and a deterministic two-thread ABBA with reports. Runs under TSan too.
rqspin_add_test(NAME rqspin_abba SOURCES rqspin_abba.c
  TIMEOUT 180 LABELS rqspin stress)

# A hold that a signal handler took on its fast path, above the wait it
# interrupted, is no link of a deadlock: no false ABBA through it.
rqspin_add_test(NAME rqspin_handler_leaf SOURCES rqspin_handler_leaf.c NO_TSAN
  TIMEOUT 120 LABELS rqspin unit signal)

# Cycles of 3, 4 and 8 threads -> -EDEADLK (cycle stat, report lines up);
# a 9-cycle (beyond the followed chain) still resolves.
rqspin_add_test(NAME rqspin_cycle SOURCES rqspin_cycle.c
  TIMEOUT 180 LABELS rqspin stress)

# Owner thread exits while holding: the next acquirer gets -EOWNERDEAD
# quickly (10 s timeout, returns in < 5 s), with and without queued waiters.
rqspin_add_test(NAME rqspin_owner_dead SOURCES rqspin_owner_dead.c
  TIMEOUT 120 LABELS rqspin unit)

# Stalled owner: pending waiter, head and queued waiters all -ETIMEDOUT, the
# lock consistent after; the stress module's "handoff tail" ABBA.
rqspin_add_test(NAME rqspin_stall SOURCES rqspin_stall.c
  TIMEOUT 120 LABELS rqspin unit)

# A thread exits holding more than 31 locks: the untracked ones come back
# with -EOWNERDEAD, never while a live thread holds untracked locks.
rqspin_add_test(NAME rqspin_exit_untracked SOURCES rqspin_exit_untracked.c
  TIMEOUT 120 LABELS rqspin unit NO_TSAN)

# Per-call budgets in the queue: a waiter behind a head with a shorter
# budget queues again when that head dissolves the queue, so "no timeout"
# never times out and a longer budget is kept.
rqspin_add_test(NAME rqspin_queue_budget SOURCES rqspin_queue_budget.c
  TIMEOUT 120 LABELS rqspin unit)

# A waiter that finds the thread it waits for gone (released and exited
# between the held-table read and the /proc read) waits one more T instead
# of failing (white-box: the holder's record given an exited thread's id).
rqspin_add_test(NAME rqspin_stall_gone SOURCES rqspin_stall_gone.c LIBS rqspin_static
  TIMEOUT 120 LABELS rqspin unit)
if(TARGET rqspin_stall_gone)
  target_include_directories(rqspin_stall_gone PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# A blocker that released the lock between the held-table read and the
# /proc read and then slept is not a stall (white-box: slowpath.c compiled
# once more with its test hook, which has the holder unlock right after the
# waiter's state read; the holder's record names a sleeping thread).
add_library(rqspin_slowpath_hooks OBJECT ${PROJECT_SOURCE_DIR}/src/lock/slowpath.c)
rqspin_config(rqspin_slowpath_hooks RQSPIN_LOCK_TEST_HOOKS=1)
target_link_libraries(rqspin_slowpath_hooks PRIVATE Threads::Threads)
rqspin_add_test(NAME rqspin_stall_released
  SOURCES rqspin_stall_released.c $<TARGET_OBJECTS:rqspin_slowpath_hooks> LIBS rqspin_static
  TIMEOUT 120 LABELS rqspin unit)
if(TARGET rqspin_stall_released)
  target_include_directories(rqspin_stall_released PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# Signal storm (the kernel's NMI stress): per-thread 1 ms timers whose
# handlers take locks (AA, ABBA, nested ABBA, ABBCCA), 4 and 16 threads.
rqspin_add_test(NAME rqspin_signal_storm SOURCES rqspin_signal_storm.c
  TIMEOUT 300 LABELS rqspin stress signal)

# No false failures: 32 threads on one lock with the default 250 ms
# timeout -> zero errors, exact count.
rqspin_add_test(NAME rqspin_no_false_failures SOURCES rqspin_no_false_failures.c
  TIMEOUT 300 LABELS rqspin stress)

# Reports: RQSPIN_REPORT / RQSPIN_TIMEOUT_MS in a re-executed child,
# rqspin_report_write text, event names.
rqspin_add_test(NAME rqspin_report SOURCES rqspin_report.c
  TIMEOUT 120 LABELS rqspin unit)

# No-node paths with the 4-slot test flavour: 12 threads on one lock (8
# without a slot), a handler nested in its own queued wait (one try,
# nest_fail), a slotless waiter's 4T timeout.
rqspin_add_test(NAME rqspin_nonode SOURCES rqspin_nonode.c LIBS rqspin_tiny
  TIMEOUT 120 LABELS rqspin stress signal)

# ABBA through a pending waiter interrupted by a handler: the queue head
# must detect it while the lock is only pending (kernel: the head's check
# masks locked|pending). Runs under TSan too.
rqspin_add_test(NAME rqspin_abba_pending SOURCES rqspin_abba_pending.c
  TIMEOUT 120 LABELS rqspin unit signal)

# Failure counters stay exact when a signal handler on the same thread fails
# too (AA from the main loop and from a 20 us per-thread timer).
rqspin_add_test(NAME rqspin_stats_signal SOURCES rqspin_stats_signal.c
  TIMEOUT 120 LABELS rqspin unit signal)

# The held table stays exact for any unlock order and depth: 40 locks
# unlocked in the same order, random orders, hand-over-hand with windows up
# to 40; afterwards no false -EDEADLK on a contended lock, AA at once, and
# a thread exit marks no lock owner-dead that a live thread holds.
rqspin_add_test(NAME rqspin_held_order SOURCES rqspin_held_order.c
  TIMEOUT 180 LABELS rqspin unit)

# Past the table's 31 entries with random unlock orders, while nested
# signal handlers (SA_NODEFER, 50 us timers) take and release their own
# locks: each handler leaves the count as it found it, and every round
# ends with an empty table and free locks.
rqspin_add_test(NAME rqspin_held_overflow_signals SOURCES rqspin_held_overflow_signals.c
  TIMEOUT 180 LABELS rqspin unit signal)

# fork() writes no lock word: a private lock in MAP_SHARED memory held by
# one parent thread while another forks stays held (a third thread's short
# timeout is -ETIMEDOUT), and mutual exclusion holds afterwards.
rqspin_add_test(NAME rqspin_fork_shared SOURCES rqspin_fork_shared.c
  TIMEOUT 120 LABELS rqspin unit NO_TSAN)

# Vanished owner and waiters after fork(): in the child the lock is taken
# over (-EOWNERDEAD) within a few timeouts and then works (lock, trylock),
# with a ghost pending waiter, a ghost queue, and a fork from a handler
# that interrupted the thread's own queued wait (the child must not hang).
rqspin_add_test(NAME rqspin_fork_ghost SOURCES rqspin_fork_ghost.c
  TIMEOUT 120 LABELS rqspin unit signal NO_TSAN NO_ASAN)

# A forked child's repair of a vanished thread's pending bit never takes a
# live waiter's bit for it (its holder's role hidden by a signal handler
# that waits on another lock): rqspin_trylock fails, and a queued
# rqspin_lock waits for the bit's holder.
rqspin_add_test(NAME rqspin_fork_repair SOURCES rqspin_fork_repair.c
  TIMEOUT 120 LABELS rqspin unit signal NO_TSAN NO_ASAN)

# A thread forked away between its pending role and its pending bit leaves
# a ghost whose role claims no bit: the child drops that role at the fork,
# so a live waiter's bit (its role hidden by a handler) is never cleared
# for it. White-box: the ghost's role is set by hand.
rqspin_add_test(NAME rqspin_fork_stale_role SOURCES rqspin_fork_stale_role.c LIBS rqspin_static
  TIMEOUT 120 LABELS rqspin unit signal NO_TSAN NO_ASAN)
if(TARGET rqspin_fork_stale_role)
  target_include_directories(rqspin_fork_stale_role PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# The wait of a would-be pending waiter for a ghost repair in progress is
# bounded by the call's timeout (white-box: the repair flag held by hand).
rqspin_add_test(NAME rqspin_fork_gate_bound SOURCES rqspin_fork_gate_bound.c LIBS rqspin_static
  TIMEOUT 120 LABELS rqspin unit NO_TSAN NO_ASAN)
if(TARGET rqspin_fork_gate_bound)
  target_include_directories(rqspin_fork_gate_bound PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()

# Only cycle members fail: ABBA between two threads with eight lock-free
# bystanders queued on both locks; every bystander gets its lock, with no
# report hook and with a hook that sleeps 20 ms.
rqspin_add_test(NAME rqspin_bystander SOURCES rqspin_bystander.c
  TIMEOUT 180 LABELS rqspin unit)

# The timeout measures the owner's stall, not its preemption: waiters of an
# owner kept off its CPU by a SCHED_FIFO thread for 3T all get the lock
# (skipped without two CPUs or SCHED_FIFO); waiters of an owner asleep
# while holding still fail after T (pending) and 2T (head).
rqspin_add_test(NAME rqspin_preempt SOURCES rqspin_preempt.c
  TIMEOUT 120 LABELS rqspin unit)

# Huge per-call timeouts (UINT64_MAX, INT64_MAX, 2^62) saturate: every
# waiter (pending, head, queued) gets the lock after a 200 ms hold; the
# 4-slot build adds a slotless waiter on the no-node path.
rqspin_add_test(NAME rqspin_timeout_overflow SOURCES rqspin_timeout_overflow.c
  TIMEOUT 120 LABELS rqspin unit)
rqspin_add_test(NAME rqspin_timeout_overflow_nonode SOURCES rqspin_timeout_overflow.c
  LIBS rqspin_tiny TIMEOUT 120 LABELS rqspin unit)

# No registry slot leak when a per-thread timer's handler takes a lock
# during its thread's first registration: 4000 short-lived threads, then
# slots_in_use is back to its value before.
rqspin_add_test(NAME rqspin_slot_leak SOURCES rqspin_slot_leak.c
  TIMEOUT 120 LABELS rqspin stress signal NO_TSAN)

# Signal storm (AA handlers) with two CPU-bound background threads: preempted owners
# cause no -ETIMEDOUT (T = 10 ms), mutual exclusion exact.
rqspin_add_test(NAME rqspin_storm_load SOURCES rqspin_storm_load.c
  TIMEOUT 240 LABELS rqspin stress signal)

# Deadlock storm: per-thread ~1 kHz timers whose handlers take the other
# lock (ABBA with the interrupted code). Must finish (else "livelock"),
# every acquisition 0 or -EDEADLK, counters exact; prints the main loop's
# throughput with and without signals.
rqspin_add_test(NAME rqspin_deadlock_storm SOURCES rqspin_deadlock_storm.c
  TIMEOUT 200 LABELS rqspin stress signal)

# No false deadlocks: threads that hold no lock, hammering two locks next
# to threads that deadlock on them (ABBA), only ever get 0.
rqspin_add_test(NAME rqspin_nofalse_deadlock SOURCES rqspin_nofalse_deadlock.c
  TIMEOUT 240 LABELS rqspin stress)

# Interrupt anywhere: a handler that locks (the same lock, another, or a
# held one: a nested slow path) at
# every instruction of rqspin_lock's and rqspin_unlock's paths -- free,
# pending, queued, non-LIFO unlocks, timeout, AA -- through the ptrace
# stepper of the allocator's test (alloc_ptrace.h). White-box: the static
# library is linked in (its code is the executable's), and the thread's
# held table and nesting are checked after each run.
rqspin_add_test(NAME rqspin_interrupt SOURCES rqspin_interrupt.c LIBS rqspin_static
  TIMEOUT 600 LABELS rqspin signal NO_TSAN)
if(TARGET rqspin_interrupt)
  target_include_directories(rqspin_interrupt PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()
# The same with A and B process-shared (fast, non-LIFO, timeout and AA
# operations: that protocol has no pending bit and no queue).
rqspin_add_test(NAME rqspin_interrupt_pshared SOURCES rqspin_interrupt.c LIBS rqspin_static
  TIMEOUT 600 LABELS rqspin signal NO_TSAN)
if(TARGET rqspin_interrupt_pshared)
  target_include_directories(rqspin_interrupt_pshared PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(rqspin_interrupt_pshared PRIVATE RQSPIN_INTERRUPT_PSHARED=1)
endif()
# The same through the pthread_spin_* shim (its barging slow path),
# compiled into the test; AA returns EDEADLK and a timeout ETIMEDOUT (the
# policies' "error" settings) instead of waiting on as glibc would.
rqspin_add_test(NAME shim_interrupt
  SOURCES rqspin_interrupt.c ${PROJECT_SOURCE_DIR}/src/lock/pthread_shim.c LIBS rqspin_static
  TIMEOUT 600 LABELS rqspin signal NO_TSAN)
if(TARGET shim_interrupt)
  target_include_directories(shim_interrupt PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/src/arch/${RQSPIN_ARCH})
  # Without the shim's watch (pthread_shim.c): the helpers let go when a
  # waiter shows in the word, and under the stepper a watch would end only
  # at its wall-time bound, at every step. The watch's own loads and CAS
  # are checked by shim_watch_bound and shim_barging.
  target_compile_definitions(shim_interrupt PRIVATE RQSPIN_INTERRUPT_SHIM=1 SHIM_WATCH_NS=0)
  set_tests_properties(shim_interrupt PROPERTIES
    ENVIRONMENT "RQSPIN_PTHREAD_DEADLOCK=error;RQSPIN_PTHREAD_TIMEOUT=error")
endif()
