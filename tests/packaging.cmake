# Packaging checks: what a program that links or loads the installed
# library sees. Included by tests/CMakeLists.txt (rqspin_add_test).

# librqspin.a (the prelinked archive, rqspin_archive) defines no global
# symbol outside the public API...
add_test(NAME exported_symbols_static
  COMMAND ${CMAKE_COMMAND} -DSTATIC=$<TARGET_FILE:rqspin_archive>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)
# ...so a program may have functions with the library's internal names.
rqspin_add_test(NAME pkg_static_clash SOURCES pkg_static/clash.c LIBS rqspin_archive
  TIMEOUT 60 LABELS packaging)

# Versions: rqspin_version() matches the headers and project(VERSION)...
rqspin_add_test(NAME pkg_version SOURCES pkg_version/version.c TIMEOUT 60 LABELS packaging)
set_tests_properties(pkg_version PROPERTIES COMMAND "pkg_version;${PROJECT_VERSION}")
# ...and every symbol of librqspin.so is in the RQSPIN_<major> version node.
add_test(NAME symbol_versions
  COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:rqspin> -DSYMVER=RQSPIN_${PROJECT_VERSION_MAJOR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)
