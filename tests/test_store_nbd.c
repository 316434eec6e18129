/*
 * The store with an NBD export as its backing store (backing_uri), against
 * a real NBD server: nbdkit's memory plugin on a unix socket of our own,
 * started and killed by the test.  A store under a memory limit writes
 * pages back to it; every page must read back equal.  Then the export is
 * killed mid-trace: the pages on it read as -EIO, the others equal, and
 * puts at the limit fail with -ENOSPC; it is started again, empty: the
 * pages that were on it stay -EIO (counted in bd_lost), the others read
 * back equal, and writeback goes on.
 *
 * Skipped (with a message) when zmem was built without libnbd or nbdkit
 * is not installed.
 *
 *   test_store_nbd [--seed N]     (or ZM_TEST_SEED=N)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store_internal.h"  /* first: the advanced tier of the headers */
#include "testutil.h"
#include "workload/workload.h"

#define PS 4096
#define NPAGES 2048
#define LIMIT (1u << 20)

static uint64_t g_seed;
static char g_dir[256], g_sock[300], g_pid[300], g_uri[400];
static pid_t g_kit = -1;

/* Page index's content at version v: text that compresses to about half,
 * or for one page in four random bytes, stored raw: a page whose bytes
 * were lost must not read back as the zeros of an empty export. */
static void fill(uint8_t *p, uint64_t index, uint64_t v)
{
	if (index % 4 == 3) {
		for (size_t i = 0; i < PS / 8; i++) {
			uint64_t w = mix64(g_seed ^ (index << 8) ^ v ^ (i << 40));

			memcpy(p + i * 8, &w, 8);
		}
		return;
	}
	assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.5, NULL,
				       mix64(g_seed ^ (index << 8) ^ v), p, PS, PS, NULL),
			 0);
}

#ifdef ZM_HAVE_LIBNBD
static bool have_nbdkit(void)
{
	return !system("nbdkit --version </dev/null >/dev/null 2>&1");
}
#endif

/* nbdkit's memory plugin, size bytes, empty, on g_sock. */
static void kit_start(const char *size)
{
	struct stat sb;

	unlink(g_sock);
	unlink(g_pid);
	g_kit = fork();
	assert_true(g_kit >= 0);
	if (!g_kit) {
		/* nbdkit refuses to start without its standard streams,
		 * which a test run's may not have (stdin closed) */
		int nul = open("/dev/null", O_RDWR);

		if (nul >= 0) {
			dup2(nul, 0);
			if (fcntl(1, F_GETFD) < 0)
				dup2(nul, 1);
			if (nul > 2)
				close(nul);
		}
		execlp("nbdkit", "nbdkit", "--foreground", "--exit-with-parent", "-U", g_sock,
		       "-P", g_pid, "memory", size, (char *)NULL);
		_exit(127);
	}
	/* the pid file is written once it listens */
	for (int i = 0; i < 1000 && stat(g_pid, &sb); i++)
		usleep(10000);
	assert_int_equal(stat(g_pid, &sb), 0);
}

static void kit_kill(void)
{
	if (g_kit > 0) {
		kill(g_kit, SIGKILL);
		waitpid(g_kit, NULL, 0);
	}
	g_kit = -1;
}

static int setup(void **state)
{
	const char *t = getenv("TMPDIR");

	snprintf(g_dir, sizeof(g_dir), "%s/zm-nbd-XXXXXX", t ? t : "/tmp");
	assert_non_null(mkdtemp(g_dir));
	snprintf(g_sock, sizeof(g_sock), "%s/kit.sock", g_dir);
	snprintf(g_pid, sizeof(g_pid), "%s/kit.pid", g_dir);
	snprintf(g_uri, sizeof(g_uri), "nbd+unix:///?socket=%s", g_sock);
	zmi_store_nbd_retry_now = 0;
	return 0;
}

static int teardown(void **state)
{
	kit_kill();
	unlink(g_sock);
	unlink(g_pid);
	rmdir(g_dir);
	return 0;
}

static struct zm_store *mk(size_t limit)
{
	struct zm_store_config c = { .nr_pages = NPAGES, .limit_bytes = limit,
				     .backing_uri = g_uri };
	struct zm_store *s = NULL;

	assert_int_equal(zm_store_create(&c, &s), 0);
	return s;
}

static unsigned kind(struct zm_store *s, uint64_t i)
{
	unsigned k;
	zm_handle_t h;
	size_t len;

	assert_int_equal(zm_store_slot_info(s, i, &k, &h, &len), 0);
	return k;
}

static void check_page(struct zm_store *s, uint64_t i, uint64_t v)
{
	uint8_t want[PS], got[PS];

	fill(want, i, v);
	assert_int_equal(zm_store_get(s, i, got), 0);
	assert_memory_equal(want, got, PS);
}

/* Without libnbd: -EOPNOTSUPP, whatever the URI. */
static void test_unsupported(void **state)
{
#ifdef ZM_HAVE_LIBNBD
	skip();
#else
	struct zm_store_config c = { .nr_pages = 16, .backing_uri = "nbd://127.0.0.1/x" };
	struct zm_store *s = NULL;

	assert_int_equal(zm_store_create(&c, &s), -EOPNOTSUPP);
	assert_null(s);
#endif
}

#ifdef ZM_HAVE_LIBNBD
#define NEED_KIT()                                                         \
	do {                                                               \
		if (!have_nbdkit()) {                                      \
			print_message("nbdkit is not installed: skipped\n"); \
			skip();                                            \
		}                                                          \
	} while (0)
#else
#define NEED_KIT()                                                        \
	do {                                                              \
		print_message("built without libnbd: skipped\n");         \
		skip();                                                   \
	} while (0)
#endif

/* An export smaller than every page once is refused, as a small block
 * device; no server is refused too. */
static void test_too_small(void **state)
{
	struct zm_store_config c = { .nr_pages = NPAGES, .backing_uri = g_uri };
	struct zm_store *s = NULL;

	NEED_KIT();
	assert_int_equal(zm_store_create(&c, &s), -EIO);   /* nobody listens */
	kit_start("4M");   /* NPAGES pages need 8 MiB and a block */
	assert_int_equal(zm_store_create(&c, &s), -ENOSPC);
	assert_null(s);
	c.backing_path = "/dev/null";
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
}

/* Every page back equal through writeback at the limit, rewrites,
 * discards, trims and readback of single pages. */
static void test_roundtrip(void **state)
{
	uint8_t p[PS];
	uint64_t ver[NPAGES] = { 0 };
	struct zm_store_stats st;
	struct zm_store *s;
	struct rng r;

	NEED_KIT();
	kit_start("64M");
	s = mk(LIMIT);
	for (uint64_t i = 0; i < NPAGES; i++) {
		fill(p, i, 0);
		assert_int_equal(zm_store_put(s, i, p), 0);
	}
	zm_store_stats(s, &st);
	print_message("%llu pages on the export\n", (unsigned long long)st.bd_count);
	assert_true(st.bd_count > NPAGES / 2);
	assert_int_equal(st.bd_lost, 0);
	rng_seed(&r, g_seed);
	for (int k = 0; k < 3 * NPAGES; k++) {
		uint64_t i = rng_below(&r, NPAGES);

		switch (rng_below(&r, 4)) {
		case 0:
			fill(p, i, ++ver[i]);
			assert_int_equal(zm_store_put(s, i, p), 0);
			break;
		case 1:
			if (ver[i] != UINT64_MAX)
				check_page(s, i, ver[i]);
			break;
		case 2:
			assert_int_equal(zm_store_discard(s, i, 1), 0);
			ver[i] = UINT64_MAX;
			break;
		default:
			(void)zm_store_writeback_page(s, i);
		}
	}
	for (uint64_t i = 0; i < NPAGES; i++)
		if (ver[i] != UINT64_MAX)
			check_page(s, i, ver[i]);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
}

/* The export killed and started again, empty, mid-trace. */
static void test_restart_empty(void **state)
{
	uint8_t p[PS], got[PS];
	bool on[NPAGES];
	uint64_t n_on = 0, more = NPAGES / 2;
	struct zm_store_stats st;
	struct zm_store *s;
	int enospc = 0;

	NEED_KIT();
	zmi_store_nbd_retry_now = 1; /* no waiting a second between tries */
	kit_start("64M");
	s = mk(LIMIT);
	/* the first half of the pages: most of it goes to the export */
	for (uint64_t i = 0; i < more; i++) {
		fill(p, i, 0);
		assert_int_equal(zm_store_put(s, i, p), 0);
	}
	for (uint64_t i = 0; i < more; i++)
		n_on += on[i] = kind(s, i) == ZM_STORE_SLOT_FILE;
	print_message("%llu of %llu pages on the export\n", (unsigned long long)n_on,
		      (unsigned long long)more);
	assert_true(n_on > 0 && n_on < more);

	kit_kill();
	/* away: its pages -EIO, the others equal */
	for (uint64_t i = 0; i < more; i++) {
		if (on[i]) {
			assert_int_equal(zm_store_get(s, i, got), -EIO);
		} else {
			check_page(s, i, 0);
		}
	}
	/* puts at the limit fail (no writeback), and change nothing else */
	for (uint64_t i = more; i < NPAGES && enospc < 8; i++) {
		int rc;

		fill(p, i, 0);
		rc = zm_store_put(s, i, p);
		assert_true(rc == 0 || rc == -ENOSPC);
		enospc += rc == -ENOSPC;
	}
	assert_int_equal(enospc, 8);
	zm_store_stats(s, &st);
	assert_int_equal(st.bd_count, n_on);

	kit_start("64M");   /* back, empty */
	for (uint64_t i = 0; i < more; i++) {
		if (on[i])
			assert_int_equal(zm_store_get(s, i, got), -EIO);
		else
			check_page(s, i, 0);
	}
	zm_store_stats(s, &st);
	assert_int_equal(st.bd_lost, n_on);
	/* writeback goes on: the second half, all of it, and back equal */
	for (uint64_t i = more; i < NPAGES; i++) {
		fill(p, i, 0);
		assert_int_equal(zm_store_put(s, i, p), 0);
	}
	zm_store_stats(s, &st);
	assert_true(st.bd_count > n_on);
	for (uint64_t i = more; i < NPAGES; i++)
		check_page(s, i, 0);
	for (uint64_t i = 0; i < more; i++)
		if (!on[i])
			check_page(s, i, 0);
	/* the lost pages take new content (their room freed) */
	for (uint64_t i = 0; i < more; i++) {
		if (!on[i])
			continue;
		assert_int_equal(zm_store_get(s, i, got), -EIO);
		fill(p, i, 1);
		assert_int_equal(zm_store_put(s, i, p), 0);
	}
	for (uint64_t i = 0; i < more; i++)
		check_page(s, i, on[i]);
	zm_store_stats(s, &st);
	assert_int_equal(st.bd_lost, n_on);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
}

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unsupported),
		cmocka_unit_test_setup_teardown(test_too_small, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_empty, setup, teardown),
	};

	test_args(argc, argv, &g_seed, NULL);
	signal(SIGPIPE, SIG_IGN);
	test_run_selected("store_nbd", tests);
}
