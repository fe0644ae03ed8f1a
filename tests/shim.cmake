# The pthread_spin_* preload shim, the exported symbols, and a downstream
# project built against the installed tree. Sanitizer builds skip these:
# preloading into, or linking a plain program against, an instrumented
# library is not a supported configuration of the sanitizers.
if(NOT RQSPIN_SANITIZE STREQUAL "")
  return()
endif()

add_executable(shim_prog shim_prog.c)
target_compile_definitions(shim_prog PRIVATE _GNU_SOURCE)
target_link_libraries(shim_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME shim_without_preload COMMAND shim_prog)
add_test(NAME shim_with_preload COMMAND shim_prog)
set_tests_properties(shim_with_preload PROPERTIES
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:rqspin-pthread>;SHIM_EXPECTED=1")
set_tests_properties(shim_without_preload shim_with_preload PROPERTIES TIMEOUT 120)

add_test(NAME exported_symbols
  COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:rqspin> -DSHIM=$<TARGET_FILE:rqspin-pthread>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)

add_test(NAME downstream_install
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/downstream/run.sh ${PROJECT_BINARY_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/downstream)
set_tests_properties(downstream_install PROPERTIES TIMEOUT 300)
