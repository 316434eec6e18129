/* Tests of the workload generators and of capture: kinds and bad
 * arguments; zero pages are zero; text and random pages land on their
 * target ratio (measured here, independently, with the codec) and text is
 * printable; the stream is reproducible and independent of how it is cut;
 * capture of this process and of a forked child finds known contents.
 * --seed N replays. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "testutil.h"
#include <zmem/codec.h>
#include "workload/workload.h"

#define PS 4096
#define NPAGES 256 /* 1 MiB per measurement */
/* The generator's promise is the mean within 2%; ask for better here. */
#define RATIO_TOL 0.01

static uint64_t seed;

static void test_kinds(void **st)
{
	enum workload_kind k;

	assert_int_equal(workload_kind_parse("zero", &k), 0);
	assert_int_equal(k, WORKLOAD_ZERO);
	assert_int_equal(workload_kind_parse("random", &k), 0);
	assert_int_equal(k, WORKLOAD_RANDOM);
	assert_int_equal(workload_kind_parse("text", &k), 0);
	assert_int_equal(k, WORKLOAD_TEXT);
	assert_int_equal(workload_kind_parse("Text", &k), -EINVAL);
	assert_int_equal(workload_kind_parse(NULL, &k), -EINVAL);
	assert_string_equal(workload_kind_name(WORKLOAD_TEXT), "text");
	assert_null(workload_kind_name((enum workload_kind)42));
}

static void test_bad_args(void **st)
{
	struct workload_config cfg = { .kind = WORKLOAD_TEXT };
	struct workload *w = (void *)1;
	unsigned char buf[2 * PS];

	cfg.ratio = 1.5;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	assert_null(w);
	cfg.ratio = -0.1;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	cfg.ratio = NAN;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	cfg.ratio = 0.5;
	cfg.page_size = 100;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	cfg.page_size = 2u << 20;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	cfg.page_size = PS;
	cfg.kind = (enum workload_kind)7;
	assert_int_equal(workload_create(&cfg, &w), -EINVAL);
	assert_int_equal(workload_create(NULL, &w), -EINVAL);
	cfg.kind = WORKLOAD_TEXT;
	assert_int_equal(workload_create(&cfg, NULL), -EINVAL);
	assert_int_equal(workload_create(&cfg, &w), 0);
	assert_int_equal(workload_next(w, buf, PS + 1), -EINVAL);
	assert_int_equal(workload_next(w, NULL, PS), -EINVAL);
	assert_int_equal(workload_next(w, buf, 0), 0);
	workload_destroy(w);
	workload_destroy(NULL);
	assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.5, NULL, 1, buf, 100, PS, NULL),
			 -EINVAL);
}

static void test_zero(void **st)
{
	unsigned char *buf = malloc(NPAGES * PS);
	struct workload_stats s;

	memset(buf, 0xff, NPAGES * PS);
	assert_int_equal(workload_fill(WORKLOAD_ZERO, 0, NULL, seed, buf,
				       NPAGES * PS, PS, &s), 0);
	for (size_t i = 0; i < NPAGES * PS; i++)
		if (buf[i])
			fail_msg("byte %zu of the zero kind is %u", i, buf[i]);
	assert_int_equal(s.pages, NPAGES);
	assert_true(s.ratio < 0.05);
	free(buf);
}

/* Mean ratio of buf's pages compressed with c, measured here. */
static double measure(struct zm_codec *c, const unsigned char *buf, size_t npages)
{
	unsigned char out[PS];
	double sum = 0;

	for (size_t i = 0; i < npages; i++) {
		int n = zm_codec_compress(c, buf + i * PS, PS, out, PS);

		assert_true(n > 0 || n == -ENOSPC);
		sum += n > 0 ? (double)n / PS : 1.0;
	}
	return sum / (double)npages;
}

static void check_ratio(enum workload_kind kind, const char *codec, double target)
{
	unsigned char *buf = malloc(NPAGES * PS);
	struct workload_stats s;
	struct zm_codec *c;
	double got;

	assert_int_equal(zm_codec_create(codec, 0, &c), 0);
	assert_int_equal(workload_fill(kind, target, c, seed, buf, NPAGES * PS, PS, &s), 0);
	got = measure(c, buf, NPAGES);
	printf("  %-6s %-4s target %.3f measured %.4f (generator says %.4f, "
	       "%.1f compressions/page)\n", workload_kind_name(kind), codec, target,
	       got, s.ratio, (double)s.compress_calls / (double)s.pages);
	assert_true(fabs(got - target) <= RATIO_TOL);
	assert_true(fabs(got - s.ratio) < 1e-6);
	assert_int_equal(s.pages, NPAGES);
	if (kind == WORKLOAD_TEXT)
		for (size_t i = 0; i < NPAGES * PS; i++)
			if (!(buf[i] == '\n' || (buf[i] >= 32 && buf[i] < 127)))
				fail_msg("text byte %zu is %u", i, buf[i]);
	zm_codec_destroy(c);
	free(buf);
}

static void test_text_ratio(void **st)
{
	check_ratio(WORKLOAD_TEXT, "lz4", 0.5);
	check_ratio(WORKLOAD_TEXT, "lz4", 0.75);
	check_ratio(WORKLOAD_TEXT, "zstd", 0.5);
#ifdef ZM_HAVE_LZO
	check_ratio(WORKLOAD_TEXT, "lzo", 0.5);
	check_ratio(WORKLOAD_TEXT, "lzo", 0.75);
#endif
}

static void test_random_ratio(void **st)
{
	check_ratio(WORKLOAD_RANDOM, "lz4", 0.3);
	check_ratio(WORKLOAD_RANDOM, "lz4", 1.0);
}

/* Out of reach: the nearest reachable ratio, and no error. */
static void test_unreachable(void **st)
{
	unsigned char *buf = malloc(16 * PS);
	struct workload_stats s;
	struct zm_codec *c;

	assert_int_equal(zm_codec_create("zstd", 0, &c), 0);
	assert_int_equal(workload_fill(WORKLOAD_TEXT, 1.0, c, seed, buf, 16 * PS, PS, &s), 0);
	assert_true(s.ratio > 0.7 && s.ratio < 1.0);
	zm_codec_destroy(c);
	free(buf);
}

static void test_reproducible(void **st)
{
	const size_t n = 32 * PS;
	unsigned char *a = malloc(n), *b = malloc(n);
	struct workload_config cfg = { .kind = WORKLOAD_TEXT, .ratio = 0.6,
					  .seed = seed, .page_size = PS };
	struct workload *w;

	assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.6, NULL, seed, a, n, PS, NULL), 0);
	assert_int_equal(workload_create(&cfg, &w), 0);
	assert_int_equal(workload_next(w, b, 5 * PS), 0);
	assert_int_equal(workload_next(w, b + 5 * PS, n - 5 * PS), 0);
	workload_destroy(w);
	assert_memory_equal(a, b, n);
	assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.6, NULL, seed + 1, b, n, PS, NULL), 0);
	assert_memory_not_equal(a, b, n);
	free(a);
	free(b);
}

static void test_page_sizes(void **st)
{
	for (size_t ps = 1024; ps <= 65536; ps <<= 2) {
		unsigned char *buf = malloc(8 * ps);
		struct workload_stats s;

		assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.7, NULL, seed, buf,
					       8 * ps, ps, &s), 0);
		assert_int_equal(s.pages, 8);
		assert_true(fabs(s.ratio - 0.7) < 0.05);
		free(buf);
	}
}

/* ---- capture -------------------------------------------------------- */

#define COOKIE "zmem capture cookie 7f3a"
#define COOKIE_PAGES 8

struct scan {
	size_t pages, found;  /* found: distinct cookie pages seen */
	unsigned seen;        /* bit i: cookie page i seen */
};

/* A cookie page is COOKIE then its index byte.  Copies of a cookie page
 * (the capture's own read buffer, say) may be captured too, so count
 * distinct indices. */
static int scan_page(void *arg, const void *page, size_t ps)
{
	struct scan *s = arg;
	const unsigned char *p = page;

	s->pages++;
	if (!memcmp(page, COOKIE, sizeof(COOKIE)) && p[sizeof(COOKIE)] < COOKIE_PAGES &&
	    !(s->seen & (1u << p[sizeof(COOKIE)]))) {
		s->seen |= 1u << p[sizeof(COOKIE)];
		s->found++;
	}
	return 0;
}

/* COOKIE_PAGES pages starting with the cookie, in an anonymous mapping */
static void *plant_cookies(void)
{
	char *m = mmap(NULL, COOKIE_PAGES * PS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(m != MAP_FAILED);
	for (int i = 0; i < COOKIE_PAGES; i++) {
		memcpy(m + i * PS, COOKIE, sizeof(COOKIE));
		m[i * PS + sizeof(COOKIE)] = (char)i;
	}
	return m;
}

static void test_capture_self(void **st)
{
	struct workload_capture_stats cs;
	struct scan sc = { 0 };
	char *m = plant_cookies();
	void *buf;
	size_t len;

	assert_int_equal(workload_capture(getpid(), 0, scan_page, &sc, &cs), 0);
	/* the cookie lives in this function's mapping, and the string
	 * constant elsewhere, which does not start a page */
	assert_int_equal(sc.found, COOKIE_PAGES);
	assert_int_equal(cs.pages, sc.pages);
	assert_true(cs.regions > 0);
	assert_int_equal(cs.page_size, (size_t)sysconf(_SC_PAGESIZE));
	printf("  self: %zu pages from %zu mappings, %zu unreadable, %zu untouched, "
	       "%zu reservations skipped\n", cs.pages, cs.regions, cs.unreadable,
	       cs.unpopulated, cs.regions_skipped);

	assert_int_equal(workload_capture_mem(getpid(), 10 * PS, &buf, &len, &cs), 0);
	assert_non_null(buf);
	assert_int_equal(len, 10 * PS);
	assert_int_equal(cs.pages, 10);
	assert_true(cs.limited);
	free(buf);
	munmap(m, COOKIE_PAGES * PS);
}

static void test_capture_child(void **st)
{
	struct workload_capture_stats cs;
	struct scan sc = { 0 };
	int go[2], ready[2];
	char c = 0;
	pid_t pid;
	int rc;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		plant_cookies();
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	rc = workload_capture(pid, 0, scan_page, &sc, &cs);
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go[0]); close(go[1]); close(ready[0]); close(ready[1]);
	if (rc == -EPERM) {
		printf("  child: not allowed to read it here (no ptrace rights)\n");
		skip();
	}
	assert_int_equal(rc, 0);
	assert_true(sc.pages > 0);
	/* the child's cookies, plus the copy-on-write copies of the
	 * parent's from test_capture_self if still mapped (they are not) */
	assert_int_equal(sc.found, COOKIE_PAGES);
}

static void test_capture_errors(void **st)
{
	struct workload_capture_stats cs;
	struct scan sc = { 0 };
	void *buf = (void *)1;
	size_t len;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0); /* reaped: the pid names no process now */
	assert_int_equal(workload_capture(pid, 0, scan_page, &sc, &cs), -ESRCH);
	assert_int_equal(workload_capture_mem(pid, 0, &buf, &len, NULL), -ESRCH);
	assert_null(buf);
	assert_int_equal(workload_capture(0, 0, scan_page, &sc, NULL), -EINVAL);
	assert_int_equal(workload_capture(-5, 0, scan_page, &sc, NULL), -EINVAL);
	assert_int_equal(workload_capture(getpid(), 0, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(workload_capture_mem(getpid(), 0, NULL, &len, NULL), -EINVAL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_zero),
		cmocka_unit_test(test_text_ratio),
		cmocka_unit_test(test_random_ratio),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_reproducible),
		cmocka_unit_test(test_page_sizes),
		cmocka_unit_test(test_capture_self),
		cmocka_unit_test(test_capture_child),
		cmocka_unit_test(test_capture_errors),
	};

	test_args(argc, argv, &seed, NULL);
	return cmocka_run_group_tests_name("workload", tests, NULL, NULL);
}
