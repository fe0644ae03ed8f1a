/* SPDX-License-Identifier: MIT */
/* rqspin-alloc-bench: see alloc_bench.c. */
int alloc_bench_main(int argc, char **argv);

int main(int argc, char **argv)
{
	return alloc_bench_main(argc, argv);
}
