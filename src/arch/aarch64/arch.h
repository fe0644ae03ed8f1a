/* SPDX-License-Identifier: MIT */
/* aarch64: the busy-wait hint. */
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

#endif
