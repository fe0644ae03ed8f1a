cmake_minimum_required(VERSION 3.25)
# Run BENCH with ARGS (a ;-list) and expect exit status 2 (bad arguments)
# and a message on stderr matching MESSAGE.
execute_process(COMMAND ${BENCH} ${ARGS} RESULT_VARIABLE rc ERROR_VARIABLE err
  OUTPUT_QUIET)
list(JOIN ARGS " " shown)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "rqspin-bench ${shown}: exit status ${rc}, expected 2\n${err}")
endif()
if(NOT err MATCHES "${MESSAGE}")
  message(FATAL_ERROR "rqspin-bench ${shown}: stderr does not say '${MESSAGE}':\n${err}")
endif()
message(STATUS "rqspin-bench ${shown}: exit 2, ${err}")
