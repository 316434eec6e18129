/*
 * zmem churn: what each allocator does with memory after a random part of
 * its objects is freed (background §4).
 *
 * The objects are the lz4-compressed pages of a corpus (as `zmem density`).
 * Each allocator runs in a child process of its own, so that resident
 * memory can be compared honestly: fill, free a random fraction, then
 * measure right after, after 100 ms and after 1 s, with no call from the
 * user in between.
 *
 *   zsmalloc        zmem's pool, automatic compaction on (the default)
 *   zsmalloc-off    the same, automatic compaction off
 *   malloc, jemalloc, mimalloc
 *                   malloc() of the same blobs (malloc: the C library's,
 *                   glibc; --allocator glibc too), the last two through
 *                   LD_PRELOAD (Debian's libjemalloc2, libmimalloc2.0)
 *   xvmalloc, xcfmalloc, zbud
 *                   zmem's other pool backends (none of them compacts)
 *
 * overhead = (resident memory - resident memory before filling) / live
 * object bytes, from /proc/self/statm; for zmem's pools also (pool + metadata
 * bytes) / live bytes from zm_pool_stats (the all-in overhead).  Resident
 * memory is the anonymous part (resident less file pages: the program's
 * and libraries' code paging in is no allocator's), and the base is taken
 * once the child's own arrays are written, so that they are not counted
 * as the allocator's (docs/results/2026-12-02-memory-back.md).
 *
 * --foreground adds the throughput table of the 2016 compaction proposal
 * (background §4): random malloc/free with
 * automatic compaction on and off, 1 and N threads, ops/s.
 */
#define ZMEM_ADVANCED  /* the advanced tier of the headers */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmem/pool.h>
#include "bench/benchmarks.h"
#include "bench/corpus.h"
#include "tool/json.h"
#include "tool/opt.h"

#define NALLOC 8
/* zsmalloc with its compactor, and the same pool without: the work's
 * bound is measured in the second (cmd_churn) */
enum { ZS_ON = 0, ZS_OFF = 1 };
/* "malloc": the C library's (glibc), the one the pool backend "malloc"
 * calls, so that the name means one allocator in every command; "glibc"
 * is taken for it too */
static const char *const names[NALLOC + 1] = { "zsmalloc", "zsmalloc-off", "malloc",
					       "jemalloc", "mimalloc", "xvmalloc",
					       "xcfmalloc", "zbud", NULL };
static const char *const choices[NALLOC + 2] = { "zsmalloc", "zsmalloc-off", "malloc",
						 "jemalloc", "mimalloc", "xvmalloc",
						 "xcfmalloc", "zbud", "glibc", NULL };
static const char *const preload[NALLOC] = { NULL, NULL, NULL, "libjemalloc.so.2",
					     "libmimalloc.so.2", NULL, NULL, NULL };

struct churn_row {
	char name[32];
	int ok;
	double rss_full, rss_free, rss_100, rss_1s;   /* overhead by RSS */
	double pool_full, pool_free, pool_100, pool_1s; /* by pool stats */
	double moved, pages, compact_ms, live_mb;
	double bound;   /* zsmalloc-off: the fewest objects any compaction
			   must move to free as many pages as zsmalloc's
			   compactor did (zm_pool_min_moves); -1 unknown */
};

/* ---- the child ---------------------------------------------------- */

/* ZM_CHURN_DEBUG: the anonymous mappings that hold resident memory, on
 * stderr, those of 64 KiB or more (ZM_CHURN_DEBUG=2: all); the rest
 * summed.  zmem's are told by their size: with the defaults the arena is
 * 4 GiB, zsmalloc's handle table 2 GiB, its zspage table 512 MiB, the
 * pages layer's records 8 MiB; [heap] holds what malloc gave (zspage
 * records, classes). */
static void smaps_dump(const char *when)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], head[512] = "";
	unsigned long size = 0, rss, anon = 0, small = 0;
	unsigned long min = getenv("ZM_CHURN_DEBUG")[0] == '2' ? 1 : 64;

	if (!f)
		return;
	fprintf(stderr, "anonymous resident memory %s (KiB):\n", when);
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');

		if (sscanf(line, "Size: %lu kB", &size) == 1)
			continue;
		if (sscanf(line, "Anonymous: %lu kB", &rss) == 1) {
			anon += rss;
			if (rss >= min)
				fprintf(stderr, "  %9lu of %10lu  %s", rss, size, head);
			else
				small += rss;
		} else if (!sp || sp[-1] != ':') {  /* a mapping's first line */
			snprintf(head, sizeof(head), "%s", line);
		}
	}
	fprintf(stderr, "  %9lu in smaller mappings; %lu in all\n", small, anon);
	fclose(f);
}

static double pool_over(struct zm_pool *p, uint64_t live)
{
	struct zm_pool_stats st;

	if (!p)
		return 0;
	zm_pool_stats(p, &st);
	return (double)(st.pool_bytes + st.meta_bytes) / (double)live;
}

/* One line of figures: resident memory, then the pool's stats, read one
 * after the other in that order and never as one call's arguments (whose
 * order the compiler picks), so that both describe one moment
 * (docs/results/2026-12-02-memory-back.md).  With ZM_CHURN_DEBUG, how
 * long the reading took and the RSS again after it. */
static void measure(const char *tag, struct zm_pool *p, size_t base, uint64_t bytes)
{
	uint64_t t0 = cli_now_ns(), t1;
	double rss = (double)(zmi_os_anon_bytes() - base) / (double)bytes;
	double pool = pool_over(p, bytes);

	t1 = cli_now_ns();
	printf("%s %.4f %.4f\n", tag, rss, pool);
	if (getenv("ZM_CHURN_DEBUG"))
		fprintf(stderr, "%s: RSS %.4f, pool %.4f, read in %.3f ms; RSS after %.4f\n", tag,
			rss, pool, (double)(t1 - t0) / 1e6,
			(double)(zmi_os_anon_bytes() - base) / (double)bytes);
}

int cmd_churn_child(int argc, char **argv)
{
	const char *which = argv[1], *path = argv[2];
	double fraction = atof(argv[3]);
	/* with compaction off: the pages to bound the work for */
	size_t bound_pages = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
	uint64_t seed = 42, live = 0, total = 0;
	struct zm_pool *pool = NULL;
	struct zm_pool_stats st;
	uint32_t *size;
	void **obj;
	size_t n = 0, base;
	FILE *f;
	char buf[4096];

	if (argc < 4)
		return 2;
	if (!strcmp(which, "jemalloc") && !dlsym(RTLD_DEFAULT, "mallctl"))
		return printf("unavailable\n"), 0;
	if (!strcmp(which, "mimalloc") && !dlsym(RTLD_DEFAULT, "mi_version"))
		return printf("unavailable\n"), 0;
	f = fopen(path, "rb");
	if (!f || fread(&n, sizeof(n), 1, f) != 1)
		return 1;
	size = malloc(n * sizeof(*size));
	obj = calloc(n, sizeof(*obj));
	if (!size || !obj || fread(size, sizeof(*size), n, f) != n)
		return 1;
	fclose(f);
	memset(buf, 0x5a, sizeof(buf));
	if (!strncmp(which, "zsmalloc", 8)) {
		struct zm_pool_config c = { .compact = strcmp(which, "zsmalloc-off") ?
						ZM_COMPACT_DEFAULT : ZM_COMPACT_OFF };

		if (zm_pool_create(&c, &pool))
			return 1;
	} else if (strcmp(which, "malloc") && strcmp(which, "jemalloc") &&
		   strcmp(which, "mimalloc")) {
		struct zm_pool_config c = { .allocator = which };

		if (zm_pool_create(&c, &pool))
			return printf("unavailable\n"), 0;
	}
	/* the child's own memory resident before the base: the handles'
	 * array written, stdout's buffer made */
	memset(obj, 0, n * sizeof(*obj));
	printf("objects %zu\n", n);
	fflush(stdout);
	base = zmi_os_anon_bytes();
	if (getenv("ZM_CHURN_DEBUG"))
		smaps_dump("before filling");
	for (size_t i = 0; i < n; i++) {
		if (pool) {
			zm_handle_t h = zm_pool_alloc(pool, size[i]);

			if (!h || zm_pool_write(pool, h, buf, size[i]))
				return 1;
			obj[i] = (void *)(uintptr_t)h;
		} else {
			obj[i] = malloc(size[i]);
			if (!obj[i])
				return 1;
			memset(obj[i], 0x5a, size[i]);
		}
		total += size[i];
	}
	measure("full", pool, base, total);
	for (size_t i = 0; i < n; i++) {
		if ((double)(zmi_rand(&seed) % 1000000) < fraction * 1e6) {
			if (pool)
				zm_pool_free(pool, (zm_handle_t)(uintptr_t)obj[i]);
			else
				free(obj[i]);
			obj[i] = NULL;
		} else {
			live += size[i];
		}
	}
	measure("free", pool, base, live);
	if (pool && bound_pages)  /* the pool as the frees left it: nothing moved */
		printf("bound %ld\n", zm_pool_min_moves(pool, bound_pages));
	usleep(100000);
	measure("100ms", pool, base, live);
	usleep(900000);
	measure("1s", pool, base, live);
	if (getenv("ZM_CHURN_DEBUG"))
		smaps_dump("at 1 s");
	if (pool) {
		zm_pool_stats(pool, &st);
		if (getenv("ZM_CHURN_DEBUG")) {
			fprintf(stderr, "%s at 1 s: pool %.4f (slots %.4f) meta %.4f (handles "
				"%.4f, records %.4f, page records %.4f) of live; %llu objects\n",
				which, (double)st.pool_bytes / (double)live,
				(double)st.slot_bytes / (double)live,
				(double)st.meta_bytes / (double)live,
				(double)st.handle_bytes / (double)live,
				(double)st.record_bytes / (double)live,
				(double)st.pages_meta_bytes / (double)live,
				(unsigned long long)st.objects);
			zm_pool_print_classes(pool, stderr);
		}
		printf("work %llu %llu %.3f %.3f\n", (unsigned long long)st.objects_moved,
		       (unsigned long long)st.pages_compacted, st.compact_ns / 1e6,
		       live / 1048576.0);
	} else {
		printf("work 0 0 0 %.3f\n", live / 1048576.0);
	}
	fflush(stdout);
	_exit(0);  /* no frees: the figures are taken */
}

/* ---- the parent --------------------------------------------------- */

static int run_child(int k, const char *path, double fraction, size_t bound_pages,
		     struct churn_row *r)
{
	int fd[2];
	pid_t pid;
	char line[256], frac[32], bp[32];
	FILE *in;

	memset(r, 0, sizeof(*r));
	r->bound = -1;
	snprintf(bp, sizeof(bp), "%zu", bound_pages);
	snprintf(r->name, sizeof(r->name), "%s", names[k]);
	snprintf(frac, sizeof(frac), "%.4f", fraction);
	if (pipe(fd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char *args[] = { "zmem", "churn-child", (char *)names[k], (char *)path, frac, bp,
				 NULL };

		dup2(fd[1], 1);
		close(fd[0]);
		if (preload[k])
			setenv("LD_PRELOAD", preload[k], 1);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(fd[1]);
	in = fdopen(fd[0], "r");
	while (in && fgets(line, sizeof(line), in)) {
		double a, b, c, d;

		if (!strncmp(line, "unavailable", 11))
			break;
		if (sscanf(line, "full %lf %lf", &a, &b) == 2)
			r->rss_full = a, r->pool_full = b;
		else if (sscanf(line, "free %lf %lf", &a, &b) == 2)
			r->rss_free = a, r->pool_free = b;
		else if (sscanf(line, "100ms %lf %lf", &a, &b) == 2)
			r->rss_100 = a, r->pool_100 = b;
		else if (sscanf(line, "1s %lf %lf", &a, &b) == 2)
			r->rss_1s = a, r->pool_1s = b;
		else if (sscanf(line, "bound %lf", &a) == 1)
			r->bound = a;
		else if (sscanf(line, "work %lf %lf %lf %lf", &a, &b, &c, &d) == 4) {
			r->moved = a, r->pages = b, r->compact_ms = c, r->live_mb = d;
			r->ok = 1;
		}
	}
	if (in)
		fclose(in);
	waitpid(pid, NULL, 0);
	return 0;
}

/* Write the corpus's sizes to a new temporary file for the children;
 * path is a mkstemp template.  0 or -EIO. */
static int write_sizes(const struct corpus *c, char *path)
{
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	int ok = f && fwrite(&c->n, sizeof(c->n), 1, f) == 1 &&
		 fwrite(c->size, sizeof(*c->size), c->n, f) == c->n;

	if (f && fclose(f))
		ok = 0;
	if (!ok) {
		if (fd >= 0)
			unlink(path);
		return -EIO;
	}
	return 0;
}

/* For zmem bench --churn: run every allocator on the default corpus (or
 * `corpus`) and give back one summary each. */
int churn_summary(double fraction, size_t target, const char *corpus,
		  struct churn_summary *out, int max)
{
	const char *paths[1] = { corpus };
	char path[] = "/tmp/zmem-churn-XXXXXX";
	struct corpus c;
	int n = 0;

	if (corpus_load(paths, corpus ? 1 : 0, target, &c))
		return -ENOENT;
	if (write_sizes(&c, path)) {
		corpus_free(&c);
		return -EIO;
	}
	for (int k = 0; k < NALLOC && n < max; k++) {
		struct churn_row r;

		run_child(k, path, fraction, 0, &r);
		if (!r.ok)
			continue;
		out[n] = (struct churn_summary){ .fraction = fraction };
		snprintf(out[n].name, sizeof(out[n].name), "%s", r.name);
		/* the all-in overhead where there is a pool, else resident */
		out[n].after_free = r.pool_free ? r.pool_free : r.rss_free;
		out[n].at_100ms = r.pool_100 ? r.pool_100 : r.rss_100;
		out[n].at_1s = r.pool_1s ? r.pool_1s : r.rss_1s;
		out[n].rss_1s = r.rss_1s;
		n++;
	}
	unlink(path);
	corpus_free(&c);
	return n;
}

/* ---- foreground cost ---------------------------------------------- */

/* Pairs of runs, on and off back to back: the ratio of each pair cancels
 * the drift of a shared machine, and their median its outliers (with 5
 * pairs and medians of each side, one run in a few read 0.70-0.72). */
#define FG_PAIRS 9

enum { FG_LIVE = 20000 };  /* objects per worker */

struct fg_job {
	struct zm_pool *pool;
	const struct corpus *c;
	zm_handle_t *h;          /* FG_LIVE handles */
	uint64_t seed, ops, cpu_ns;  /* cpu_ns: the thread's own CPU time */
	volatile int *stop;
	pthread_barrier_t *bar;  /* filled; all stopped; free what is left */
};

static void *fg_worker(void *arg)
{
	struct fg_job *j = arg;
	zm_handle_t *h = j->h;
	uint64_t s = j->seed, ops = 0;
	struct timespec c0, c1;

	/* fill the live set first: the first touch of the pool's pages (a
	 * page fault each, serialised between threads) is not the steady
	 * state */
	for (size_t i = 0; i < FG_LIVE; i++)
		h[i] = zm_pool_alloc(j->pool, j->c->size[zmi_rand(&s) % j->c->n]);
	pthread_barrier_wait(j->bar);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	while (!*j->stop) {
		size_t i = zmi_rand(&s) % FG_LIVE;

		if (h[i])
			zm_pool_free(j->pool, h[i]);
		h[i] = zm_pool_alloc(j->pool, j->c->size[zmi_rand(&s) % j->c->n]);
		ops += 2;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	j->ops = ops;
	j->cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000ull +
		    (uint64_t)c1.tv_nsec - (uint64_t)c0.tv_nsec;
	/* the timed part ends here: the frees below, which a compactor may
	 * well run beside (they take the pool down to nothing), are not
	 * the foreground's steady state */
	pthread_barrier_wait(j->bar);
	pthread_barrier_wait(j->bar);
	for (size_t i = 0; i < FG_LIVE; i++)
		if (h[i])
			zm_pool_free(j->pool, h[i]);
	return NULL;
}

/* Runs the foreground for 0.5 s; returns operations per second of wall
 * time, and in *per_cpu operations per second of the workers' own CPU
 * time (user and system: what other load on a shared machine does not
 * change), in *compactions the compaction passes that ran in those 0.5 s.
 * 0 (and *per_cpu 0) if the run could not be made. */
static double fg_run(const struct corpus *c, enum zm_compact_policy pol, int nt,
		     double *per_cpu, uint64_t *compactions)
{
	struct zm_pool_config cfg = { .compact = pol };
	struct zm_pool *pool;
	struct zm_pool_stats st0, st1;
	struct fg_job j[16];
	pthread_t t[16];
	volatile int stop = 0;
	uint64_t ops = 0, cpu = 0, t0, t1;
	pthread_barrier_t bar;
	zm_handle_t *h = calloc((size_t)nt * FG_LIVE, sizeof(*h));

	*per_cpu = 0;
	*compactions = 0;
	if (!h || zm_pool_create(&cfg, &pool)) {
		free(h);
		return 0;
	}
	pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++) {
		j[i] = (struct fg_job){ .pool = pool, .c = c, .h = h + (size_t)i * FG_LIVE,
					.seed = 99 + (uint64_t)i, .stop = &stop, .bar = &bar };
		pthread_create(&t[i], NULL, fg_worker, &j[i]);
	}
	pthread_barrier_wait(&bar);  /* every live set filled */
	zm_pool_stats(pool, &st0);
	t0 = cli_now_ns();
	usleep(500000);
	stop = 1;
	pthread_barrier_wait(&bar);
	t1 = cli_now_ns();
	zm_pool_stats(pool, &st1);
	*compactions = st1.compactions - st0.compactions;
	pthread_barrier_wait(&bar);
	for (int i = 0; i < nt; i++) {
		pthread_join(t[i], NULL);
		ops += j[i].ops;
		cpu += j[i].cpu_ns;
	}
	*per_cpu = cpu ? (double)ops * 1e9 / (double)cpu : 0;
	pthread_barrier_destroy(&bar);
	zm_pool_destroy(pool);
	free(h);
	return (double)ops * 1e9 / (double)(t1 - t0);
}

int cmd_churn(int argc, char **argv)
{
	const char *corpus[CORPUS_SOURCES], *only = NULL;
	size_t ncorpus = 0;
	int json = 0, fg = 0, wide = 0, nt = cli_ncpus(), rc, status = CLI_OK;
	double fraction = 0.75;
	size_t target = 60u << 20;
	struct corpus c = { 0 };
	struct churn_row rows[NALLOC];
	struct json j;
	char path[] = "/tmp/zmem-churn-XXXXXX";
	const struct opt table[] = {
		O_DOUBLE("fraction", 'f', &fraction, "F", "the part of the objects freed at random",
			 "0.75", 0, 1, .open = OPEN),
		O_SIZE("size", 's', &target, "SIZE", "compressed bytes of pages to read", "60M",
		       4096, (double)((uint64_t)4 << 30)),
		O_LIST("corpus", 'c', corpus, "PATH",
		       "read pages from this file or directory\n(repeatable)",
		       "/usr/lib, /usr/bin, /usr/share", &ncorpus, CORPUS_SOURCES),
		O_STR("allocator", 'a', &only, "NAME",
		      "only this one: zsmalloc, zsmalloc-off,\nmalloc (or glibc), jemalloc, "
		      "mimalloc,\nxvmalloc, xcfmalloc, zbud", "all", .choices = choices),
		O_FLAG("foreground", 0, &fg,
		       "also random malloc/free throughput with\nautomatic compaction on and off, "
		       "1..N threads"),
		O_FLAG("wide", 0, &wide,
		       "every column: the resident memory's overhead\nafter 100 ms "
		       "and the pool's after 100 ms too\n(more than 80 columns)"),
		O_FLAG("json", 'j', &json,
		       "one JSON document on stdout instead (with\nevery file read)"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"churn", "[OPTIONS]",
		"What each allocator does with memory after a random part of its objects is\n"
		"freed: each fills with the lz4-compressed pages of a corpus in a process of\n"
		"its own, frees --fraction of them, and its overhead (memory / live bytes)\n"
		"is read right after, after 100 ms and after 1 s.",
		table,
		"Without --corpus, the pages are the system's files under /usr/lib, /usr/bin\n"
		"and /usr/share, in directory order: the output names the directories and\n"
		"files read (--json: every file and its bytes), so a run can be repeated\n"
		"with --corpus.  jemalloc and mimalloc come through LD_PRELOAD\n"
		"(libjemalloc.so.2, libmimalloc.so.2) where they are installed.\n",
	};

	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (only && !strcmp(only, "glibc"))
		only = "malloc";
	rc = corpus_load_cmd("churn", corpus, (int)ncorpus, target, &c);
	if (rc)
		return rc;
	if (write_sizes(&c, path)) {
		corpus_free(&c);
		return cli_fail("churn", "cannot write %s", path);
	}
	for (int k = 0; k < NALLOC; k++) {
		if (only && strcmp(only, names[k])) {  /* not asked for: no row */
			memset(&rows[k], 0, sizeof(rows[k]));
			rows[k].bound = -1;
			continue;
		}
		cli_progress("%s", names[k]);
		/* zsmalloc-off follows zsmalloc: bound the work it did */
		run_child(k, path, fraction,
			  k == ZS_OFF && rows[ZS_ON].ok ? (size_t)rows[ZS_ON].pages : 0, &rows[k]);
	}
	unlink(path);
	cli_progress_done();
	if (json) {
		json_begin(&j, stdout, "churn");
		json_fixed(&j, "fraction", fraction, 3);
		json_uint(&j, "objects", c.n);
		json_uint(&j, "obj_bytes", c.bytes);
		corpus_json(&c, &j);
		json_array(&j, "results");
		for (int k = 0; k < NALLOC; k++) {
			struct churn_row *r = &rows[k];

			if (!r->ok)
				continue;
			json_object(&j, NULL);
			json_str(&j, "allocator", r->name);
			json_object(&j, "churn");
			json_fixed(&j, "fraction", fraction, 3);
			json_fixed(&j, "overhead_after_free", r->pool_free ? r->pool_free : r->rss_free,
				   4);
			json_fixed(&j, "overhead_100ms", r->pool_100 ? r->pool_100 : r->rss_100, 4);
			json_fixed(&j, "overhead_1s", r->pool_1s ? r->pool_1s : r->rss_1s, 4);
			json_object_end(&j);
			json_object(&j, "rss_overhead");
			json_fixed(&j, "full", r->rss_full, 4);
			json_fixed(&j, "after_free", r->rss_free, 4);
			json_fixed(&j, "100ms", r->rss_100, 4);
			json_fixed(&j, "1s", r->rss_1s, 4);
			json_object_end(&j);
			json_fixed(&j, "objects_moved", r->moved, 0);
			json_fixed(&j, "pages_compacted", r->pages, 0);
			json_fixed(&j, "compact_ms", r->compact_ms, 2);
			/* zsmalloc's row: the work's lower bound, measured in
			 * zsmalloc-off's pool */
			if (k == ZS_ON && rows[ZS_OFF].ok && rows[ZS_OFF].bound >= 0)
				json_fixed(&j, "objects_moved_bound", rows[ZS_OFF].bound, 0);
			json_object_end(&j);
		}
		json_array_end(&j);
	} else {
		printf("zmem churn: %zu objects, %.1f MiB of lz4-compressed pages; a random "
		       "%.0f%% freed,\nthen nothing.  overhead = memory / live object bytes: "
		       "by resident memory\n(RSS), and for zmem's pools by pool stats\n",
		       c.n, c.bytes / 1048576.0, fraction * 100);
		corpus_print(&c, stdout, "");
		printf("\n");
		/* 76 columns; --wide adds both 100 ms columns (98) */
		printf("%-13s %7s | %7s", "allocator", "full", "freed");
		if (wide)
			printf(" %7s", "100 ms");
		printf(" %7s | %7s", "1 s", "pool:fr");
		if (wide)
			printf(" %7s", "100 ms");
		printf(" %7s | %9s %8s\n", "1 s", "moved", "pages");
		for (int k = 0; k < NALLOC; k++) {
			struct churn_row *r = &rows[k];

			if (!r->ok) {
				if (!only)
					printf("%-13s (not available)\n", r->name);
				continue;
			}
			printf("%-13s %7.3f | %7.3f", r->name, r->rss_full, r->rss_free);
			if (wide)
				printf(" %7.3f", r->rss_100);
			printf(" %7.3f | ", r->rss_1s);
			if (r->pool_free) {
				printf("%7.3f", r->pool_free);
				if (wide)
					printf(" %7.3f", r->pool_100);
				printf(" %7.3f | %9.0f %8.0f\n", r->pool_1s, r->moved, r->pages);
			} else {
				printf("%7s", "-");
				if (wide)
					printf(" %7s", "-");
				printf(" %7s | %9s %8s\n", "-", "-", "-");
			}
		}
		if (rows[ZS_ON].ok && rows[ZS_ON].pages) {
			printf("\nzsmalloc: %.0f objects moved for %.0f pages freed "
			       "(%.2f per page),\n%.1f ms compacting\n", rows[ZS_ON].moved, rows[ZS_ON].pages,
			       rows[ZS_ON].moved / rows[ZS_ON].pages, rows[ZS_ON].compact_ms);
			if (rows[ZS_OFF].ok && rows[ZS_OFF].bound >= 0)
				printf("lower bound: %.0f objects (%.2f per page): those starting "
				       "on the %.0f pages\nwhere the fewest start, in the same pool "
				       "right after the frees (zsmalloc-off);\nmoved / bound = %.2f\n",
				       rows[ZS_OFF].bound, rows[ZS_OFF].bound / rows[ZS_ON].pages, rows[ZS_ON].pages,
				       rows[ZS_OFF].bound > 0 ? rows[ZS_ON].moved / rows[ZS_OFF].bound : 0);
		}
	}
	if (fg) {
		double on[FG_PAIRS], off[FG_PAIRS], onc[FG_PAIRS], offc[FG_PAIRS];
		double rat[FG_PAIRS], ratc[FG_PAIRS];

		if (json)
			json_array(&j, "foreground");
		else
			printf("\nForeground: random malloc/free of the same sizes, automatic compaction "
			       "on vs off\n(%d pairs of runs of 0.5 s back to back, each side first in "
			       "turn; ops per second\nof wall time and of the workers' own CPU time: "
			       "medians, and the median of the\npairs' ratios; passes: compaction "
			       "passes that ran in the timed 0.5 s of the runs\nwith it on, all pairs)\n"
			       "%7s %10s %10s %6s | %10s %10s %6s | %6s\n", FG_PAIRS,
			       "threads", "on", "off", "on/off", "on/cpu-s", "off/cpu-s", "on/off",
			       "passes");
		for (int t = 1; t <= nt; t++) {
			double a, b, ac, bc, r1, r2;
			uint64_t passes = 0, none;
			int n = 0;

			/* interleaved, each going first in turn: the first of a
			 * pair ran measurably slower here; a pair with a run
			 * that could not be made is left out */
			for (int r = 0; r < FG_PAIRS; r++) {
				double x, y, xc, yc;
				uint64_t k;

				cli_progress("foreground: %d thread%s, pair %d of %d", t,
					     t > 1 ? "s" : "", r + 1, FG_PAIRS);
				if (r % 2)
					y = fg_run(&c, ZM_COMPACT_OFF, t, &yc, &none);
				x = fg_run(&c, ZM_COMPACT_DEFAULT, t, &xc, &k);
				if (!(r % 2))
					y = fg_run(&c, ZM_COMPACT_OFF, t, &yc, &none);
				passes += k;
				if (x <= 0 || y <= 0 || xc <= 0 || yc <= 0)
					continue;
				on[n] = x, off[n] = y, onc[n] = xc, offc[n] = yc;
				rat[n] = x / y;
				ratc[n] = xc / yc;
				n++;
			}
			cli_progress_done();
			if (!n) {
				status = cli_fail("churn", "no foreground run could be made");
				break;
			}
			a = cli_median(on, (size_t)n);
			b = cli_median(off, (size_t)n);
			ac = cli_median(onc, (size_t)n);
			bc = cli_median(offc, (size_t)n);
			r1 = cli_median(rat, (size_t)n);
			r2 = cli_median(ratc, (size_t)n);
			if (json) {
				json_object(&j, NULL);
				json_int(&j, "threads", t);
				json_fixed(&j, "ops_on", a, 0);
				json_fixed(&j, "ops_off", b, 0);
				json_fixed(&j, "ratio", r1, 4);
				json_fixed(&j, "ops_per_cpu_s_on", ac, 0);
				json_fixed(&j, "ops_per_cpu_s_off", bc, 0);
				json_fixed(&j, "cpu_ratio", r2, 4);
				json_int(&j, "pairs", n);
				json_uint(&j, "compaction_passes", passes);
				json_object_end(&j);
			}
			else
				printf("%7d %10.0f %10.0f %6.3f | %10.0f %10.0f %6.3f | %6llu\n", t, a,
				       b, r1, ac, bc, r2, (unsigned long long)passes);
		}
		if (json)
			json_array_end(&j);
	}
	if (json)
		json_end(&j);
	corpus_free(&c);
	return status;
}
