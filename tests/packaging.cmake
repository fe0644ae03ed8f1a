# Packaging checks: what a program that links or loads the installed
# library sees. Included by tests/CMakeLists.txt (rqspin_add_test).

# librqspin.a (the prelinked archive, rqspin_archive) defines no global
# symbol outside the public API...
add_test(NAME exported_symbols_static
  COMMAND ${CMAKE_COMMAND} -DSTATIC=$<TARGET_FILE:rqspin_archive> -DINC=${PROJECT_SOURCE_DIR}/include
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)
# ...because every internal symbol has the internal prefix, which the
# white-box archive (object files as compiled) shows.
add_test(NAME exported_symbols_whitebox
  COMMAND ${CMAKE_COMMAND} -DWHITEBOX=$<TARGET_FILE:rqspin_static> -DINC=${PROJECT_SOURCE_DIR}/include
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)
# ...so a program may have functions with the library's internal names.
rqspin_add_test(NAME pkg_static_clash SOURCES pkg_static/clash.c LIBS rqspin_archive
  TIMEOUT 60 LABELS packaging)
# It uses storage: under ThreadSanitizer, liburcu (not instrumented) needs
# the suppressions shipped with the library.
if(RQSPIN_SANITIZE STREQUAL "thread")
  set_tests_properties(pkg_static_clash PROPERTIES ENVIRONMENT
    "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/src/storage/tsan-liburcu.supp")
endif()

# Every public header compiles alone and defines RQSPIN_VERSION_MAJOR.
add_test(NAME pkg_headers_alone
  COMMAND ${CMAKE_COMMAND} -DCC=${CMAKE_C_COMPILER} -DINC=${PROJECT_SOURCE_DIR}/include
          -DOUT=${CMAKE_CURRENT_BINARY_DIR}/pkg_headers
          -P ${CMAKE_CURRENT_SOURCE_DIR}/pkg_headers/check_headers.cmake)
set_tests_properties(pkg_headers_alone PROPERTIES TIMEOUT 120 LABELS packaging)

# Versions: rqspin_version() matches the headers and project(VERSION)...
rqspin_add_test(NAME pkg_version SOURCES pkg_version/version.c TIMEOUT 60 LABELS packaging)
set_tests_properties(pkg_version PROPERTIES COMMAND "pkg_version;${PROJECT_VERSION}")
# ...and every symbol of librqspin.so is in the RQSPIN_<major> version node.
add_test(NAME symbol_versions
  COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:rqspin> -DSYMVER=RQSPIN_${PROJECT_VERSION_MAJOR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)

# Loading the library at run time into a process not linked with it: a C
# program (dlopen("librqspin.so.0")) and Python ctypes. Not in sanitizer
# builds (an instrumented library needs its runtime loaded first).
#
# Both work because every initial-exec TLS block of the library (and of
# liburcu-bp, whose reader record is a pointer) fits glibc's static TLS
# surplus: liburcu-memb's 128-byte-aligned record did not.
if(RQSPIN_SANITIZE STREQUAL "")
  add_executable(pkg_dlopen pkg_dlopen/dlopen.c)
  target_compile_definitions(pkg_dlopen PRIVATE _GNU_SOURCE)
  target_link_libraries(pkg_dlopen PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(pkg_dlopen rqspin)
  add_test(NAME pkg_dlopen_c COMMAND pkg_dlopen)
  find_program(RQSPIN_PYTHON3 python3)
  set(_pkg_dlopen_tests pkg_dlopen_c)
  if(RQSPIN_PYTHON3)
    add_test(NAME pkg_dlopen_ctypes
      COMMAND ${RQSPIN_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/pkg_dlopen/ctypes_load.py)
    list(APPEND _pkg_dlopen_tests pkg_dlopen_ctypes)
  endif()
  set_tests_properties(${_pkg_dlopen_tests} PROPERTIES TIMEOUT 60 LABELS packaging
    ENVIRONMENT "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:rqspin>")
endif()

# Man pages: each renders without warnings and every exported function has
# one (scripts/deps.sh installs man-db and groff-base).
find_program(RQSPIN_MAN man)
if(RQSPIN_MAN)
  add_test(NAME man_pages
    COMMAND ${CMAKE_COMMAND} -DMANDIR=${PROJECT_SOURCE_DIR}/man/man3 -DLIB=$<TARGET_FILE:rqspin>
            -P ${CMAKE_CURRENT_SOURCE_DIR}/pkg_man/check_man.cmake)
  set_tests_properties(man_pages PROPERTIES TIMEOUT 120 LABELS packaging
    ENVIRONMENT "MANPAGER=cat;LC_ALL=C.UTF-8;MANWIDTH=80")
endif()

# examples/ as its own CMake project against the installed package.
if(RQSPIN_SANITIZE STREQUAL "" AND RQSPIN_BUILD_EXAMPLES)
  add_test(NAME examples_installed
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pkg_examples/run.sh ${PROJECT_BINARY_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/examples_installed)
  set_tests_properties(examples_installed PROPERTIES TIMEOUT 300 LABELS packaging)
endif()

# The aarch64 toolchain file finds a Debian multiarch arm64 liburcu
# (configure only, against a placeholder tree; scripts/test.sh cross-builds
# against a real one when liburcu-dev:arm64 is installed).
find_program(RQSPIN_AARCH64_GCC aarch64-linux-gnu-gcc)
if(RQSPIN_SANITIZE STREQUAL "" AND RQSPIN_AARCH64_GCC AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME aarch64_multiarch_urcu
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pkg_aarch64/multiarch.sh ${PROJECT_SOURCE_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/aarch64_multiarch)
  set_tests_properties(aarch64_multiarch_urcu PROPERTIES TIMEOUT 120 LABELS packaging)
endif()

# With -DRQSPIN_BUILD_TSAN_VARIANT=ON: a ThreadSanitizer program linking the
# installed rqspin::rqspin_tsan runs the storage value-lock pattern without
# a report (against the release library ThreadSanitizer reports the
# library's copy under the value lock as a race).
if(RQSPIN_BUILD_TSAN_VARIANT)
  add_test(NAME tsan_variant_value_lock
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pkg_tsan/run.sh ${PROJECT_BINARY_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/tsan_variant)
  set_tests_properties(tsan_variant_value_lock PROPERTIES TIMEOUT 300 LABELS packaging)
endif()
