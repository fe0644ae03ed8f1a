/* SPDX-License-Identifier: MIT */
/*
 * Which atomic instructions an aarch64 run really executes.
 *
 * The library is built for plain ARMv8.0 with GCC's outline atomics (the
 * Debian default, -moutline-atomics): every read-modify-write calls a
 * libgcc helper (__aarch64_cas4_acq, __aarch64_swp2_acq_rel, ...) that
 * takes the LSE instruction (CAS, SWP, LDADD) when the CPU advertises
 * HWCAP_ATOMICS and the LDXR/STXR loop otherwise, by one flag set at
 * start-up. The test-aarch64 runs use one build on an LSE core (qemu
 * -cpu max) and an LL/SC-only core (-cpu cortex-a57); this checks, for the
 * run it is in, that:
 *   - the CPU's HWCAP_ATOMICS is what the run expects
 *     (RQSPIN_TEST_EXPECT_LSE=1 or 0; unset: only reported);
 *   - the helpers' flag follows it (so the library's own copy, set the
 *     same way from the same auxv, does too);
 *   - an LSE instruction executes exactly when HWCAP says so (SIGILL on the
 *     LL/SC core): the emulated CPU is not just labelled differently.
 */
#include <setjmp.h>
#include <sys/auxv.h>

#include "test_util.h"

#ifndef HWCAP_ATOMICS
#define HWCAP_ATOMICS (1ul << 8)
#endif

/* libgcc's flag for the outline-atomic helpers; weak: absent when the
 * compiler inlines the atomics (-mno-outline-atomics, -march=armv8.1-a). */
extern _Bool __aarch64_have_lse_atomics __attribute__((weak));

static sigjmp_buf on_sigill;

static void sigill_handler(int sig)
{
	(void)sig;
	siglongjmp(on_sigill, 1);
}

/* Runs one LDADDAL; false when the CPU raises SIGILL for it. */
static bool lse_executes(void)
{
	static volatile uint32_t word;
	uint32_t old = 0;

	tu_set_handler(SIGILL, sigill_handler, 0, NULL);
	if (sigsetjmp(on_sigill, 1)) {
		tu_reset_handler(SIGILL);
		return false;
	}
	__asm__ __volatile__(".arch_extension lse\n\tldaddal %w[inc], %w[old], %[mem]"
			     : [old] "=r"(old), [mem] "+Q"(word)
			     : [inc] "r"(1u)
			     : "memory");
	tu_reset_handler(SIGILL);
	(void)old;
	return word == 1;
}

/* A read-modify-write compiled like the library's (this file is built
 * with the same flags): it links the helpers and their flag. */
static _Atomic uint32_t counter;

int main(void)
{
	uint32_t before = atomic_fetch_add_explicit(&counter, 1, memory_order_acq_rel);
	bool hwcap = (getauxval(AT_HWCAP) & HWCAP_ATOMICS) != 0;
	bool outline = &__aarch64_have_lse_atomics != NULL;
	bool executes = lse_executes();
	const char *want = getenv("RQSPIN_TEST_EXPECT_LSE");

	printf("aarch64_atomics: HWCAP_ATOMICS %d, LSE instruction executes %d, "
	       "outline-atomic helpers %s\n",
	       hwcap, executes,
	       outline ? (__aarch64_have_lse_atomics ? "linked, take LSE" : "linked, take LL/SC")
		       : "not linked (atomics inlined)");
	CHECK(before == 0 && atomic_load(&counter) == 1);
	CHECK(executes == hwcap);
	if (outline)
		CHECK(__aarch64_have_lse_atomics == hwcap);
	if (want && *want) {
		CHECK(want[0] == '0' || want[0] == '1');
		CHECK(hwcap == (want[0] == '1'));
	}
	return 0;
}
