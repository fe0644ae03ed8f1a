/* SPDX-License-Identifier: MIT */
/* x86_64: the busy-wait hint and a one-instruction 16-byte clear. */
#ifndef RQSPIN_ARCH_H
#define RQSPIN_ARCH_H

/* PAUSE: tells the core we spin (saves power, frees the sibling
 * hyperthread, avoids the memory-order flush when the loop exits). */
static inline void arch_cpu_relax(void)
{
	__builtin_ia32_pause();
}

/* Zeroes the 16 bytes at p (8-byte aligned) in one instruction: a signal
 * handler of this thread sees all of them cleared or none, and another
 * thread sees each aligned 8-byte half whole (SSE2 is baseline x86-64). */
static inline void arch_clear16(void *p)
{
	__asm__ __volatile__("xorps %%xmm0, %%xmm0\n\tmovups %%xmm0, %0"
			     : "=m"(*(char(*)[16])p)
			     :
			     : "xmm0");
}

#endif
