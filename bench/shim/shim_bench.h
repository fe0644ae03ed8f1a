/* SPDX-License-Identifier: MIT */
/* rqspin-bench shim: pthread_spin_* through the preload shim vs glibc. */
#ifndef BENCH_SHIM_BENCH_H
#define BENCH_SHIM_BENCH_H

int shim_bench_main(int argc, char **argv);

#endif
