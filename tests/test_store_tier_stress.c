/*
 * Multi-threaded stress of the store's tiering: 4 threads put, get and
 * discard pages on overlapping ranges of slots while a fifth loops over
 * marks, recompressions, writebacks (all pages and single ones) and
 * compaction, the background worker recompresses idle pages by itself
 * (idle_after_ms), and a memory limit with a backing file makes puts
 * write pages back on their own.  So every path that moves a page (to
 * the secondary codec, to the file, back) races with puts, gets and
 * discards of that page.
 *
 * Every page carries a cookie (writer, slot, version, kind) in its first
 * word and the rest is derived from it.  Writes to a slot are ordered by
 * a test lock per slot, so the test knows each slot's last write: a get
 * made holding that lock must return exactly it; a get made without it
 * must return some complete page once written there, or zeros.  At the
 * end every page must equal its last write and the checker must pass.
 * A third run brings pages read back into memory while reads from the
 * file are slowed down at random, so that gets, puts and discards wait
 * for reads of their slot.
 *
 * test_slow_read: a read from the backing file that takes 300 ms, and
 * another thread's get, put or discard of that page meanwhile: it waits
 * for the read, asleep (its CPU time a small part of its wall time).
 *
 *   test_store_tier_stress [--seed N] [--steps N]
 */
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store_internal.h"  /* first: the backing file's seam */
#include "storetest.h"

#define NT 4
#define NSLOT 384
#define SPAN 160          /* slots a writer covers; neighbours overlap */
#define PS ST_PS
#define WORDS ST_WORDS
#define HOT 24            /* slots of a writer's hot window */
#define HOT_MS 100        /* how long a window stays */
#define RUN_MS 1500       /* a run's length at most, whatever the steps
				     (ZM_SOAK times that under make soak) */

static uint64_t g_seed;
static long g_steps = 1000000;
static struct zm_store *g_store;
static uint64_t g_published[NT];    /* atomic: highest version each writer began */
static int g_stop;                  /* atomic */
static uint64_t g_deadline_ms;
static pthread_mutex_t g_slot_lock[NSLOT];
static uint64_t g_last[NSLOT];      /* the slot's last write (0: none); g_slot_lock */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 0 if w is zeros or a page st_page() made for slot idx by a writer that
 * began it.  The pages' fourth kind is ST_LZ4_HUGE: huge for lz4, not for
 * the secondary codec, zstd. */
static int check_page(const uint64_t *w, uint64_t idx)
{
	int rc = st_check_cookie(w, idx, NT, g_published);

	if (rc <= 0)
		return rc;
	return st_page_whole(w, ST_LZ4_HUGE) ? 0 : -4;
}

struct targ {
	int id;
	int failures;
	long puts, gets, exact, discards, nospc;
};

static void report(struct targ *t, const char *what, uint64_t idx, int rc, uint64_t got,
		   uint64_t want)
{
	if (t->failures++ < 5)
		printf("thread %d: slot %llu: %s: rc %d, cookie %#llx, want %#llx\n", t->id,
		       (unsigned long long)idx, what, rc, (unsigned long long)got,
		       (unsigned long long)want);
}

static void *writer(void *arg)
{
	struct targ *t = arg;
	static __thread uint64_t page[WORDS], out[WORDS];
	uint64_t version = 0, base = (uint64_t)t->id * (NSLOT - SPAN) / (NT - 1);
	struct rng r;

	rng_seed(&r, g_seed + (uint64_t)t->id * 7919);
	uint64_t hot = 0, hot_until = 0;

	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t idx, now = now_ms();
		int rc;

		if (now >= g_deadline_ms)
			break;
		/* most accesses in a window that moves now and then: the
		 * rest of the span goes cold, for the worker and reclaim */
		if (now >= hot_until) {
			hot = rng_below(&r, SPAN - HOT);
			hot_until = now + HOT_MS;
		}
		idx = base + (rng_below(&r, 64) ? hot + rng_below(&r, HOT) : rng_below(&r, SPAN));

		if (op < 40) {                          /* put */
			uint64_t c = st_cookie((unsigned)t->id, idx, ++version,
					       (unsigned)rng_below(&r, 4));

			__atomic_store_n(&g_published[t->id], version, __ATOMIC_RELEASE);
			st_page(page, c, ST_LZ4_HUGE);
			pthread_mutex_lock(&g_slot_lock[idx]);
			rc = zm_store_put(g_store, idx, page);
			if (rc == 0)
				g_last[idx] = c;
			pthread_mutex_unlock(&g_slot_lock[idx]);
			if (rc == -ENOSPC)
				t->nospc++;   /* counted: the test fails on it at the end */
			else if (rc)
				report(t, "put", idx, rc, c, 0);
			t->puts++;
		} else if (op < 70) {                   /* get, racing with writes */
			rc = zm_store_get(g_store, idx, out);
			if (rc || check_page(out, idx))
				report(t, "get", idx, rc, out[0], 0);
			t->gets++;
		} else if (op < 95) {                   /* get of the last write */
			uint64_t want;

			pthread_mutex_lock(&g_slot_lock[idx]);
			rc = zm_store_get(g_store, idx, out);
			want = g_last[idx];
			pthread_mutex_unlock(&g_slot_lock[idx]);
			if (rc || out[0] != want || check_page(out, idx))
				report(t, "exact get", idx, rc, out[0], want);
			t->exact++;
		} else {                                /* discard */
			uint64_t n = 1 + rng_below(&r, 4);

			if (idx + n > NSLOT)
				n = NSLOT - idx;
			for (uint64_t k = 0; k < n; k++)
				pthread_mutex_lock(&g_slot_lock[idx + k]);
			rc = zm_store_discard(g_store, idx, n);
			for (uint64_t k = 0; k < n; k++) {
				if (rc == 0)
					g_last[idx + k] = 0;
				pthread_mutex_unlock(&g_slot_lock[idx + k]);
			}
			if (rc)
				report(t, "discard", idx, rc, 0, 0);
			t->discards++;
		}
	}
	return NULL;
}

struct tarr {
	int failures;
	long marks, recompressed, written, pages_written;
};

/* Tiering by hand, all the while: every pick, small batches. */
static void *tierer(void *arg)
{
	static const unsigned picks[] = {
		0, ZM_STORE_PICK_IDLE, ZM_STORE_PICK_HUGE, ZM_STORE_PICK_INCOMPRESSIBLE,
		ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE,
	};
	struct tarr *a = arg;
	struct zm_store_stats st;
	struct rng r;

	rng_seed(&r, g_seed ^ 0x7157);
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		unsigned which = picks[rng_below(&r, 5)];
		long rc;
		int prc;

		rc = zm_store_mark_idle(g_store, rng_below(&r, 2) ? 0 : 10);
		a->failures += rc < 0;
		a->marks++;
		/* now and then, huge pages only: the others are left to the
		 * worker */
		rc = rng_below(&r, 4) ? 0 : zm_store_recompress(g_store, which | ZM_STORE_PICK_HUGE,
								1 + rng_below(&r, 8));
		if (rc < 0)
			a->failures++;
		else
			a->recompressed += rc;
		rc = zm_store_writeback(g_store, picks[rng_below(&r, 5)], 1 + rng_below(&r, 16));
		if (rc < 0)
			a->failures++;
		else
			a->written += rc;
		prc = zm_store_writeback_page(g_store, rng_below(&r, NSLOT));
		if (prc == 0)
			a->pages_written++;
		else if (prc != -ENOENT)
			a->failures++;
		if (rng_below(&r, 8) == 0)
			a->failures += zm_store_compact(g_store) < 0;
		zm_store_stats(g_store, &st);
		a->failures += st.failed_reads != 0;
		/* now and then a pause: marks are what date the pages, and
		 * marks in a tight loop keep every page younger than
		 * idle_after_ms (ages go 255 marks back at most), starving
		 * the worker */
		if (a->marks % 8 == 0)
			usleep(1000);
	}
	return NULL;
}

/* The backing file's seam (store_internal.h): reads slowed down. */
static uint64_t g_slow_index = UINT64_MAX; /* the first read of it sleeps
					      g_slow_ms */
static unsigned g_slow_ms;
static int g_slow_in;                      /* atomic: that read has begun */
static int g_jitter;                       /* 1 read in 4 sleeps 0-200 us */

static int slow_read(int op, uint64_t index)
{
	if (op != 'r')
		return 0;
	if (index == g_slow_index && !__atomic_exchange_n(&g_slow_in, 1, __ATOMIC_ACQ_REL)) {
		struct timespec ts = { g_slow_ms / 1000, (long)(g_slow_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	} else if (g_jitter && mix64(index ^ now_ms()) % 4 == 0) {
		usleep((useconds_t)(mix64(index + now_ms()) % 200));
	}
	return 0;
}

static void run_cfg(size_t limit_pages, bool worker, bool readback)
{
	char path[256];
	struct zm_store_config cfg = {
		.nr_pages = NSLOT, .limit_bytes = limit_pages * PS, .backing_path = path,
		.recompress_codec = "zstd", .idle_after_ms = 20, .backing_readback = readback,
	};
	pthread_t tid[NT], tt;
	struct targ ta[NT];
	struct tarr tr = { 0 };
	struct zm_store_stats st;
	long puts = 0, gets = 0, exact = 0, discards = 0, nospc = 0;
	uint64_t file = 0, out[WORDS];
	int fd;

	snprintf(path, sizeof(path), "%s/zmem-tier-stress-XXXXXX",
		 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	for (int i = 0; i < NSLOT; i++)
		pthread_mutex_init(&g_slot_lock[i], NULL);
	memset(g_last, 0, sizeof(g_last));
	memset(g_published, 0, sizeof(g_published));
	assert_int_equal(zm_store_create(&cfg, &g_store), 0);
	unlink(path);   /* the store holds it open: gone however the test ends */
	g_stop = 0;
	g_deadline_ms = now_ms() + RUN_MS * (uint64_t)(test_soak() ? test_soak() : 1);
	pthread_create(&tt, NULL, tierer, &tr);
	for (int i = 0; i < NT; i++) {
		ta[i] = (struct targ){ .id = i };
		pthread_create(&tid[i], NULL, writer, &ta[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(tid[i], NULL);
		puts += ta[i].puts, gets += ta[i].gets, exact += ta[i].exact;
		discards += ta[i].discards, nospc += ta[i].nospc;
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(tt, NULL);
	zm_store_stats(g_store, &st);
	printf("limit %zu pages: %ld puts (%ld refused), %ld gets, %ld exact gets, %ld discards; tiering: "
	       "%ld marks, %ld recompressed by hand, %llu in all, %ld + %ld written back by "
	       "hand, %llu in all, %llu read back, %llu on file\n", limit_pages, puts, nospc, gets, exact,
	       discards, tr.marks, tr.recompressed,
	       (unsigned long long)st.recompressed_pages, tr.written, tr.pages_written,
	       (unsigned long long)st.bd_writes, (unsigned long long)st.bd_reads,
	       (unsigned long long)st.bd_count);
	for (int i = 0; i < NT; i++)
		assert_int_equal(ta[i].failures, 0);
	assert_int_equal(tr.failures, 0);

	/* every page is its last write */
	assert_int_equal(zm_store_check(g_store), 0);
	for (uint64_t i = 0; i < NSLOT; i++) {
		unsigned kind;

		assert_int_equal(zm_store_get(g_store, i, out), 0);
		if (out[0] != g_last[i] || check_page(out, i))
			fail_msg("slot %llu: cookie %#llx, its last write %#llx",
				 (unsigned long long)i, (unsigned long long)out[0],
				 (unsigned long long)g_last[i]);
		assert_int_equal(zm_store_slot_info(g_store, i, &kind, NULL, NULL), 0);
		assert_int_equal(kind == ZM_STORE_SLOT_EMPTY, g_last[i] == 0);
		file += kind == ZM_STORE_SLOT_FILE;
	}
	zm_store_stats(g_store, &st);
	assert_int_equal(st.bd_count, file);
	assert_int_equal(st.failed_reads, 0);
	assert_int_equal(st.failed_writes, (uint64_t)nospc);
	/* with a backing file and no writeback limit, a put is never refused */
	assert_int_equal(nospc, 0);
	/* the races this test is for happened; the worker recompressed too
	 * (where the limit leaves pages in memory long enough) */
	assert_true(st.bd_writes > 0 && st.bd_reads > 0);
	if (worker)
		assert_true(st.recompressed_pages > (uint64_t)tr.recompressed);
	assert_int_equal(zm_store_check(g_store), 0);
	zm_store_destroy(g_store);
	g_store = NULL;
	for (int i = 0; i < NSLOT; i++)
		pthread_mutex_destroy(&g_slot_lock[i]);
}

static void run(size_t limit_pages, bool worker)
{
	run_cfg(limit_pages, worker, false);
}

/* Room for what the writers keep hot: puts write back the cold rest. */
static void test_limit(void **state)
{
	run(320, true);
}

/* A limit of 160 pages: hardly more than the pages layer's per-thread
 * caches of five threads can hold, which is where puts must still find
 * room by writing back. */
static void test_small_limit(void **state)
{
	run(160, false);
}

/* Pages read back while reads from the file are slow at random: gets,
 * puts and discards of a page being read wait for it. */
static void test_readback_slow_reads(void **state)
{
	g_jitter = 1;
	zmi_store_backing_fault = slow_read;
	run_cfg(160, false, true);
	zmi_store_backing_fault = NULL;
	g_jitter = 0;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static uint64_t g_slow_got[WORDS];
static int g_slow_rc;

static void *slow_getter(void *arg)
{
	g_slow_rc = zm_store_get(g_store, 0, g_slow_got);
	return NULL;
}

/* Page 0 holds page, on file; a thread gets it, its read from the file
 * held for 300 ms: back once that read has begun. */
static pthread_t slow_read_begin(const uint64_t *page)
{
	pthread_t tid;

	assert_int_equal(zm_store_put(g_store, 0, page), 0);
	assert_int_equal(zm_store_writeback_page(g_store, 0), 0);
	g_slow_in = 0;
	g_slow_index = 0;
	g_slow_ms = 300;
	zmi_store_backing_fault = slow_read;
	pthread_create(&tid, NULL, slow_getter, NULL);
	while (!__atomic_load_n(&g_slow_in, __ATOMIC_ACQUIRE))
		usleep(1000);
	return tid;
}

/* The read of slow_read_begin is over: its thread has page 0 whole. */
static void slow_read_end(pthread_t tid, const uint64_t *page)
{
	pthread_join(tid, NULL);
	zmi_store_backing_fault = NULL;
	g_slow_index = UINT64_MAX;
	assert_int_equal(g_slow_rc, 0);
	assert_memory_equal(g_slow_got, page, PS);
}

/* A get of page 0 whose read from the file takes 300 ms; meanwhile this
 * thread does `op` on page 0.  No spinning lock is held across the read:
 * this thread waits for it asleep. */
static void slow_read_vs(int op)
{
	static uint64_t page[WORDS], page2[WORDS], out[WORDS];
	uint64_t c = st_cookie(0, 0, 1, 0), c2 = st_cookie(0, 0, 2, 0);
	uint64_t t0, c0, wall, cpu;
	pthread_t tid;

	st_page(page, c, ST_LZ4_HUGE);
	st_page(page2, c2, ST_LZ4_HUGE);
	tid = slow_read_begin(page);
	t0 = mono_ns();
	c0 = thread_cpu_ns();
	if (op == 'g')
		assert_int_equal(zm_store_get(g_store, 0, out), 0);
	else if (op == 'p')
		assert_int_equal(zm_store_put(g_store, 0, page2), 0);
	else
		assert_int_equal(zm_store_discard(g_store, 0, 1), 0);
	cpu = thread_cpu_ns() - c0;
	wall = mono_ns() - t0;
	slow_read_end(tid, page);
	printf("%s while a 300 ms read of the page: %.1f ms, %.2f ms of CPU\n",
	       op == 'g' ? "get" : op == 'p' ? "put" : "discard", (double)wall / 1e6,
	       (double)cpu / 1e6);
	if (op == 'g')
		assert_memory_equal(out, page, PS);
	assert_int_equal(zm_store_get(g_store, 0, out), 0);
	if (op == 'p')
		assert_memory_equal(out, page2, PS);
	else if (op == 'd')
		assert_true(out[0] == 0 && out[WORDS - 1] == 0);
	/* it waited for the read (100 ms of slack for a slow machine)... */
	assert_true(wall >= 100 * 1000000ull);
	/* ...asleep: a spinning wait would burn most of it */
	assert_true(cpu * 10 < wall);
}

#ifndef __SANITIZE_THREAD__  /* TSan's runtime does not follow a threaded fork */
/* A child forked while a thread of its parent reads page 0 from the
 * file inherits the slot BUSY with no reader to end it: the child's get
 * of it answers -EIO (the child is detached from the file), its put and
 * discard go through, and nothing waits for the read that is not there.
 * An alarm ends a child that hangs. */
static void slow_read_fork(void)
{
	static uint64_t page[WORDS], out[WORDS];
	uint64_t c = st_cookie(0, 0, 3, 0);
	pthread_t tid;
	int status;
	pid_t pid;

	st_page(page, c, ST_LZ4_HUGE);
	tid = slow_read_begin(page);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(5);
		_exit(zm_store_get(g_store, 0, out) != -EIO ? 2 :
		      zm_store_put(g_store, 0, page) ? 3 :
		      zm_store_get(g_store, 0, out) || memcmp(out, page, PS) ? 4 :
		      zm_store_discard(g_store, 0, 1) ? 5 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	slow_read_end(tid, page);
	printf("child forked during a read of the page: %s %d\n",
	       WIFEXITED(status) ? "exit" : "signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}
#endif

static void test_slow_read(void **state)
{
	char path[256];
	struct zm_store_config cfg = { .nr_pages = 8, .backing_path = path };
	int fd;

	snprintf(path, sizeof(path), "%s/zmem-tier-slow-XXXXXX",
		 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(zm_store_create(&cfg, &g_store), 0);
	unlink(path);
	slow_read_vs('g');
	slow_read_vs('p');
	slow_read_vs('d');
#ifndef __SANITIZE_THREAD__  /* TSan's runtime does not follow a threaded fork */
	slow_read_fork();
#endif
	assert_int_equal(zm_store_check(g_store), 0);
	zm_store_destroy(g_store);
	g_store = NULL;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slow_read),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_small_limit),
		cmocka_unit_test(test_readback_slow_reads),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("store_tier_stress", tests, NULL, NULL);
}
