# SPIN model check of the lock slow path (see README.md beside this file).
# Meant to be included from tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/model/model.cmake)
# It builds nothing of the library, so it is registered only in the plain
# (non-sanitizer) build. run.sh exits 77 when spin is not installed, which
# CTest reports as skipped; scripts/deps.sh must install the `spin`
# package for it to run.
if(NOT RQSPIN_SANITIZE)
  add_test(NAME model_qspinlock
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh ${CMAKE_CURRENT_BINARY_DIR}/model)
  set_tests_properties(model_qspinlock PROPERTIES
    TIMEOUT 300 LABELS "model" SKIP_RETURN_CODE 77)
endif()
