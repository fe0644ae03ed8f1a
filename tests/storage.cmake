# Object-local storage tests. Included by tests/CMakeLists.txt,
# which defines rqspin_add_test(). Every test is bounded by iteration counts
# (scaled down under ThreadSanitizer, TU_ITERS) and ends with the leak
# check: once every owner and map is destroyed, the allocator's live bytes
# are back where they started.

# Reference model: random operation sequences, more maps than cache slots,
# several value sizes, both allocators, iteration, error codes.
rqspin_add_test(NAME storage_model SOURCES storage_model.c
  TIMEOUT 300 LABELS storage unit)

# Threads sharing maps, with their own owners (exact model) and shared
# owners (concurrent create/update/delete/copy/iterate, torn-value checks).
rqspin_add_test(NAME storage_threads SOURCES storage_threads.c
  TIMEOUT 300 LABELS storage stress)

# Lock-free gets (no read-side section: the inline probe and the library's)
# racing index growth and backward-shift deletes on the same owners; a
# signal handler getting values in the middle of the writer's changes.
# White-box (static library, src/storage): it also checks each probe itself.
rqspin_add_test(NAME storage_index_race SOURCES storage_index_race.c LIBS rqspin_static
  TIMEOUT 300 LABELS storage stress signal)
target_include_directories(storage_index_race PRIVATE ${PROJECT_SOURCE_DIR}/src)

# White-box, deterministic: an index shrinks as values are deleted, given-up
# tables go to the pool and are reused, and a reader holding a given-up
# table's address never takes another owner's value from it (owner stamp).
rqspin_add_test(NAME storage_index_shrink SOURCES storage_index_shrink.c LIBS rqspin_static
  TIMEOUT 60 LABELS storage unit)
target_include_directories(storage_index_shrink PRIVATE ${PROJECT_SOURCE_DIR}/src)

# Owner destruction racing map destruction (and updates of other owners
# whose storages the map destruction is unlinking from); leak check per round.
rqspin_add_test(NAME storage_destroy_race SOURCES storage_destroy_race.c
  TIMEOUT 600 LABELS storage stress)

# Signal handlers (per-thread CPU-time timers, SIGEV_THREAD_ID) doing gets,
# creates, deletes, updates and owner destructions at random points of the
# same operations on the same owners; lazy registration from a handler.
rqspin_add_test(NAME storage_signal SOURCES storage_signal.c
  TIMEOUT 300 LABELS storage signal)

# White-box: the no-fail hand-offs made deterministic by holding the
# library's locks by hand (the state a signal handler finds). Links the
# static library, whose hidden symbols it calls, and reads src/storage.
rqspin_add_test(NAME storage_handoff SOURCES storage_handoff.c LIBS rqspin_static
  TIMEOUT 120 LABELS storage unit)
target_include_directories(storage_handoff PRIVATE ${PROJECT_SOURCE_DIR}/src)

# White-box: a destroyed owner's element left on a bucket list (the bucket
# lock was held by the code a handler interrupted) is never taken for the
# value of a live owner whose storage got the freed address, and is
# reclaimed by the bucket's next holder, not at map_destroy.
rqspin_add_test(NAME storage_leftover SOURCES storage_leftover.c LIBS rqspin_static
  TIMEOUT 120 LABELS storage unit)
target_include_directories(storage_leftover PRIVATE ${PROJECT_SOURCE_DIR}/src)

# White-box: map_destroy unlinking an owner's first value between its link
# into the bucket and its insertion into the storage leaves the value's map
# field NULL (it names no later map at the same address). ops.c compiled
# once more with a test hook at that point; the test links that object
# ahead of the static library, whose own ops.o the linker then leaves out.
# A library source compiled once more with RQSPIN_STORAGE_TEST_HOOKS, as an
# object library named storage_<name>_hooks.
function(rqspin_storage_hooked name)
  add_library(storage_${name}_hooks OBJECT ${PROJECT_SOURCE_DIR}/src/storage/${name}.c)
  rqspin_config(storage_${name}_hooks RQSPIN_STORAGE_TEST_HOOKS=1)
  target_link_libraries(storage_${name}_hooks PRIVATE ${RQSPIN_STORAGE_LIBS})
  if(RQSPIN_SANITIZE STREQUAL "undefined")
    # As for the library's storage sources (src/storage/sources.cmake):
    # liburcu's inline reader code, not ours, breaks the alignment check.
    target_compile_options(storage_${name}_hooks PRIVATE -fno-sanitize=alignment)
  endif()
endfunction()
rqspin_storage_hooked(ops)
rqspin_add_test(NAME storage_link_destroy
  SOURCES storage_link_destroy.c $<TARGET_OBJECTS:storage_ops_hooks> LIBS rqspin_static
  TIMEOUT 120 LABELS storage unit)
target_include_directories(storage_link_destroy PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(storage_link_destroy PRIVATE RQSPIN_STORAGE_TEST_HOOKS=1)

# White-box: a signal handler that interrupted the index-table pool (its
# lock held by the interrupted code, a shrink) grows and shrinks other
# owners' indexes: growth takes a new table, the shrink is skipped, nothing
# waits. table.c compiled once more with the pool's test hook.
rqspin_storage_hooked(table)
rqspin_add_test(NAME storage_pool_handler
  SOURCES storage_pool_handler.c $<TARGET_OBJECTS:storage_ops_hooks>
    $<TARGET_OBJECTS:storage_table_hooks> LIBS rqspin_static
  TIMEOUT 120 LABELS storage signal unit)
target_include_directories(storage_pool_handler PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(storage_pool_handler PRIVATE RQSPIN_STORAGE_TEST_HOOKS=1)

# owner_destroy ends the owner: creations racing it on another thread, or
# interrupted by the handler that destroys it, leave nothing behind, and
# later ones give -EIDRM.
rqspin_add_test(NAME storage_owner_end SOURCES storage_owner_end.c
  TIMEOUT 120 LABELS storage signal)

# map_destroy: a racing creation is refused (dying flag) instead of linking
# into a swept bucket; create/destroy cycles do not wait for grace periods.
rqspin_add_test(NAME storage_map_dying SOURCES storage_map_dying.c
  TIMEOUT 60 LABELS storage unit)

# Randomized model test, handler-heavy: per-thread timers whose handlers
# get, create, update, delete, copy and destroy owners in the middle of the
# worker's own operations on the same owners; every value carries its
# owner, map and generation and is checked against the thread's model.
rqspin_add_test(NAME storage_handler_model SOURCES storage_handler_model.c
  TIMEOUT 300 LABELS storage signal stress)

# The program's own liburcu use: memb registered after and before the
# storage's first call on a thread, bp (the storage's flavour) registered
# and nested both ways. Needs liburcu-memb (the program's side).
if(NOT CMAKE_CROSSCOMPILING)
  pkg_check_modules(RQSPIN_TEST_URCU_MEMB liburcu-memb)
  if(RQSPIN_TEST_URCU_MEMB_FOUND)
    rqspin_add_test(NAME storage_urcu_order SOURCES storage_urcu_order.c
      LIBS rqspin ${RQSPIN_TEST_URCU_MEMB_LINK_LIBRARIES} ${RQSPIN_STORAGE_LIBS}
      TIMEOUT 60 LABELS storage unit)
  endif()
endif()

# See src/storage/sources.cmake: liburcu-bp's reader records are not as
# aligned as its header declares; this test includes liburcu's headers.
if(RQSPIN_SANITIZE STREQUAL "undefined" AND TARGET storage_urcu_order)
  target_compile_options(storage_urcu_order PRIVATE -fno-sanitize=alignment)
endif()

# A program compiled with another inline layout of rqspin/storage.h gets no
# map: ELIBBAD and a message with both layout stamps.
rqspin_add_test(NAME storage_layout_stamp SOURCES storage_layout_stamp.c
  TIMEOUT 60 LABELS storage unit)
