# SPIN model check of the lock slow path (see README.md beside this file).
# Included from tests/CMakeLists.txt. It builds nothing of the library, so
# it is registered only in the plain (non-sanitizer) build: one CTest entry
# per configuration of configs.txt (model_<config>), and one per known-bad
# variant of mutants.txt (model_mutant_<NAME>), which SPIN must reject.
# The scripts exit 77 when spin is not installed, which CTest reports as
# skipped; scripts/deps.sh installs the `spin` package.
#
# Timeouts: the largest search (rqspin-fork-handler, 17.7 M states) took
# 204 s of pan time at a load average of 20 to 50 on two cores, and its
# test 518 s of wall time near 90; the limits leave room for such a machine.
if(NOT RQSPIN_SANITIZE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_LIST_DIR}/configs.txt ${CMAKE_CURRENT_LIST_DIR}/mutants.txt)
  file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/configs.txt _model_lines REGEX "^[a-z0-9-]+\\|")
  foreach(_line IN LISTS _model_lines)
    string(REGEX REPLACE "\\|.*" "" _name "${_line}")
    add_test(NAME model_${_name}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh ${CMAKE_CURRENT_BINARY_DIR}/model ${_name})
    set_tests_properties(model_${_name} PROPERTIES
      TIMEOUT 1200 LABELS "model" SKIP_RETURN_CODE 77)
  endforeach()
  # One entry per mutant, so that ctest -j spreads them over the cores.
  file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/mutants.txt _mutant_lines REGEX "^[A-Z0-9_]+\\|")
  foreach(_line IN LISTS _mutant_lines)
    string(REGEX REPLACE "\\|.*" "" _name "${_line}")
    add_test(NAME model_mutant_${_name}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/mutants.sh ${CMAKE_CURRENT_BINARY_DIR}/model-mutants ${_name})
    set_tests_properties(model_mutant_${_name} PROPERTIES
      TIMEOUT 1200 LABELS "model" SKIP_RETURN_CODE 77)
  endforeach()
endif()
