/* SPDX-License-Identifier: MIT */
/* x86_64: the busy-wait hint. */
#ifndef RQSPIN_ARCH_H
#define RQSPIN_ARCH_H

/* PAUSE: tells the core we spin (saves power, frees the sibling
 * hyperthread, avoids the memory-order flush when the loop exits). */
static inline void arch_cpu_relax(void)
{
	__builtin_ia32_pause();
}

#endif
