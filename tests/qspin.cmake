# qspinlock tests ("Lock core"). Included by tests/CMakeLists.txt, which
# defines rqspin_add_test(). Every test is bounded by iteration counts and
# scales them down under ThreadSanitizer (see TU_ITERS in test_util.h).

rqspin_add_test(NAME qspin_trylock SOURCES qspin_trylock.c
  TIMEOUT 120 LABELS qspin unit)

# Unlock by another thread (allowed for qspinlock), also under TSan.
rqspin_add_test(NAME qspin_cross_unlock SOURCES qspin_cross_unlock.c
  TIMEOUT 120 LABELS qspin unit)

rqspin_add_test(NAME qspin_mutex SOURCES qspin_mutex.c
  TIMEOUT 300 LABELS qspin stress)

# fork() from a multithreaded process whose child then creates threads:
# ThreadSanitizer does not support that (its runtime aborts the child,
# die_after_fork), so this test only runs in non-TSan builds; nor under
# ASan, whose allocator lock another thread may hold at the fork.
rqspin_add_test(NAME qspin_fork SOURCES qspin_fork.c
  TIMEOUT 300 LABELS qspin stress NO_TSAN NO_ASAN)

rqspin_add_test(NAME qspin_signal_nesting SOURCES qspin_signal_nesting.c
  TIMEOUT 300 LABELS qspin signal)

rqspin_add_test(NAME qspin_churn SOURCES qspin_churn.c
  TIMEOUT 300 LABELS qspin stress)

# The test-only flavour with RQSPIN_SLOT_LIMIT=4: most threads run without
# a registry slot (the no-node path).
rqspin_add_test(NAME qspin_nonode SOURCES qspin_nonode.c LIBS rqspin_tiny
  TIMEOUT 300 LABELS qspin stress)

rqspin_add_test(NAME qspin_stats SOURCES qspin_stats.c
  TIMEOUT 120 LABELS qspin unit)

# Under TSan: data protected by a qspinlock must not be reported as a race.
# (In other builds it just runs the protected workload.)
rqspin_add_test(NAME qspin_tsan_race SOURCES qspin_tsan_race.c
  TIMEOUT 300 LABELS qspin tsan)

# Under TSan only: a deliberate race outside the lock MUST be reported, or the
# lock annotations would be hiding real races. halt_on_error makes TSan exit
# non-zero at the first report.
#  - qspin_tsan_detect: WILL_FAIL, passes when the program exits non-zero;
#  - qspin_tsan_detect_report: the same program, passes only when TSan's
#    data-race report is in the output (a crash for another reason fails).
if(RQSPIN_SANITIZE STREQUAL "thread")
  rqspin_add_test(NAME qspin_tsan_detect SOURCES qspin_tsan_detect.c
    TIMEOUT 120 LABELS qspin tsan)
  set_tests_properties(qspin_tsan_detect PROPERTIES WILL_FAIL TRUE
    ENVIRONMENT "TSAN_OPTIONS=halt_on_error=1")
  add_test(NAME qspin_tsan_detect_report COMMAND qspin_tsan_detect)
  set_tests_properties(qspin_tsan_detect_report PROPERTIES TIMEOUT 120
    LABELS "qspin;tsan"
    ENVIRONMENT "TSAN_OPTIONS=halt_on_error=1"
    PASS_REGULAR_EXPRESSION "WARNING: ThreadSanitizer: data race")
endif()
