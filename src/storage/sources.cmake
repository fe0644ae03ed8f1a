# Object-local storage: its sources and what librqspin must link.
# Included by the top-level CMakeLists.txt, which links ${RQSPIN_STORAGE_LIBS}
# to rqspin and rqspin_static. The shared library needs it only PRIVATE (no
# liburcu type or call is visible in include/rqspin/storage.h); the static
# library must pass it on (PUBLIC/INTERFACE) to whoever links it.
#
# liburcu (bp flavour: threads register themselves, so a program may use
# liburcu too, any flavour, in any order; see src/storage/rcu.c) comes from
# pkg-config. A cross build whose sysroot
# has no liburcu (scripts/test.sh's aarch64 check: only gcc-aarch64-linux-gnu
# is installed) compiles against the build machine's urcu/ headers, which
# are architecture-neutral apart from the <urcu/arch/*> parts chosen by the
# compiler's own macros, and does not link liburcu: the library builds (that
# is what the check is for) but a program must then add -lurcu-bp
# -lurcu-common itself. Install liburcu-dev for the target for a real one.

set(RQSPIN_STORAGE_SOURCES
  src/storage/rcu.c
  src/storage/table.c
  src/storage/unlink.c
  src/storage/ops.c
  src/storage/get_symbol.c
  src/storage/map.c)

if(NOT CMAKE_CROSSCOMPILING)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(RQSPIN_URCU_BP REQUIRED liburcu-bp)
  # Debian keeps the headers in a multiarch directory that is on the
  # default search path (SYSTEM: then -isystem changes nothing there).
  include_directories(SYSTEM ${RQSPIN_URCU_BP_INCLUDE_DIRS})
  # Full paths (liburcu-bp.so, liburcu-common.so): the exported targets
  # carry them too.
  set(RQSPIN_STORAGE_LIBS ${RQSPIN_URCU_BP_LINK_LIBRARIES})
else()
  find_path(RQSPIN_URCU_INCLUDE_DIR urcu/urcu-bp.h)
  find_library(RQSPIN_URCU_BP_LIBRARY urcu-bp)
  find_library(RQSPIN_URCU_COMMON_LIBRARY urcu-common)
  if(RQSPIN_URCU_INCLUDE_DIR AND RQSPIN_URCU_BP_LIBRARY AND RQSPIN_URCU_COMMON_LIBRARY)
    include_directories(SYSTEM ${RQSPIN_URCU_INCLUDE_DIR})
    set(RQSPIN_STORAGE_LIBS ${RQSPIN_URCU_BP_LIBRARY} ${RQSPIN_URCU_COMMON_LIBRARY})
  else()
    set(_rqspin_host_urcu "")
    foreach(d /usr/include/${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu/urcu /usr/include/urcu
              /usr/local/include/urcu)
      if(NOT _rqspin_host_urcu AND EXISTS ${d}/urcu-bp.h)
        set(_rqspin_host_urcu ${d})
      endif()
    endforeach()
    if(NOT _rqspin_host_urcu)
      message(FATAL_ERROR "storage: liburcu headers not found (Debian: liburcu-dev)")
    endif()
    # Only the urcu/ directory, not the host's whole multiarch include dir
    # (its libc headers would shadow the target's).
    set(_rqspin_urcu_inc ${CMAKE_BINARY_DIR}/rqspin-host-urcu)
    file(MAKE_DIRECTORY ${_rqspin_urcu_inc})
    file(CREATE_LINK ${_rqspin_host_urcu} ${_rqspin_urcu_inc}/urcu SYMBOLIC)
    include_directories(SYSTEM ${_rqspin_urcu_inc})
    set(RQSPIN_STORAGE_LIBS "")
    message(STATUS "storage: no liburcu for ${CMAKE_SYSTEM_PROCESSOR}; compiling against "
                   "${_rqspin_host_urcu}, not linking liburcu (programs add -lurcu-bp "
                   "-lurcu-common)")
  endif()
endif()

# UndefinedBehaviorSanitizer: liburcu-bp declares its reader record 128-byte
# aligned but hands out records from an arena at smaller alignments, and its
# inline read-side code (compiled into these files) touches them: the
# alignment check would flag liburcu's layout, not ours. Everything else of
# -fsanitize=undefined stays on.
if(RQSPIN_SANITIZE STREQUAL "undefined")
  list(TRANSFORM RQSPIN_STORAGE_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/
    OUTPUT_VARIABLE _rqspin_storage_abs)
  set_source_files_properties(${RQSPIN_STORAGE_SOURCES} ${_rqspin_storage_abs}
    PROPERTIES COMPILE_OPTIONS -fno-sanitize=alignment)
endif()
