# Valgrind tests (docs/valgrind.md). Included by tests/CMakeLists.txt.
# Only in a build without sanitizers, with the library's Valgrind support
# (RQSPIN_VALGRIND) and valgrind installed (scripts/deps.sh installs it).
# Each run is a few seconds: vg_prog does 300 iterations per thread.
find_program(RQSPIN_VALGRIND_EXE valgrind)
if(NOT RQSPIN_SANITIZE STREQUAL "" OR NOT RQSPIN_VALGRIND OR NOT RQSPIN_VALGRIND_EXE)
  return()
endif()

add_executable(vg_prog ${CMAKE_CURRENT_LIST_DIR}/vg_prog.c)
target_compile_definitions(vg_prog PRIVATE _GNU_SOURCE)
# The expected reports name vg_prog's functions and file: debug info and
# no inlining whatever the build type (a Release build reported "main (in
# vg_prog)" and failed).
target_compile_options(vg_prog PRIVATE -g -O1 -fno-inline)
target_link_libraries(vg_prog PRIVATE rqspin Threads::Threads)

# name, tool, mode, expectation, pattern of the expected report
function(rqspin_vg_test name tool mode expect pattern)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DVALGRIND=${RQSPIN_VALGRIND_EXE} -DTOOL=${tool}
            -DPROG=$<TARGET_FILE:vg_prog> -DMODE=${mode} -DEXPECT=${expect}
            -DPATTERN=${pattern} -P ${CMAKE_CURRENT_LIST_DIR}/run.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 180 LABELS valgrind)
endfunction()

# A correct 4-thread program (qspinlock, rqspinlock, allocator objects
# passed between threads): no report from any tool.
rqspin_vg_test(valgrind_helgrind_clean helgrind correct clean "")
rqspin_vg_test(valgrind_drd_clean drd correct clean "")
rqspin_vg_test(valgrind_memcheck_clean memcheck correct clean "")
# The same with a thread that updates a lock-protected counter without
# the lock: both race detectors report it, in that thread.
rqspin_vg_test(valgrind_helgrind_race helgrind race reported
  "Possible data race during write&&at 0x[0-9A-F]+: racer \\(vg_prog.c")
rqspin_vg_test(valgrind_drd_race drd race reported
  "Conflicting store by thread&&at 0x[0-9A-F]+: racer \\(vg_prog.c")
# One byte written past a 32-byte allocator object (natively the next
# object's first byte): memcheck reports it.
rqspin_vg_test(valgrind_memcheck_overflow memcheck overflow reported
  "Invalid write of size 1&&at 0x[0-9A-F]+: overflow \\(vg_prog.c&&is 0 bytes after a block of size 32 alloc'd")
