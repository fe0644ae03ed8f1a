/* SPDX-License-Identifier: MIT */
/*
 * Any-context allocator: the userspace stand-in for the kernel's
 * kmalloc_nolock() / kfree_nolock().
 *
 * Every function here may be called from anywhere: normal code, a signal
 * handler (including one that interrupted this very allocator on the same
 * thread, at any instruction), while holding spinlocks, from many threads at
 * once. None of them ever blocks or waits for another thread: they use
 * per-thread heaps guarded by a nesting flag, lock-free lists and raw
 * system calls (mmap, munmap, madvise) only. They preserve errno.
 *
 * Objects come from size classes of 8 bytes to 16 KiB; larger requests get
 * their own mapping. Alignment: 8 bytes for requests of at most 8 bytes,
 * 16 bytes otherwise; a request whose class is a power of two up to 16 KiB
 * (16, 32, 64, ..., 4096, 8192, 16384) is aligned to its class size.
 * Objects of more than 16 KiB are 64-byte aligned.
 *
 * Memory is not compatible with malloc/free: free with rqspin_free_nolock()
 * exactly what rqspin_malloc_nolock() returned.
 *
 * Leaving a signal handler with siglongjmp() or longjmp() (or by
 * cancelling or exiting the thread from it) is NOT allowed while the
 * handler interrupted one of these functions on the same thread: the
 * interrupted call is abandoned half way through a change of the thread's
 * heap, which cannot be repaired later (the size class stays marked busy,
 * so the thread's later calls take slower paths and its frees into that
 * class are deferred for good; a thread that exits so leaves its heap
 * unused). A program whose handlers may jump out must block those signals
 * around its calls into the allocator. Calling these functions from the
 * handler itself, and jumping out of a handler that did not interrupt
 * them, is fine.
 *
 * Bad pointers passed to rqspin_free_nolock() or rqspin_malloc_usable_size()
 * -- a second free of a small object, a pointer into the middle of an
 * object, a pointer that did not come from this allocator -- are detected
 * where the metadata allows: always for pointers into the allocator's
 * small-object segments (interior pointers, pointers into free pages, a
 * second free of an object of 16 bytes or more while the object is still
 * free, and of an 8-byte object when it is the last one freed into its
 * page, by its owner thread or by another), and for other pointers when
 * they are at the offset where a large object would start (a header
 * check). In a debug build of the library
 * (NDEBUG not defined) such a call writes a message to stderr and aborts;
 * in a release build it does nothing (the object is left alone, the call is
 * counted in rqspin_alloc_stats.bad_frees). Debug builds also catch every
 * second free (and usable_size) of an 8-byte object while it is free, and
 * abort when a free object was written to (a use after free seen when it
 * is reused). A
 * double free of a large object, or a pointer to unreadable memory, is
 * undefined (usually a SIGSEGV). Concurrent double frees from two threads
 * are not always caught.
 */
#ifndef RQSPIN_ALLOC_H
#define RQSPIN_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <rqspin/defs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags for rqspin_malloc_nolock(). Other bits are reserved (ignored). */
#define RQSPIN_ALLOC_ZERO 0x1u /* return zero-filled memory */

/* Largest size served from size classes; larger requests are mapped. */
#define RQSPIN_ALLOC_SMALL_MAX 16384u
/* Number of size classes (entries of the per-class statistics). */
#define RQSPIN_ALLOC_NCLASSES 37

/*
 * Allocate size bytes (zero-filled with RQSPIN_ALLOC_ZERO).
 *
 * Returns NULL only when memory is exhausted (mmap failed, or an internal
 * limit of 256 GiB of small-object segments was reached): NULL means
 * "out of memory", never "busy, try again", so retrying will not help.
 * A call from a signal handler that interrupted the allocator on the same
 * thread, and finds its size class in use there, is served from the next
 * larger size class that keeps the alignment documented above (for a
 * power-of-two class the next power of two) or else from a shared
 * lock-free reserve, which grows on demand like the rest of the heap; it
 * can therefore fail only for lack of memory too (or once the reserve
 * holds 16 GiB: its pages are kept for later handlers, never given back),
 * and its object has the same alignment as any other.
 *
 * size 0 returns a unique pointer to a minimum-size (8-byte) object that
 * must be freed like any other (it is never NULL unless out of memory).
 * A size too large to map returns NULL.
 *
 * Async-signal-safe. Never blocks. Preserves errno.
 */
RQSPIN_API void *rqspin_malloc_nolock(size_t size, unsigned flags);

/*
 * Free an object returned by rqspin_malloc_nolock(). NULL is a no-op.
 * Never fails: a free that cannot be completed at once (a signal handler
 * freeing into a size class that the interrupted code is using) is put on
 * a per-thread deferred list and completed later by that thread (its next
 * free, its next allocation that refills from the page level,
 * rqspin_alloc_trim() or its exit).
 * Objects may be freed by any thread, also after the allocating thread has
 * exited. Bad pointers: see the file comment.
 *
 * Async-signal-safe. Never blocks. Preserves errno.
 */
RQSPIN_API void rqspin_free_nolock(void *p);

/*
 * Bytes usable at p (at least what was requested: the size class, or the
 * mapping for a large object). 0 for NULL. A bad pointer aborts in debug
 * builds and returns 0 in release builds.
 *
 * Async-signal-safe.
 */
RQSPIN_API size_t rqspin_malloc_usable_size(const void *p);

/*
 * Statistics. Live objects are summed on read from the pages' in-use
 * counts (less the frees that other threads made and the owner has not
 * taken yet), other counters are kept per thread and summed on read, so a
 * snapshot taken while other threads allocate is consistent enough for
 * monitoring, not exact. Objects freed by a signal handler into a busy
 * size class count as live until their deferred free completes (see
 * rqspin_free_nolock). The read walks every page descriptor (64 per
 * 4 MiB segment mapped).
 */
struct rqspin_alloc_stats {
	/* per size class */
	uint64_t class_size[RQSPIN_ALLOC_NCLASSES];   /* bytes per object */
	uint64_t class_objects[RQSPIN_ALLOC_NCLASSES];/* live objects */
	uint64_t class_bytes[RQSPIN_ALLOC_NCLASSES];  /* live objects * class_size */
	uint64_t small_objects;   /* sum of class_objects */
	uint64_t small_bytes;     /* sum of class_bytes */
	/* large objects (their own mappings) */
	uint64_t large_objects;   /* live */
	uint64_t large_bytes;     /* mapped for the live ones */
	uint64_t large_allocs;    /* total ever made */
	/* mappings */
	uint64_t segments;        /* 4 MiB small-object segments mapped */
	uint64_t pages_total;     /* 64 KiB pages in them */
	uint64_t pages_active;    /* pages assigned to a heap or the reserve */
	uint64_t pages_cached;    /* empty pages still resident (thread and shared caches) */
	uint64_t pages_returned;  /* empty pages not resident (never used, or madvised) */
	uint64_t mapped_bytes;    /* segments + large mappings + metadata */
	uint64_t madvise_calls;   /* pages given back to the OS, total */
	/* heaps */
	uint64_t heaps;           /* per-thread heaps ever created */
	uint64_t heaps_abandoned; /* of those, left by exited threads (adoptable) */
	uint64_t heaps_adopted;   /* times a thread took over an abandoned heap */
	/* any-context paths */
	uint64_t nested;          /* allocations that found their class busy
				     (a signal handler interrupted the allocator) */
	uint64_t next_class;      /* ... of those, served by a larger size class */
	uint64_t deferred_frees;  /* frees deferred because their class was busy */
	uint64_t remote_frees;    /* frees of objects owned by another heap */
	uint64_t reserve_allocs;  /* allocations served by the shared reserve */
	uint64_t reserve_objects; /* reserve objects live now */
	uint64_t reserve_pages;   /* pages that the reserve holds */
	uint64_t bad_frees;       /* bad pointers ignored (release builds) */
};

/* Fill *out. Async-signal-safe (reads only). */
RQSPIN_API void rqspin_alloc_stats_get(struct rqspin_alloc_stats *out);

/*
 * Return cached memory to the OS: the calling thread's empty pages, the
 * shared cache of empty pages, and the empty pages of heaps left by exited
 * threads (after collecting the objects other threads freed into them),
 * including heaps of threads that exited without the allocator's exit
 * notice (a first call from the last round of key destructors), found by
 * their thread id.
 * Completes the calling thread's deferred frees. Other live threads' own
 * caches (a few pages each) are left alone. Returns about the number of
 * bytes given back during this call (pages that other threads gave back
 * meanwhile may be counted too). Async-signal-safe (when called from a handler
 * that interrupted the allocator, it skips what the interrupted call is
 * using).
 */
RQSPIN_API size_t rqspin_alloc_trim(void);

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_ALLOC_H */
