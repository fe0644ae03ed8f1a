/* SPDX-License-Identifier: MIT */
/* rqspin-storage-bench: `rqspin-bench storage` as a program of its own
 * (linked with jemalloc when installed; see CMakeLists.txt). */
#include "runner.h"
#include "suite.h"

extern const struct bench_suite bench_suite_storage;

int main(int argc, char **argv)
{
	return bench_suite_main(&bench_suite_storage, argc, argv);
}
