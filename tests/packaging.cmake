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
