# CTest smoke tests of the harness: each subcommand in its quick mode, the
# JSON it writes, and clean failures on bad arguments. No performance
# threshold here: figures are the benchmarks' business, not the tests'.
if(NOT BUILD_TESTING)
  return()
endif()
set(_b $<TARGET_FILE:rqspin-bench>)
set(_out ${CMAKE_CURRENT_BINARY_DIR}/smoke)
file(MAKE_DIRECTORY ${_out})
set(_locks qspin,rqspin,pthread_spin,pthread_mutex,ttas,cas_floor)
if(RQSPIN_BENCH_HAVE_CK)
  string(APPEND _locks ",ck_mcs,ck_ticket,ck_clh")
endif()

add_test(NAME bench_lock_quick
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DOUT=${_out}/lock.json -DLOCKS=${_locks}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/smoke_lock.cmake)
add_test(NAME bench_torture_quick COMMAND ${_b} torture --quick --json ${_out}/torture.json)
add_test(NAME bench_deadlock_quick
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DOUT=${_out}/deadlock.json
          -P ${CMAKE_CURRENT_SOURCE_DIR}/smoke_deadlock.cmake)
add_test(NAME bench_alloc_quick COMMAND ${_b} alloc --quick)
add_test(NAME bench_storage_quick COMMAND ${_b} storage --quick --owners 1000 --reps 1)
add_test(NAME bench_bad_subcommand COMMAND ${_b} frobnicate)
add_test(NAME bench_bad_option COMMAND ${_b} lock --bogus)
add_test(NAME bench_bad_threads COMMAND ${_b} lock --threads 0)
set_tests_properties(bench_bad_subcommand bench_bad_option bench_bad_threads PROPERTIES
  WILL_FAIL TRUE)
add_test(NAME bench_bad_registered
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} "-DARGS=deadlock;--registered;8,lots"
          "-DMESSAGE=--registered: expected a number, got 'lots'"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/smoke_usage.cmake)
set_tests_properties(bench_lock_quick bench_torture_quick bench_deadlock_quick
  bench_alloc_quick bench_storage_quick PROPERTIES TIMEOUT 300 LABELS bench)
if(RQSPIN_SANITIZE STREQUAL "")
  # The harness must notice a lock that does not exclude (a deliberate race).
  # Four threads on two cores with a long critical section and no think time:
  # they overlap, or preempt one another inside it, in every run, also on a
  # loaded machine (two threads and a short section did not, under load).
  add_test(NAME bench_detects_broken_lock
    COMMAND ${_b} lock --locks none --threads 4 --cs 5000 --think 0 --quick)
  set_tests_properties(bench_detects_broken_lock PROPERTIES LABELS bench
    PASS_REGULAR_EXPRESSION "MUTUAL EXCLUSION BROKEN")
endif()
