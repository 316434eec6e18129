/*
 * The C program of zmem run's tests (tests/cli/test_run.sh): large
 * malloc arrays of text-like (compressible) data, filled, then read back
 * in passes, and a checksum printed; the same output under zmem run as
 * in a plain run.
 *
 *   malloc_work MIB [WORKERS]
 *
 * MIB: the arrays' size in all, in 1 MiB arrays; WORKERS: fork that many
 * children, each doing the work on MIB / WORKERS and printing its own
 * line, the parent printing after them in order (a forking program).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY (1u << 20)
#define PASSES 3

static uint64_t work(unsigned mib, unsigned seed)
{
	static const char words[] = "the of and to in is was for on that with as by at it "
				    "from his be an which or are this had not but ";
	unsigned char **a = calloc(mib, sizeof(*a));
	uint64_t x = seed * 2654435761u + 1, sum = 0;

	if (!a)
		exit(1);
	for (unsigned i = 0; i < mib; i++) {
		a[i] = malloc(ARRAY);
		if (!a[i])
			exit(1);
		for (size_t k = 0; k < ARRAY; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			a[i][k] = (unsigned char)words[(x >> 33) % (sizeof(words) - 1)];
		}
	}
	for (int p = 0; p < PASSES; p++)
		for (unsigned i = 0; i < mib; i++)
			for (size_t k = 0; k < ARRAY; k += 64)
				sum = sum * 31 + a[(i * 7 + (unsigned)p) % mib][k];
	for (unsigned i = 0; i < mib; i++)
		free(a[i]);
	free(a);
	return sum;
}

int main(int argc, char **argv)
{
	unsigned mib = argc > 1 ? (unsigned)atoi(argv[1]) : 64;
	unsigned workers = argc > 2 ? (unsigned)atoi(argv[2]) : 0;

	if (!mib)
		return 2;
	if (!workers) {
		printf("sum %u MiB: %llu\n", mib, (unsigned long long)work(mib, 1));
		return 0;
	}
	for (unsigned w = 0; w < workers; w++) {
		pid_t pid;
		int status;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			printf("worker %u: %llu\n", w,
			       (unsigned long long)work(mib / workers ? mib / workers : 1, w + 1));
			return 0;
		}
		/* one at a time: the output's order is fixed */
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			return 1;
	}
	printf("parent: %llu\n", (unsigned long long)work(mib / workers ? mib / workers : 1, 99));
	return 0;
}
