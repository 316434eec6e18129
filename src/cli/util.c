/* Small helpers shared by the zmem subcommands. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opt.h"
#include <zmem/codec.h>

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

const char *cli_zcache_codec(void)
{
	struct zm_codec *c;

	if (zm_codec_create("lzo", 0, &c) == 0) {
		zm_codec_destroy(c);
		return "lzo";
	}
	return "lz4";
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

/* The xcfmalloc seed's reported effective compression (2011, 32-bit,
 * lzo1x), percent: background §1. */
static const struct {
	const char *allocator;
	double zero, text;
} seed_reported[] = {
	{ "xvmalloc", 1.93, 99.95 },
	{ "xcfmalloc", 3.72, 78.11 },
};

double cli_seed_reported(const char *allocator, int text)
{
	for (size_t i = 0; i < sizeof(seed_reported) / sizeof(seed_reported[0]); i++)
		if (!strcmp(seed_reported[i].allocator, allocator))
			return text ? seed_reported[i].text : seed_reported[i].zero;
	return 0;
}
