/*
 * The board from the test's side (test_preload.sh): make one, then show
 * what the processes that ran under the preload library published.
 *
 *   board create FILE   a new board file, as zmem run makes it
 *   board show FILE     one line per slot used:
 *                       pid ppid state evictions heap_max resident_max
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "run/run.h"

int main(int argc, char **argv)
{
	struct run_board *b;
	struct run_slot s;

	if (argc == 3 && !strcmp(argv[1], "create")) {
		int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
		void *p;

		if (fd < 0 || ftruncate(fd, sizeof(*b)))
			return perror(argv[2]), 1;
		p = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return perror("mmap"), 1;
		run_board_init(p, getpid());
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "show")) {
		int rc = run_board_attach(argv[2], &b);

		if (rc)
			return fprintf(stderr, "%s: %s\n", argv[2], strerror(-rc)), 1;
		for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++)
			if (run_board_read(b, i, &s))
				printf("%d %d %u %llu %llu %llu\n", s.pid, s.ppid, s.state,
				       (unsigned long long)s.st.evictions,
				       (unsigned long long)s.st.heap_max,
				       (unsigned long long)s.st.resident_max);
		return 0;
	}
	fprintf(stderr, "usage: board create|show FILE\n");
	return 2;
}
