# CTest smoke tests of the harness: each suite in its quick mode and the
# JSON it writes, `all` counting every suite's verdicts, the background
# load, and clean failures on bad arguments (exit status 2 and a message,
# before anything runs). No performance threshold here: figures are the
# benchmarks' business, not the tests'.
if(NOT BUILD_TESTING)
  return()
endif()
set(_b $<TARGET_FILE:rqspin-bench>)
set(_out ${CMAKE_CURRENT_BINARY_DIR}/smoke)
set(_src ${CMAKE_CURRENT_SOURCE_DIR})
file(MAKE_DIRECTORY ${_out})
set(_locks qspin,rqspin,pthread_spin,pthread_mutex,ttas,cas_floor)
if(RQSPIN_BENCH_HAVE_CK)
  string(APPEND _locks ",ck_mcs,ck_ticket,ck_clh")
endif()

add_test(NAME bench_lock_quick
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DOUT=${_out}/lock.json -DLOCKS=${_locks}
          -P ${_src}/smoke_lock.cmake)
add_test(NAME bench_deadlock_quick
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DOUT=${_out}/deadlock.json
          -P ${_src}/smoke_deadlock.cmake)

# Valid JSON, in the common frame, from every suite.
function(bench_json_test name suite)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DSUITE=${suite} -DOUT=${_out}/${name}.json
            "-DARGS=${ARGN}" -P ${_src}/smoke_json.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS bench)
endfunction()
# The load accounting counts the harness's own children as its own.
add_executable(bench_load_share_test load_share_test.c)
rqspin_bench_config(bench_load_share_test)
target_link_libraries(bench_load_share_test PRIVATE rqspin_bench_harness)
add_test(NAME bench_load_share COMMAND bench_load_share_test)
set_tests_properties(bench_load_share PROPERTIES TIMEOUT 60 LABELS bench SKIP_RETURN_CODE 77)
# The first estimate's load probe sees CPU-bound processes (a lower bound,
# so other tests running alongside cannot fail it).
add_executable(bench_load_probe_test load_probe_test.c)
rqspin_bench_config(bench_load_probe_test)
target_link_libraries(bench_load_probe_test PRIVATE rqspin_bench_harness)
add_test(NAME bench_load_probe COMMAND bench_load_probe_test)
set_tests_properties(bench_load_probe PROPERTIES TIMEOUT 60 LABELS bench SKIP_RETURN_CODE 77)

bench_json_test(bench_torture_quick torture torture --quick)
bench_json_test(bench_alloc_quick alloc alloc --quick --repeats 1)
bench_json_test(bench_storage_quick storage storage --quick --owners 1000 --reps 1 --mem-owners 2000)
bench_json_test(bench_shim_quick shim shim --quick --threads 2)
# --background-load: the hogs run and the JSON records them.
add_test(NAME bench_background_load
  COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} -DSUITE=lock -DOUT=${_out}/loaded.json -DLOAD=2
          "-DARGS=lock;--quick;--locks;qspin,rqspin;--threads;1,2;--background-load;2"
          -P ${_src}/smoke_json.cmake)

# Bad arguments, one per suite and one per kind of mistake: exit status 2
# and a message naming the problem.
function(bench_usage_test name message)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} "-DARGS=${ARGN}" "-DMESSAGE=${message}"
            -P ${_src}/smoke_usage.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 20 LABELS bench)
endfunction()
bench_usage_test(bench_bare "usage: rqspin-bench SUITE")
bench_usage_test(bench_bad_subcommand "unknown suite 'frobnicate'" frobnicate)
bench_usage_test(bench_bad_option "unknown option '--bogus'" lock --bogus)
bench_usage_test(bench_bad_threads "--threads: 0 is out of range" lock --threads 0)
bench_usage_test(bench_missing_value "option '--think' needs a value" lock --think)
bench_usage_test(bench_bad_load "--background-load: expected a number, got '-1'"
  lock --background-load -1)
bench_usage_test(bench_bad_json_path "--json: cannot write /nonexistent/x.json"
  lock --json /nonexistent/x.json)
bench_usage_test(bench_bad_plot_path "--plot: cannot write /nonexistent/x.png"
  deadlock --plot /nonexistent/x.png)
bench_usage_test(bench_bad_torture_mode "--mode: 'sideways' is not" torture --mode sideways)
bench_usage_test(bench_bad_registered "--registered: expected a number, got 'lots'"
  deadlock --registered 8,lots)
bench_usage_test(bench_bad_alloc_tests "--tests: unknown test 'foo'" alloc --tests foo)
bench_usage_test(bench_bad_alloc_repeats "--repeats: expected a number, got 'x'"
  alloc --repeats x)
bench_usage_test(bench_bad_storage_owners "--owners: expected a number, got '-1'"
  storage --owners -1)
bench_usage_test(bench_bad_storage_threads "--threads: 3 is out of range" storage --threads 3)
bench_usage_test(bench_bad_shim_repeats "--repeats: 99 is out of range" shim --repeats 99)
bench_usage_test(bench_bad_shim_worker "worker /nonexistent" shim --worker /nonexistent)
bench_usage_test(bench_bad_all_option "unknown option '--locks'" all --locks qspin)
bench_usage_test(bench_bad_all_only "--only: 'nope' is not a run of all" all --only nope)

set_tests_properties(bench_lock_quick bench_deadlock_quick bench_background_load
  PROPERTIES TIMEOUT 300 LABELS bench)
if(RQSPIN_SANITIZE STREQUAL "")
  # `all` counts the verdicts of the allocator and storage suites too.
  add_test(NAME bench_all_counts
    COMMAND ${CMAKE_COMMAND} -DBENCH=${_b} "-DARGS=--quick;--only;alloc,storage"
            "-DRUNS=alloc;storage" -P ${_src}/smoke_all.cmake)
  set_tests_properties(bench_all_counts PROPERTIES TIMEOUT 300 LABELS bench)
  # The harness must notice a lock that does not exclude (a deliberate race).
  # Four threads on two cores with a long critical section and no think time:
  # they overlap, or preempt one another inside it, in every run, also on a
  # loaded machine (two threads and a short section did not, under load).
  add_test(NAME bench_detects_broken_lock
    COMMAND ${_b} lock --locks none --threads 4 --cs 5000 --think 0 --quick)
  set_tests_properties(bench_detects_broken_lock PROPERTIES LABELS bench
    PASS_REGULAR_EXPRESSION "MUTUAL EXCLUSION BROKEN")
endif()
