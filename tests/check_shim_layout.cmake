cmake_minimum_required(VERSION 3.25)
# cmake -DNM=<nm> -DSHIM=<librqspin-pthread.so> -P check_shim_layout.cmake
# The shim's per-call entry points (lock, trylock, unlock) each start a
# 64-byte line: an unlock that straddled two lines cost the uncontended
# pair a cycle (src/lock/pthread_shim.c, SHIM_HOT). The linker decides
# where a function lands, so this checks the built library, not the source.
execute_process(COMMAND ${NM} -D --defined-only ${SHIM} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "${NM} failed on ${SHIM}")
endif()
foreach(fn pthread_spin_lock pthread_spin_trylock pthread_spin_unlock)
  string(REGEX MATCH "([0-9a-f]+) T ${fn}\n" m "${out}")
  if(NOT m)
    message(FATAL_ERROR "${SHIM}: ${fn} not found")
  endif()
  set(addr "${CMAKE_MATCH_1}")
  math(EXPR low "0x${addr} % 64")
  if(NOT low EQUAL 0)
    message(SEND_ERROR "${SHIM}: ${fn} at 0x${addr} is not 64-byte aligned")
  else()
    message(STATUS "${fn} at 0x${addr}")
  endif()
endforeach()
