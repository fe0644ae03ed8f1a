# aarch64 only. Included by tests/CMakeLists.txt (rqspin_add_test).
# scripts/test-aarch64.sh runs one build on an LSE core and on an LL/SC
# core; these two tests check that the CPU really decides which atomic
# instructions the library executes.

# The run's CPU: HWCAP_ATOMICS as the run expects (RQSPIN_TEST_EXPECT_LSE),
# an LSE instruction executes exactly when advertised, and libgcc's
# outline-atomic helpers follow it.
rqspin_add_test(NAME aarch64_atomics SOURCES aarch64_atomics.c
  TIMEOUT 60 LABELS unit)

# The library itself goes through those helpers (built with GCC's
# -moutline-atomics, Debian's default for armv8-a), not through inlined
# LL/SC loops that an LSE core would never replace.
add_test(NAME aarch64_outline_atomics
  COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIB=$<TARGET_FILE:rqspin>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/aarch64_outline_atomics.cmake)
set_tests_properties(aarch64_outline_atomics PROPERTIES TIMEOUT 60 LABELS unit)
