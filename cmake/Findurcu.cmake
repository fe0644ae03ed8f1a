# Findurcu: liburcu's bp flavour, which librqspin's object-local storage
# runs on, as imported targets (no absolute paths end up in an export):
#   urcu::bp    liburcu-bp (links urcu::common)
#   urcu::common  liburcu-common
# Sets urcu_FOUND and urcu_VERSION (from pkg-config, when it knows one).
# Used by librqspin's build and shipped with its CMake package, whose
# rqspinConfig.cmake calls find_dependency(urcu) with this module.
if(TARGET urcu::bp)
  set(urcu_FOUND TRUE)
  return()
endif()

# pkg-config only hints where to look, and only for the build machine.
if(NOT CMAKE_CROSSCOMPILING)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PC_URCU_BP QUIET liburcu-bp)
  endif()
endif()
find_path(URCU_INCLUDE_DIR urcu/urcu-bp.h HINTS ${PC_URCU_BP_INCLUDE_DIRS})
find_library(URCU_BP_LIBRARY urcu-bp HINTS ${PC_URCU_BP_LIBRARY_DIRS})
find_library(URCU_COMMON_LIBRARY urcu-common HINTS ${PC_URCU_BP_LIBRARY_DIRS})
mark_as_advanced(URCU_INCLUDE_DIR URCU_BP_LIBRARY URCU_COMMON_LIBRARY)
if(PC_URCU_BP_VERSION)
  set(urcu_VERSION ${PC_URCU_BP_VERSION})
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(urcu
  REQUIRED_VARS URCU_BP_LIBRARY URCU_COMMON_LIBRARY URCU_INCLUDE_DIR
  VERSION_VAR urcu_VERSION)

if(urcu_FOUND)
  if(NOT TARGET urcu::common)
    add_library(urcu::common UNKNOWN IMPORTED)
    set_target_properties(urcu::common PROPERTIES IMPORTED_LOCATION "${URCU_COMMON_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${URCU_INCLUDE_DIR}")
  endif()
  add_library(urcu::bp UNKNOWN IMPORTED)
  set_target_properties(urcu::bp PROPERTIES IMPORTED_LOCATION "${URCU_BP_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${URCU_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES urcu::common)
endif()
