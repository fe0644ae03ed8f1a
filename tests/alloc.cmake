# Allocator tests. Included by tests/CMakeLists.txt, which defines
# rqspin_add_test(). Every test is bounded by iteration counts and scales
# them down under ThreadSanitizer (TU_ITERS in test_util.h).

# A debug flavour of the allocator alone: internal checks on (abort on bad
# pointers, canary checks on reuse) whatever the build type, plus test
# hooks that let a test raise a signal at chosen points inside it.
list(TRANSFORM RQSPIN_ALLOC_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/
  OUTPUT_VARIABLE rqspin_alloc_debug_sources)
# ...the Valgrind requests it makes (the library's, not the locks') and
# src/common (mmap wrappers, assertions).
list(TRANSFORM RQSPIN_VALGRIND_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/
  OUTPUT_VARIABLE _alloc_vg_sources)
list(TRANSFORM RQSPIN_COMMON_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/
  OUTPUT_VARIABLE _alloc_common_sources)
list(APPEND rqspin_alloc_debug_sources ${_alloc_vg_sources} ${_alloc_common_sources})
add_library(rqspin_alloc_debug STATIC ${rqspin_alloc_debug_sources})
rqspin_config(rqspin_alloc_debug RQSPIN_ALLOC_DEBUG=1 RQSPIN_ALLOC_TEST_HOOKS=1)
target_link_libraries(rqspin_alloc_debug PUBLIC Threads::Threads)

# The public header must be strict C11 (a build failure, not a test run).
add_library(alloc_header_c11 OBJECT alloc_header_c11.c)
target_include_directories(alloc_header_c11 PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(alloc_header_c11 PRIVATE -std=c11 -Wpedantic -Werror)

rqspin_add_test(NAME alloc_basic SOURCES alloc_basic.c
  TIMEOUT 300 LABELS alloc unit)
rqspin_add_test(NAME alloc_basic_debug SOURCES alloc_basic.c LIBS rqspin_alloc_debug
  TIMEOUT 300 LABELS alloc unit)

# Deterministic nesting through the debug flavour's test hooks.
rqspin_add_test(NAME alloc_nested SOURCES alloc_nested.c LIBS rqspin_alloc_debug
  TIMEOUT 120 LABELS alloc signal)

# Timer signals at random points, objects crossing contexts and threads.
rqspin_add_test(NAME alloc_signal SOURCES alloc_signal.c
  TIMEOUT 300 LABELS alloc signal stress)
rqspin_add_test(NAME alloc_signal_debug SOURCES alloc_signal.c LIBS rqspin_alloc_debug
  TIMEOUT 300 LABELS alloc signal stress)

# Thread churn, remote frees into exited threads' heaps, adoption, bounded
# memory across identical phases; producer/consumer.
rqspin_add_test(NAME alloc_threads SOURCES alloc_threads.c
  TIMEOUT 300 LABELS alloc stress)

# Bad pointers: the debug flavour aborts (children via fork), the library
# as built (release unless NDEBUG is off) ignores and counts. fork() is not
# used with threads in the parent, but a child starts one, which TSan does
# not support after fork.
rqspin_add_test(NAME alloc_badptr SOURCES alloc_badptr.c LIBS rqspin_alloc_debug
  TIMEOUT 120 LABELS alloc unit NO_TSAN)
if(TARGET alloc_badptr)
  target_compile_definitions(alloc_badptr PRIVATE ALLOC_TEST_DEBUG_LIB=1)
endif()
rqspin_add_test(NAME alloc_badptr_release SOURCES alloc_badptr.c
  TIMEOUT 120 LABELS alloc unit NO_TSAN)

# Out of memory under RLIMIT_AS, many failed requests, then everything
# freed: requests succeed again (failed mappings used up segment indices).
rqspin_add_test(NAME alloc_oom_recover SOURCES alloc_oom_recover.c
  TIMEOUT 120 LABELS alloc unit NO_TSAN NO_ASAN)

# ASan builds: use after free of our objects is reported.
if(RQSPIN_SANITIZE STREQUAL "address")
  rqspin_add_test(NAME alloc_asan SOURCES alloc_asan.c TIMEOUT 120 LABELS alloc asan)
endif()

# fork() while another thread owns a heap (TSan: no fork with threads).
rqspin_add_test(NAME alloc_fork SOURCES alloc_fork.c TIMEOUT 120 LABELS alloc unit NO_TSAN)

# Interrupt anywhere: a tracer learns each operation's instructions by
# single-stepping, then reruns it once per instruction and delivers there a
# signal whose handler allocates and frees (alloc_ptrace.h). The long run
# is `RQSPIN_INTERRUPT_LONG=1 tests/alloc_interrupt` (about 3x longer). Not
# under TSan (it runs handlers at its own points).
rqspin_add_test(NAME alloc_interrupt SOURCES alloc_interrupt.c LIBS rqspin_alloc_debug
  TIMEOUT 300 LABELS alloc signal NO_TSAN)
if(TARGET alloc_interrupt)
  target_include_directories(alloc_interrupt PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(alloc_interrupt PRIVATE RQSPIN_ALLOC_DEBUG=1 RQSPIN_ALLOC_TEST_HOOKS=1)
  set_tests_properties(alloc_interrupt PROPERTIES SKIP_RETURN_CODE 77)
endif()

# A page emptied by remote frees and then the owner's own frees leaves the
# heap at the owner's last free (deterministic, through the statistics).
rqspin_add_test(NAME alloc_page_empty SOURCES alloc_page_empty.c
  TIMEOUT 60 LABELS alloc unit)
rqspin_add_test(NAME alloc_page_empty_debug SOURCES alloc_page_empty.c LIBS rqspin_alloc_debug
  TIMEOUT 60 LABELS alloc unit)

# The pool of empty pages keeps up to 256 resident while pages keep being
# retired and gives the excess back after a second, or at a thread's exit
# (deterministic, through the statistics).
rqspin_add_test(NAME alloc_pool_decay SOURCES alloc_pool_decay.c
  TIMEOUT 60 LABELS alloc unit)

# A thread whose first call comes from its last key destructor round: its
# heap (never told of the exit) is found by the dead holder's thread id.
# Not under ThreadSanitizer: by the last round its runtime has torn the
# thread's state down, and the first instrumented atomic there crashes
# inside TSan (MetaMap::GetSync), 5/5.
rqspin_add_test(NAME alloc_exit_late SOURCES alloc_exit_late.c NO_TSAN
  TIMEOUT 60 LABELS alloc unit)

# Exited threads' memory goes back without a trim (remote frees into their
# abandoned heaps collect them). `alloc_exit_rss 10000 [--glibc]` prints
# the RSS figures.
rqspin_add_test(NAME alloc_exit_rss SOURCES alloc_exit_rss.c
  TIMEOUT 240 LABELS alloc stress NO_TSAN)

# The thread-exit key when the allocator's key would make
# pthread_setspecific allocate (many keys made before it): no malloc in a
# handler, dead threads' heaps still reused. Static debug flavour (its
# constructor runs after the test's early one); glibc only (it interposes
# malloc through glibc's __libc_malloc).
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT RQSPIN_SANITIZE)
  rqspin_add_test(NAME alloc_key SOURCES alloc_key.c LIBS rqspin_alloc_debug
    TIMEOUT 120 LABELS alloc unit)
endif()
