# cmake -DNM=<nm> -DLIB=<librqspin.so> -P aarch64_outline_atomics.cmake
# Passes when the library's read-modify-writes go through libgcc's
# outline-atomic helpers, which pick LSE or LL/SC at run time.
execute_process(COMMAND ${NM} ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "${NM} failed on ${LIB}")
endif()
if(NOT out MATCHES "__aarch64_have_lse_atomics")
  message(FATAL_ERROR "${LIB} has no outline-atomic helpers: its atomics are inlined "
                      "for one instruction family (built with -mno-outline-atomics or "
                      "-march=armv8.1-a?), so an LSE and an LL/SC run test the same code")
endif()
string(REGEX MATCHALL "__aarch64_(cas|swp|ldadd|ldclr|ldset|ldeor)[0-9]+_[a-z_]+" helpers "${out}")
list(REMOVE_DUPLICATES helpers)
list(LENGTH helpers n)
message(STATUS "${LIB}: ${n} outline-atomic helpers: ${helpers}")
