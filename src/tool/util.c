/* Small helpers shared by the zmem subcommands. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tool/util.h"
#include "tool/opt.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double cli_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int cli_ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

int cli_parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}
