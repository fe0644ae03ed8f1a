# Runs as a CTest script: compile tests/tsan_counter_probe.c to assembly
# with -fsanitize=thread and require TSan's atomic add in it, and no addq.
# -DCC=<compiler> -DSRC=<probe.c> -DINC=<include dir> -DOUT=<file.s>
execute_process(
  COMMAND ${CC} -std=c11 -O2 -fsanitize=thread -I${INC} -S -o ${OUT} ${SRC}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tsan_counter: compiling the probe failed: ${err}")
endif()
file(READ ${OUT} asm)
if(asm MATCHES "addq[ \t]+\\$1")
  message(FATAL_ERROR "tsan_counter: the TSan build increments the counter with a plain addq")
endif()
if(NOT asm MATCHES "__tsan_atomic64_fetch_add")
  message(FATAL_ERROR "tsan_counter: no __tsan_atomic64_fetch_add in the TSan build's counter")
endif()
message(STATUS "tsan_counter: the TSan build's fast-path counter is an atomic TSan sees")
