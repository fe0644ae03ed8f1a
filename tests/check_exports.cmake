cmake_minimum_required(VERSION 3.25)
# Only the public API (and the rqspin__ ABI its inline functions call) is
# exported from librqspin, the shared library (LIB) and the static one
# (STATIC: every global symbol defined in the archive, because a program
# linking it sees them all); only pthread_spin_* from the shim (SHIM).
# With SYMVER, every symbol LIB defines must carry that symbol version
# (cmake/rqspin.map). WHITEBOX is the archive of the library's object files
# as compiled (the white-box tests link it): its global symbols are the
# public ones and the internal ones, and every internal one carries the
# internal prefix rqs_ (docs/design.md, "Code conventions"), which is what
# lets the prelinked librqspin.a turn exactly those into local symbols.
# With INC (the include directory), an rqspin__ symbol must also be named
# in a public header: the inline-support ABI is what the inline functions
# call, nothing else. Each of LIB, STATIC, WHITEBOX, SHIM, SYMVER and INC
# is optional.
#
# check(<file> <allowed regex> <nm options...>)
function(check lib allowed)
  execute_process(COMMAND nm ${ARGN} ${lib} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "nm failed on ${lib}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(n 0)
  set(bad 0)
  foreach(line ${lines})
    # "<member>.o:" headers and blank lines of an archive listing.
    if(line MATCHES ":$" OR NOT line MATCHES "^[0-9a-f]* +[A-Za-z] +")
      continue()
    endif()
    # Version node definitions (cmake/rqspin.map) are absolute symbols.
    if(line MATCHES "^0* +A +RQSPIN_[0-9.]+$")
      continue()
    endif()
    string(REGEX REPLACE "^[0-9a-f]* +[A-Za-z] +" "" sym "${line}")
    string(REGEX REPLACE "@.*" "" sym "${sym}")
    if(NOT sym MATCHES "${allowed}")
      message(SEND_ERROR "${lib}: unexpected global ${sym}")
      math(EXPR bad "${bad} + 1")
    elseif(abi AND sym MATCHES "^rqspin__" AND NOT sym IN_LIST abi)
      message(SEND_ERROR "${lib}: ${sym} is not declared in a public header (rqspin__ ABI)")
      math(EXPR bad "${bad} + 1")
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
  if(n EQUAL 0)
    message(FATAL_ERROR "${lib}: no exports found")
  endif()
  if(bad)
    message(FATAL_ERROR "${lib}: ${bad} of ${n} global symbols are not public")
  endif()
  message(STATUS "${lib}: ${n} exports, all public")
endfunction()

set(public "^(q?rqspin_|qspin_|rqspin__)")
# The rqspin__ names the public headers mention.
set(abi "")
if(INC)
  file(GLOB_RECURSE _headers ${INC}/rqspin/*.h)
  foreach(h ${_headers})
    file(STRINGS ${h} _lines REGEX "rqspin__[a-z0-9_]+")
    string(REGEX MATCHALL "rqspin__[a-z0-9_]+" _names "${_lines}")
    list(APPEND abi ${_names})
  endforeach()
  # ...and the ones that librqspin-pthread.so, built from this tree, calls
  # (src/lock/barging.h).
  list(APPEND abi rqspin__lock_slowpath_barging rqspin__owner_dead_taken)
  list(REMOVE_DUPLICATES abi)
endif()
if(LIB)
  check(${LIB} "${public}" -D --defined-only)
endif()
if(STATIC)
  check(${STATIC} "${public}" -g --defined-only)
endif()
if(WHITEBOX)
  # AddressSanitizer adds an ODR indicator (__odr_asan.<name>) per global
  # variable; an internal variable's is internal too.
  check(${WHITEBOX} "^(q?rqspin_|qspin_|rqspin__|rqs_|__odr_asan[.]rqs_)" -g --defined-only)
endif()
if(SHIM)
  check(${SHIM} "^pthread_spin_(init|destroy|lock|trylock|unlock)$" -D --defined-only)
endif()

if(LIB AND SYMVER)
  execute_process(COMMAND objdump -T ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "objdump failed on ${LIB}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(n 0)
  foreach(line ${lines})
    # "<addr> <flags> <section> <size> <version> <name>", defined global
    # ones only: the aarch64 linker also puts local section symbols (.init,
    # .data; flags "l    d") in the dynamic table, which nothing imports.
    if(NOT line MATCHES "^[0-9a-f]+ " OR line MATCHES "\\*UND\\*" OR line MATCHES "^[0-9a-f]+ l ")
      continue()
    endif()
    string(REGEX MATCH "([^ ]+) +([^ ]+)$" _m "${line}")
    if(NOT CMAKE_MATCH_1 STREQUAL SYMVER)
      message(SEND_ERROR "${LIB}: ${CMAKE_MATCH_2} has version '${CMAKE_MATCH_1}', not ${SYMVER}")
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
  if(n EQUAL 0)
    message(FATAL_ERROR "${LIB}: no versioned symbols found")
  endif()
  message(STATUS "${LIB}: ${n} symbols, all at version ${SYMVER}")
endif()
