/* SPDX-License-Identifier: MIT */
/* ASan poisoning and Valgrind client requests (see sanitize.h). */
#include "alloc/alloc_internal.h"

#if defined(ALLOC_VALGRIND) && !defined(ALLOC_ASAN)
int alloc_on_valgrind;

__attribute__((constructor)) static void san_init(void)
{
	alloc_on_valgrind = RUNNING_ON_VALGRIND != 0;
}
#endif

ALLOC_FN void san_alloc_slow(void *p, size_t n, int zeroed)
{
#ifdef ALLOC_ASAN
	ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#ifdef ALLOC_VALGRIND
	VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
#endif
	(void)p;
	(void)n;
	(void)zeroed;
}

ALLOC_FN void san_free_slow(void *p, size_t n, size_t keep)
{
#ifdef ALLOC_VALGRIND
	VALGRIND_FREELIKE_BLOCK(p, 0);
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

ALLOC_FN void san_carve_slow(void *p, size_t n)
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
