/* SPDX-License-Identifier: MIT */
/* aarch64: the busy-wait hint and a one-instruction 16-byte clear. */
#ifndef RQSPIN_ARCH_H
#define RQSPIN_ARCH_H

/* ISB rather than YIELD: YIELD is a no-op on cores without SMT, so a spin
 * with it hammers the cache line; ISB stalls for a pipeline refill, close
 * to x86 PAUSE (the choice of Rust's spin_loop and jemalloc). We do not use
 * WFE: without the event stream a WFE may sleep until the next interrupt,
 * and our waits must see their deadline (the kernel's 2025 arm64 bug). */
static inline void arch_cpu_relax(void)
{
	__asm__ __volatile__("isb" ::: "memory");
}

/* Zeroes the 16 bytes at p (8-byte aligned) in one instruction (STP): a
 * signal handler of this thread sees all of them cleared or none, and
 * another thread sees each aligned 8-byte half whole (single-copy atomic
 * per register). */
static inline void arch_clear16(void *p)
{
	__asm__ __volatile__("stp xzr, xzr, %0" : "=Q"(*(char(*)[16])p));
}

#endif
