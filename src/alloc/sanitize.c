/* SPDX-License-Identifier: MIT */
/* ASan poisoning and Valgrind client requests (see sanitize.h). */
#include "alloc/alloc_internal.h"
#include "valgrind/vg.h"

ALLOC_FN void rqs_san_alloc_slow(void *p, size_t n, size_t slot, int zeroed)
{
#ifdef ALLOC_ASAN
	ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#ifdef ALLOC_VALGRIND
	VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
	/* The redzone: carving left it addressable. */
	if (slot > n)
		VALGRIND_MAKE_MEM_NOACCESS((char *)p + n, slot - n);
	/* New memory of this thread for helgrind and DRD: the previous
	 * user's accesses are ordered before it by atomics they cannot see. */
	vg_fresh(p, n);
#endif
	(void)p;
	(void)n;
	(void)slot;
	(void)zeroed;
}

ALLOC_FN void rqs_san_free_slow(void *p, size_t n, size_t keep)
{
#ifdef ALLOC_VALGRIND
	VALGRIND_FREELIKE_BLOCK(p, 0);
	/* Ours again: our links and canary are written with no lock. After
	 * FREELIKE, which makes DRD forget the range, suppression included. */
	vg_private(p, n);
	if (keep)
		VALGRIND_MAKE_MEM_UNDEFINED(p, keep);
#endif
#ifdef ALLOC_ASAN
	ASAN_POISON_MEMORY_REGION(p, n);
#endif
	(void)p;
	(void)n;
	(void)keep;
}

ALLOC_FN void rqs_san_carve_slow(void *p, size_t n)
{
#ifdef ALLOC_VALGRIND
	/* The page may have held freed objects of another size class. */
	VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#endif
#ifdef ALLOC_ASAN
	ASAN_POISON_MEMORY_REGION(p, n);
#endif
	(void)p;
	(void)n;
}

#ifdef ALLOC_VALGRIND
/* The slot's last word: always in the redzone (the request is at most
 * bs - SAN_REDZONE), 8-byte aligned (slots are multiples of 8). */
static size_t *exact_word(const void *p, size_t bs)
{
	return (size_t *)((uintptr_t)p + bs - sizeof(size_t));
}

ALLOC_FN void rqs_san_exact(void *p, size_t size, size_t bs)
{
	size_t *w = exact_word(p, bs);

	/* memcheck: the tail past the request becomes unaddressable. A
	 * resize to 0 would count as a free: a zero-size object keeps its
	 * block, with every byte unaddressable. */
	if (size)
		VALGRIND_RESIZEINPLACE_BLOCK(p, bs - SAN_REDZONE, size, 0);
	else
		VALGRIND_MAKE_MEM_NOACCESS(p, bs - SAN_REDZONE);
	VALGRIND_MAKE_MEM_UNDEFINED(w, sizeof(*w));
	*w = size;
	VALGRIND_MAKE_MEM_NOACCESS(w, sizeof(*w));
}

ALLOC_FN void rqs_san_free_peek(const void *p)
{
	VALGRIND_MAKE_MEM_DEFINED(p, 16);
}

ALLOC_FN size_t rqs_san_exact_size(const void *p, size_t bs)
{
	size_t *w = exact_word(p, bs), size;

	VALGRIND_MAKE_MEM_DEFINED(w, sizeof(*w));
	size = *w;
	VALGRIND_MAKE_MEM_NOACCESS(w, sizeof(*w));
	return size;
}
#endif
