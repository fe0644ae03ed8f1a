cmake_minimum_required(VERSION 3.25)
# Each public header compiles alone, as strict C11, and brings in
# rqspin/version.h: a program that includes only, say, rqspin/qspinlock.h
# can still test RQSPIN_VERSION_MAJOR. The headers are listed when the test
# runs, so a new one is covered without editing this file.
#   cmake -DCC=<compiler> -DINC=<include dir> -DOUT=<scratch dir> -P check_headers.cmake
file(GLOB headers RELATIVE ${INC} ${INC}/rqspin/*.h ${INC}/rqspin/static/*.h)
if(NOT headers)
  message(FATAL_ERROR "no headers under ${INC}/rqspin")
endif()
file(MAKE_DIRECTORY ${OUT})
set(bad 0)
foreach(h ${headers})
  string(MAKE_C_IDENTIFIER ${h} id)
  set(src ${OUT}/${id}.c)
  file(WRITE ${src} "#include <${h}>\n"
    "#ifndef RQSPIN_VERSION_MAJOR\n"
    "#error \"${h} does not include rqspin/version.h\"\n"
    "#endif\n"
    "int ${id}_major = RQSPIN_VERSION_MAJOR;\n")
  execute_process(COMMAND ${CC} -std=c11 -Wpedantic -Werror -fsyntax-only -I${INC} ${src}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE err)
  if(rc)
    message(SEND_ERROR "${h}:\n${err}")
    math(EXPR bad "${bad} + 1")
  endif()
endforeach()
list(LENGTH headers n)
if(bad)
  message(FATAL_ERROR "${bad} of ${n} public headers fail")
endif()
message(STATUS "${n} public headers compile alone and define RQSPIN_VERSION_MAJOR")
