# Process-shared rqspinlocks through the library's API (what the shim's
# PTHREAD_PROCESS_SHARED builds on), in every build flavour.
rqspin_add_test(NAME shim_pshared_api SOURCES shim_pshared_api.c
  TIMEOUT 90 LABELS rqspin unit)

# Tests of the shim's own code linked into the test program (so that the
# sanitizer builds check it too): its pthread_spin_* are the program's.
function(rqspin_add_shim_source_test name timeout label)
  rqspin_add_test(NAME ${name} SOURCES ${name}.c ${PROJECT_SOURCE_DIR}/src/lock/pthread_shim.c
    TIMEOUT ${timeout} LABELS rqspin ${label})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/src/arch/${RQSPIN_ARCH})
endfunction()

# Mutual exclusion under barging, the hand-off asked for.
rqspin_add_shim_source_test(shim_barging 120 stress)
# The barging bound: the pending waiter asks for the hand-off on time and
# spins for the lock once it has asked.
rqspin_add_shim_source_test(shim_handoff_bound 120 stress)
# The turn bound: a barger goes to the back of a queue whose head is off
# the CPU once its turn is over.
rqspin_add_shim_source_test(shim_turn_bound 120 stress)
# The watch: glibc-like spinning first, bounded; none while holding
# another lock.
rqspin_add_shim_source_test(shim_watch_bound 300 unit)
# The watch's deference: a holder that keeps re-taking the lock keeps a
# watcher off for the watch's bound at most.
rqspin_add_shim_source_test(shim_defer_bound 180 unit)

# The pthread_spin_* preload shim, the exported symbols, and a downstream
# project built against the installed tree. Sanitizer builds skip these:
# preloading into, or linking a plain program against, an instrumented
# library is not a supported configuration of the sanitizers.
if(NOT RQSPIN_SANITIZE STREQUAL "")
  return()
endif()

add_executable(shim_prog shim_prog.c)
target_compile_definitions(shim_prog PRIVATE _GNU_SOURCE)
target_link_libraries(shim_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME shim_without_preload COMMAND shim_prog)
add_test(NAME shim_with_preload COMMAND shim_prog)
set_tests_properties(shim_with_preload PROPERTIES
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:rqspin-pthread>;SHIM_EXPECTED=1;RQSPIN_PTHREAD_DEADLOCK=error")
set_tests_properties(shim_without_preload shim_with_preload PROPERTIES TIMEOUT 120)

add_test(NAME exported_symbols
  COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:rqspin> -DSHIM=$<TARGET_FILE:rqspin-pthread>
          -DINC=${PROJECT_SOURCE_DIR}/include
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)

add_test(NAME shim_entry_alignment
  COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DSHIM=$<TARGET_FILE:rqspin-pthread>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_shim_layout.cmake)

add_test(NAME downstream_install
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/downstream/run.sh ${PROJECT_BINARY_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/downstream)
set_tests_properties(downstream_install PROPERTIES TIMEOUT 300)

# pthread_spin_* conformance under the shim (tests/shim_conform.c says what
# each mode checks). shim_cross_unlock runs under =error so that a false
# deadlock shows as EDEADLK.
add_executable(shim_conform shim_conform.c)
target_compile_definitions(shim_conform PRIVATE _GNU_SOURCE)
target_link_libraries(shim_conform PRIVATE Threads::Threads)
set(shim_preload "LD_PRELOAD=$<TARGET_FILE:rqspin-pthread>")
foreach(mode posix fork private-in-shared killed pshared-stall relock-wait abba-wait relock-error relock-abort cross-unlock pshared-cross-unlock handler-own-wait handler-own-wait-nested handler-queued-other handoff exit-holding)
  string(REPLACE "-" "_" name "shim_${mode}")
  if(mode STREQUAL "cross-unlock")
    set(name shim_cross_unlock)
  endif()
  add_test(NAME ${name} COMMAND shim_conform ${mode})
  set_tests_properties(${name} PROPERTIES TIMEOUT 90 ENVIRONMENT "${shim_preload}")
endforeach()
set_tests_properties(shim_relock_error shim_cross_unlock shim_pshared_cross_unlock shim_exit_holding PROPERTIES
  ENVIRONMENT "${shim_preload};RQSPIN_PTHREAD_DEADLOCK=error")
# A 5 s timeout: the waits of this test (300 ms and more) must not show
# as timeouts, only the handler's refused try could be reported.
set_tests_properties(shim_handler_queued_other PROPERTIES
  ENVIRONMENT "${shim_preload};RQSPIN_PTHREAD_DEADLOCK=error;RQSPIN_TIMEOUT_MS=5000")
set_tests_properties(shim_pshared_stall PROPERTIES
  ENVIRONMENT "${shim_preload};RQSPIN_TIMEOUT_MS=50")
set_tests_properties(shim_relock_abort PROPERTIES
  ENVIRONMENT "${shim_preload};RQSPIN_PTHREAD_DEADLOCK=abort")

# The shim with a 60 s watch whose entry is marked only after 60 s: a
# handler's lock call lands in the watch's unmarked stretch on any machine
# (the real one marks after 20 us), where it used to report a false AA.
add_library(rqspin-pthread-longwatch SHARED ${PROJECT_SOURCE_DIR}/src/lock/pthread_shim.c)
target_compile_definitions(rqspin-pthread-longwatch PRIVATE _GNU_SOURCE
  SHIM_WATCH_NS=60000000000ull WATCH_MARK_NS=60000000000ull)
target_include_directories(rqspin-pthread-longwatch PRIVATE ${PROJECT_SOURCE_DIR}/src
  ${PROJECT_SOURCE_DIR}/src/arch/${RQSPIN_ARCH})
target_link_libraries(rqspin-pthread-longwatch PRIVATE rqspin)
set_target_properties(rqspin-pthread-longwatch PROPERTIES C_VISIBILITY_PRESET hidden)
add_test(NAME shim_handler_watch_wait COMMAND shim_conform handler-watch-wait)
set_tests_properties(shim_handler_watch_wait PROPERTIES TIMEOUT 90
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:rqspin-pthread-longwatch>")

# A packaged program (stress-ng, installed by scripts/deps.sh) under the
# shim; skipped when it is not installed.
add_test(NAME shim_stress_ng COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/shim_stress_ng.sh
         $<TARGET_FILE:rqspin-pthread>)
set_tests_properties(shim_stress_ng PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
