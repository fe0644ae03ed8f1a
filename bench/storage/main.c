/* SPDX-License-Identifier: MIT */
/* rqspin-storage-bench: see storage_bench.c. */
int storage_bench_main(int argc, char **argv);

int main(int argc, char **argv)
{
	return storage_bench_main(argc, argv);
}
