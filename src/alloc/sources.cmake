# The any-context allocator. Included by the top-level
# CMakeLists.txt, which compiles these into librqspin.
set(RQSPIN_ALLOC_SOURCES
  src/alloc/alloc.c
  src/alloc/slow.c
  src/alloc/heap.c
  src/alloc/pool.c
  src/alloc/reserve.c
  src/alloc/large.c
  src/alloc/stats.c
  src/alloc/report.c
  src/alloc/sanitize.c)
