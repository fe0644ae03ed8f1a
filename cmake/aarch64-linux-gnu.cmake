# Cross-compile for aarch64 with Debian's gcc-aarch64-linux-gnu (and
# libc6-dev-arm64-cross, which scripts/deps.sh installs).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# g++-aarch64-linux-gnu: the C++ header check. Naming it here also keeps
# check_language(CXX) from picking the build machine's c++.
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Where target libraries are found: the cross toolchain's own tree, and
# Debian multiarch. An arm64 package installed beside the build machine's
# (dpkg --add-architecture arm64; apt-get install liburcu-dev:arm64) puts
# its files in /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu;
# with the root "/" and the library architecture aarch64-linux-gnu,
# find_library and find_path look in exactly those multiarch directories
# (plus the architecture-neutral /usr/lib and /usr/include), never in the
# build machine's /usr/lib/x86_64-linux-gnu. RQSPIN_MULTIARCH_ROOT
# (environment or -D) names another directory holding such a tree, e.g.
# unpacked arm64 .deb files; default "/".
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
if(NOT DEFINED RQSPIN_MULTIARCH_ROOT)
  if(DEFINED ENV{RQSPIN_MULTIARCH_ROOT})
    set(RQSPIN_MULTIARCH_ROOT "$ENV{RQSPIN_MULTIARCH_ROOT}")
  else()
    set(RQSPIN_MULTIARCH_ROOT /)
  endif()
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu ${RQSPIN_MULTIARCH_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
