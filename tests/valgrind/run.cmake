cmake_minimum_required(VERSION 3.25)
# Runs vg_prog under one Valgrind tool and checks the verdict.
#   cmake -DVALGRIND=<valgrind> -DTOOL=helgrind|drd|memcheck -DPROG=<vg_prog>
#         -DMODE=correct|race|overflow -DEXPECT=clean|reported
#         [-DPATTERN=<regex>&&<regex>...: each must match the report] -P run.cmake
# clean: exit 0, no error at all (--error-exitcode turns any into 99) and
# the program's own checks passed. reported: the tool found an error
# (exit 99) and its report matches PATTERN (names the planted bug).
execute_process(
  COMMAND ${VALGRIND} --tool=${TOOL} --error-exitcode=99 ${PROG} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(EXPECT STREQUAL "clean")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TOOL} ${MODE}: exit ${rc}, expected no error")
  endif()
  if(NOT err MATCHES "ERROR SUMMARY: 0 errors" OR NOT out MATCHES "counters and checksums right")
    message(FATAL_ERROR "${TOOL} ${MODE}: errors or a failed check")
  endif()
elseif(EXPECT STREQUAL "reported")
  if(NOT rc EQUAL 99)
    message(FATAL_ERROR "${TOOL} ${MODE}: exit ${rc}, expected the tool's 99 (error found)")
  endif()
  string(REPLACE "&&" ";" patterns "${PATTERN}")
  foreach(p ${patterns})
    if(NOT err MATCHES "${p}")
      message(FATAL_ERROR "${TOOL} ${MODE}: the report does not match ${p}")
    endif()
  endforeach()
else()
  message(FATAL_ERROR "EXPECT must be clean or reported")
endif()
