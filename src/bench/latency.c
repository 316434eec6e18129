/*
 * zmem allocbench --latency: how long single operations wait while the
 * pool compacts itself and the pages layer trims, against the same work
 * with both off.
 *
 * A round: a zsmalloc pool over a pages instance of its own, shared by
 * --threads threads (default 2).  Each thread fills --bytes of objects of
 * realistic compressed sizes (allocbench's mix), writing each; all free a
 * random --free percent (default 75) of theirs, which leaves sparse
 * zspages in every class; then for --ms (default 1000) each thread loops
 * over: free a random live object, allocate one in its place (and write
 * its first 8 bytes, not timed), map a random live object read-only,
 * check those 8 bytes and unmap it.  Each of the three -- free, alloc,
 * map+unmap -- is timed alone with the time stamp counter (rdtsc before,
 * rdtscp after; the counter's rate is taken against CLOCK_MONOTONIC at
 * start), into a histogram of 64 steps per power of two (percentiles
 * within 1.6%; the maximum is exact).  The timer's own cost, the median
 * of an empty timed region, is measured and printed: it is inside every
 * figure, not subtracted; the same empty region timed in the loop ("empty")
 * shows what the machine itself adds to the tail.
 *
 * "on": the pool's default background compaction (ZM_COMPACT_RATIO: the
 * mass free crosses its threshold, and it compacts while the timed loop
 * runs) and the pages layer's default reserve (free pages beyond 1 MiB
 * a zone go back to the OS).  "off": ZM_COMPACT_OFF and a reserve that
 * never trims.  --rounds pairs of rounds, on and off back to back, each
 * side first in turn; percentiles are over all rounds of a side.  The
 * objects the compactor moved and its passes inside the timed windows
 * are printed, to show it ran.
 *
 * "hog": the machine's ceiling for background work of that much CPU.
 * After each pair, a third round with compaction and trimming off as in
 * "off", and a thread of its own that only works (32 KiB copies within a
 * buffer of its own, no memory of the pool; the compactor copies too),
 * for as much CPU time as the "on" round's background work
 * used (the process's CPU time less the timed threads'), in bursts as
 * long as that work's passes on average.  On two CPUs with two timed
 * threads, any such work preempts them; hog/off is what that alone costs,
 * and on/hog what compaction costs beyond it (waiting for zspages the
 * compactor holds, its barriers' interrupts, the caches it disturbs).
 *
 * Parts: the p99.9 ratios also for the loop's first --settle ms (default
 * 250), while the compactor's episode that the mass free started runs
 * and the pages it freed are trimmed and taken again, and for the rest,
 * steady churn; each op lands in the part its loop iteration began in.
 *
 * Lock holds: the longest hold of a class lock, of a zone lock and of
 * any other lock inside the timed windows (zm_lock_hold; builds with
 * ZM_DEBUG >= 1 only, "n/a (release build)" otherwise).
 */
#define ZMEM_ADVANCED  /* zm_lock_hold */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmem/pages.h>
#include <zmem/pool.h>
#include "base/cpu.h"
#include "bench/benchmarks.h"
#include "tool/json.h"
#include "tool/opt.h"

#define MAXT 16
#define DEF_THREADS 2
#define DEF_ROUNDS 3             /* pairs */
#define MAX_ROUNDS 50
#define DEF_MS 1000
#define DEF_BYTES ((size_t)32 << 20)  /* per thread, before the free */
#define DEF_FREE 75
/* The timed loop is also reported in two parts: its first DEF_SETTLE ms,
 * while the compactor's episode that the mass free started runs, and the
 * rest, steady churn.  250 ms: the episode of the default round was over
 * by then in the runs that chose it (docs/results/2026-12-03-latency.md). */
#define DEF_SETTLE 250
#define MEAN_SIZE 1500           /* about the mix's mean, for the arrays */

/* OP_EMPTY: an empty timed region in the same loop, the machine's own
 * floor: its tail is the interruptions and preemptions every operation
 * may meet (on a shared 2-CPU VM, milliseconds) */
enum op { OP_ALLOC, OP_FREE, OP_MAP, OP_EMPTY, NOP };
static const char *const op_names[NOP] = { "alloc", "free", "map+unmap", "empty" };
enum { SIDE_ON, SIDE_OFF, SIDE_HOG, NSIDE };
static const char *const side_names[NSIDE] = { "on", "off", "hog" };
static const char *const kind_names[ZM_LOCK_KINDS] = { "class", "zone", "other", "compactor" };
static const char *const on_names[] = { "both", "compact", "trim" };

/* ---- the histogram: 64 steps per power of two ---------------------- */

#define HSUB 6
#define HLIN (2u << HSUB)        /* below this, one bucket per ns */
#define HBUCKETS (HLIN + (40u - HSUB - 1) * (1u << HSUB))

struct hist {
	uint64_t n, max;
	uint32_t b[HBUCKETS];
};

static unsigned bucket_of(uint64_t v)
{
	unsigned e;

	if (v < HLIN)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);   /* >= HSUB + 1 */
	if (e >= 40)
		return HBUCKETS - 1;
	return HLIN + (e - HSUB - 1) * (1u << HSUB) +
	       (unsigned)((v >> (e - HSUB)) & ((1u << HSUB) - 1));
}

/* The middle of bucket i, in ns. */
static double bucket_mid(unsigned i)
{
	unsigned e, sub;
	double lo, w;

	if (i < HLIN)
		return i;
	e = (i - HLIN) / (1u << HSUB) + HSUB + 1;
	sub = (i - HLIN) % (1u << HSUB);
	w = (double)(1ull << (e - HSUB));
	lo = (double)(1ull << e) + sub * w;
	return lo + w / 2;
}

static inline void hist_add(struct hist *h, uint64_t v)
{
	h->b[bucket_of(v)]++;
	h->n++;
	if (v > h->max)
		h->max = v;
}

static void hist_merge(struct hist *into, const struct hist *h)
{
	for (unsigned i = 0; i < HBUCKETS; i++)
		into->b[i] += h->b[i];
	into->n += h->n;
	if (h->max > into->max)
		into->max = h->max;
}

/* The q-quantile (0 < q < 1), ns; the exact maximum for the tail's last. */
static double hist_q(const struct hist *h, double q)
{
	uint64_t want = (uint64_t)(q * (double)h->n), seen = 0;

	if (!h->n)
		return 0;
	for (unsigned i = 0; i < HBUCKETS; i++) {
		seen += h->b[i];
		if (seen > want) {
			double m = bucket_mid(i);

			return m > (double)h->max ? (double)h->max : m;
		}
	}
	return (double)h->max;
}

/* ---- the timer ------------------------------------------------------ */

static inline uint64_t t_start(void)
{
	return zmi_cpu_ticks();
}

static inline uint64_t t_end(void)
{
	return zmi_cpu_ticks_after();
}

/* ns per tick, in 32.32 fixed point, from 20 ms against the clock. */
static uint64_t calibrate(void)
{
	uint64_t n0 = cli_now_ns(), t0 = t_start(), n1, t1;

	do
		n1 = cli_now_ns(), t1 = t_start();
	while (n1 - n0 < 20000000);
	return (uint64_t)(((double)(n1 - n0) / (double)(t1 - t0)) * 4294967296.0);
}

static inline uint64_t to_ns(uint64_t ticks, uint64_t scale)
{
	return (uint64_t)(((unsigned __int128)ticks * scale) >> 32);
}

/* ---- a round -------------------------------------------------------- */

struct opts {
	int threads, rounds, json;
	enum { ON_BOTH, ON_COMPACT, ON_TRIM } on;  /* what the "on" side has */
	int ms, free_pct, settle;
	int trace;                   /* ms between the "on" side's trace lines, 0: none */
	size_t bytes;
};

/* A worker's and a side's histograms: the whole loop, its first --settle
 * ms, the rest. */
enum { PART_ALL, PART_FIRST, PART_REST, NPART };
static const char *const part_names[NPART] = { "all", "first", "rest" };

struct worker {
	struct zm_pool *pool;
	pthread_barrier_t *bar;      /* filled; freed; timed loop over */
	volatile int *stop;
	const struct opts *o;
	uint64_t seed, scale;
	zm_handle_t *h;
	size_t cap, live;
	struct hist *hist;           /* NPART * NOP of them */
	uint64_t fails, bad;         /* allocations refused; cookies wrong */
	uint64_t cpu_ns;             /* its CPU time in the timed loop */
};

static uint64_t cpu_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The hog side's thread: works `burst` ns, sleeps `period` - `burst`.
 * Its work is steps of a fixed size, a copy of HOG_STEP bytes (the most a
 * compactor's step copies under one hold: ZS_STEP_BYTES), each timed by
 * the thread's CPU clock as the compactor's holds are (ZM_DEBUG builds):
 * how long a step that small reads on this machine is the ceiling for
 * the target that no hold lasts over 100 us. */
#define HOG_STEP 32768
struct hog {
	volatile int *stop;
	uint64_t burst, period;
	uint64_t steps, max_ns, over_100us;   /* the hog's, read after the join */
};

static void *hog_main(void *arg)
{
	struct hog *g = arg;
	char *a = malloc(2 * HOG_STEP);

	if (!a)
		return NULL;
	memset(a, 1, 2 * HOG_STEP);
	while (!*g->stop) {
		uint64_t t0 = cli_now_ns();

		while (cli_now_ns() - t0 < g->burst && !*g->stop) {
			uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), d;

			memcpy(a + (g->steps & 1) * HOG_STEP, a + !(g->steps & 1) * HOG_STEP, HOG_STEP);
			__asm__ volatile("" : : "r"(a) : "memory");
			d = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
			g->steps++;
			g->over_100us += d > 100000;
			if (d > g->max_ns)
				g->max_ns = d;
		}
		if (g->period > g->burst) {
			uint64_t ns = g->period - g->burst;
			struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

			nanosleep(&ts, NULL);
		}
	}
	free(a);
	return NULL;
}

static inline uint64_t cookie(zm_handle_t h)
{
	return h * 0x9E3779B97F4A7C15ull;
}

/* Allocate and write an object of a mixed size; 0 if refused. */
static zm_handle_t fill_one(struct worker *w, uint64_t *s, char *buf)
{
	size_t size = bench_comp_size(s);
	zm_handle_t h = zm_pool_alloc(w->pool, size);
	uint64_t c = cookie(h);

	if (!h)
		return 0;
	memcpy(buf, &c, sizeof(c));
	zm_pool_write(w->pool, h, buf, size);
	return h;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = w->seed, bytes = 0;
	char buf[4096];

	memset(buf, 0x5a, sizeof(buf));
	/* fill, then free a random part */
	while (bytes < w->o->bytes && w->live < w->cap) {
		uint64_t s0 = s;
		zm_handle_t h = fill_one(w, &s, buf);

		if (!h) {
			w->fails++;
			break;
		}
		w->h[w->live++] = h;
		bytes += bench_comp_size(&s0);
	}
	pthread_barrier_wait(w->bar);
	for (size_t i = 0; i < w->live;) {
		if (zmi_rand(&s) % 100 < (uint64_t)w->o->free_pct) {
			zm_pool_free(w->pool, w->h[i]);
			w->h[i] = w->h[--w->live];
		} else {
			i++;
		}
	}
	pthread_barrier_wait(w->bar);
	w->cpu_ns = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	/* ticks = ns * 2^32 / scale */
	uint64_t rest_from = t_start() + (uint64_t)(((unsigned __int128)w->o->settle * 1000000u
						    << 32) / w->scale);
	/* the timed loop: free, alloc, map+unmap, each timed alone */
	while (w->live && !*w->stop) {
		size_t k = zmi_rand(&s) % w->live;
		size_t size = bench_comp_size(&s);
		uint64_t t0, t1, c, v;
		zm_handle_t h;
		void *p;
		struct hist *part = w->hist + (t_start() < rest_from ? PART_FIRST : PART_REST) * NOP;

		t0 = t_start();
		zm_pool_free(w->pool, w->h[k]);
		t1 = t_end();
		hist_add(&w->hist[OP_FREE], to_ns(t1 - t0, w->scale));
		hist_add(&part[OP_FREE], to_ns(t1 - t0, w->scale));
		t0 = t_start();
		h = zm_pool_alloc(w->pool, size);
		t1 = t_end();
		hist_add(&w->hist[OP_ALLOC], to_ns(t1 - t0, w->scale));
		hist_add(&part[OP_ALLOC], to_ns(t1 - t0, w->scale));
		if (!h) {
			w->fails++;
			w->h[k] = w->h[--w->live];
			continue;
		}
		c = cookie(h);
		zm_pool_write(w->pool, h, &c, sizeof(c));
		w->h[k] = h;
		h = w->h[zmi_rand(&s) % w->live];
		t0 = t_start();
		p = zm_pool_map(w->pool, h, ZM_MAP_RO);
		if (p) {
			memcpy(&v, p, sizeof(v));
			zm_pool_unmap(w->pool, h);
		}
		t1 = t_end();
		hist_add(&w->hist[OP_MAP], to_ns(t1 - t0, w->scale));
		hist_add(&part[OP_MAP], to_ns(t1 - t0, w->scale));
		if (!p || v != cookie(h))
			w->bad++;
		t0 = t_start();
		t1 = t_end();
		hist_add(&w->hist[OP_EMPTY], to_ns(t1 - t0, w->scale));
		hist_add(&part[OP_EMPTY], to_ns(t1 - t0, w->scale));
	}
	w->cpu_ns = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - w->cpu_ns;
	pthread_barrier_wait(w->bar);
	while (w->live)
		zm_pool_free(w->pool, w->h[--w->live]);
	return NULL;
}

/* What a side gathers over its rounds. */
struct side {
	struct hist part[NPART][NOP];  /* [PART_ALL]: the whole loop */
	uint64_t moved, passes, pages_compacted, trimmed, prefaulted, refilled, fails, bad;
	uint64_t bg_cpu_ns, window_ns; /* CPU time beside the timed threads' */
	uint64_t hog_burst_ns;       /* hog: the bursts it spun */
	uint64_t hog_steps, hog_step_max_ns, hog_step_over_100us; /* hog: its timed steps */
	int lock_ok;                 /* zm_lock_hold answered (debug build) */
	struct zm_lock_hold lock[ZM_LOCK_KINDS];
};

/* --trace: the "on" side's timed loop, told every o->trace ms on stderr
 * (stdout keeps the table or the JSON): the pool's pages, what the pages
 * layer holds free and resident, and the counts since the loop began.
 * Each line's stats take every zone's and class's lock once, and their
 * CPU time counts as the "on" side's background work, which sizes the
 * hog's bursts: a traced run is not one to quote. */
static void trace_loop(const struct opts *o, struct zm_pool *pool, struct zm_pages *pg,
		       const struct zm_pool_stats *st0, const struct zm_pages_stats *ps0,
		       uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)o->ms * 1000000u;

	fprintf(stderr, "%7s %9s %9s %9s %9s %9s %9s %7s\n", "ms", "in_use", "free_res",
		"trimmed", "in_calls", "ahead", "moved", "passes");
	for (uint64_t next = t0; next < end;) {
		struct zm_pages_stats ps;
		struct zm_pool_stats st;
		uint64_t now = cli_now_ns();

		next += (uint64_t)o->trace * 1000000u;
		if (next > end)
			next = end;
		if (next > now)
			usleep((useconds_t)((next - now) / 1000u));
		zm_pages_stats(pg, &ps);
		zm_pool_stats(pool, &st);
		fprintf(stderr, "%7.1f %9zu %9zu %9llu %9llu %9llu %9llu %7llu\n",
			(double)(cli_now_ns() - t0) / 1e6, ps.in_use, ps.reserve,
			(unsigned long long)(ps.trimmed_pages - ps0->trimmed_pages),
			(unsigned long long)(ps.prefaulted_pages - ps0->prefaulted_pages),
			(unsigned long long)(ps.refilled_pages - ps0->refilled_pages),
			(unsigned long long)(st.objects_moved - st0->objects_moved),
			(unsigned long long)(st.compactions - st0->compactions));
	}
}

/* One round of a side; hog spins as long as `ref` (the "on" round's
 * side so far) used beside its timed threads.  0, or -1 after a message. */
static int round_run(const struct opts *o, int side, uint64_t scale, uint64_t seed,
		     struct side *sd, const struct side *ref)
{
	int on = side == SIDE_ON;
	int trim = on && o->on != ON_COMPACT, compact = on && o->on != ON_TRIM;
	struct hog hog = { 0 };
	pthread_t hog_t;
	uint64_t cpu0, t0, fg = 0;
	/* prefault as a pool's own pages instance does (zm_pool_create):
	 * pages taken are made resident in the pages layer, not faulted in
	 * by the first write */
	struct zm_pages_config pc = { .reserve_pages = trim ? 0 : SIZE_MAX, .prefault = 1 };
	struct zm_pages *pg;
	struct zm_pool *pool;
	struct zm_pool_stats st0, st1;
	struct zm_pages_stats ps0, ps1;
	struct worker w[MAXT];
	pthread_t t[MAXT];
	pthread_barrier_t bar;
	volatile int stop = 0;
	size_t cap = o->bytes / MEAN_SIZE * 2 + 16;
	int rc, nt = o->threads;

	if ((rc = zm_pages_create(&pc, &pg))) {
		cli_fail("allocbench", "pages: %s", strerror(-rc));
		return -1;
	}
	{
		struct zm_pool_config c = { .pages = pg,
					    .compact = compact ? ZM_COMPACT_DEFAULT : ZM_COMPACT_OFF };

		if ((rc = zm_pool_create(&c, &pool))) {
			cli_fail("allocbench", "pool: %s", strerror(-rc));
			zm_pages_destroy(pg);
			return -1;
		}
	}
	pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++) {
		w[i] = (struct worker){ .pool = pool, .bar = &bar, .stop = &stop, .o = o,
					.seed = seed + (uint64_t)i * 7919, .scale = scale,
					.cap = cap };
		w[i].h = malloc(cap * sizeof(zm_handle_t));
		w[i].hist = calloc(NPART * NOP, sizeof(struct hist));
		if (!w[i].h || !w[i].hist) {
			exit(cli_fail("allocbench", "out of memory"));
		}
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	pthread_barrier_wait(&bar);   /* filled */
	pthread_barrier_wait(&bar);   /* freed: the timed loop starts */
	zm_pool_stats(pool, &st0);
	zm_pages_stats(pg, &ps0);
	zm_lock_hold_reset();
	if (side == SIDE_HOG && ref->bg_cpu_ns) {
		uint64_t bursts = ref->passes ? ref->passes : 1;

		hog.stop = &stop;
		hog.burst = ref->bg_cpu_ns / bursts;
		if (hog.burst < 20000)
			hog.burst = 20000;
		hog.period = (uint64_t)((double)hog.burst * (double)ref->window_ns /
					(double)ref->bg_cpu_ns);
		sd->hog_burst_ns = hog.burst;
		pthread_create(&hog_t, NULL, hog_main, &hog);
	}
	cpu0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	t0 = cli_now_ns();
	if (o->trace && side == SIDE_ON)
		trace_loop(o, pool, pg, &st0, &ps0, t0);
	else
		usleep((useconds_t)o->ms * 1000u);
	stop = 1;
	pthread_barrier_wait(&bar);   /* the loops are over */
	sd->window_ns += cli_now_ns() - t0;
	for (int i = 0; i < nt; i++)
		fg += w[i].cpu_ns;
	cpu0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	sd->bg_cpu_ns += cpu0 > fg ? cpu0 - fg : 0;
	if (hog.stop) {
		pthread_join(hog_t, NULL);
		sd->hog_steps += hog.steps;
		sd->hog_step_over_100us += hog.over_100us;
		if (hog.max_ns > sd->hog_step_max_ns)
			sd->hog_step_max_ns = hog.max_ns;
	}
	for (int k = 0; k < ZM_LOCK_KINDS; k++) {
		struct zm_lock_hold lh;

		sd->lock_ok = zm_lock_hold((enum zm_lock_kind)k, &lh) == 0;
		if (sd->lock_ok && lh.max_ns > sd->lock[k].max_ns) {
			sd->lock[k].max_ns = lh.max_ns;
			sd->lock[k].site = lh.site;
		}
		if (sd->lock_ok) {
			sd->lock[k].over_10us += lh.over_10us;
			sd->lock[k].over_100us += lh.over_100us;
			sd->lock[k].holds += lh.holds;
		}
	}
	zm_pool_stats(pool, &st1);
	zm_pages_stats(pg, &ps1);
	for (int i = 0; i < nt; i++) {
		pthread_join(t[i], NULL);
		for (int pt = 0; pt < NPART; pt++)
			for (int k = 0; k < NOP; k++)
				hist_merge(&sd->part[pt][k], &w[i].hist[pt * NOP + k]);
		sd->fails += w[i].fails;
		sd->bad += w[i].bad;
		free(w[i].h);
		free(w[i].hist);
	}
	sd->moved += st1.objects_moved - st0.objects_moved;
	sd->passes += st1.compactions - st0.compactions;
	sd->pages_compacted += st1.pages_compacted - st0.pages_compacted;
	sd->trimmed += ps1.trimmed_pages - ps0.trimmed_pages;
	sd->prefaulted += ps1.prefaulted_pages - ps0.prefaulted_pages;
	sd->refilled += ps1.refilled_pages - ps0.refilled_pages;
	pthread_barrier_destroy(&bar);
	zm_pool_destroy(pool);
	zm_pages_destroy(pg);
	return 0;
}

/* The median cost of an empty timed region, ns. */
static double timer_cost(uint64_t scale)
{
	struct hist *h = calloc(1, sizeof(*h));
	double q;

	if (!h)
		return 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t t0 = t_start(), t1 = t_end();

		hist_add(h, to_ns(t1 - t0, scale));
	}
	q = hist_q(h, 0.5);
	free(h);
	return q;
}

/* ---- options and the report ------------------------------------------ */

/* 0; -1 after --help; CLI_USAGE after the message */
static int parse(int argc, char **argv, struct opts *o)
{
	static const char *const ons[] = { "both", "compact", "trim", NULL };
	const char *on = "both";
	int latency = 0, rc;
	char tdef[16], rdef[16], mdef[16], fdef[16], sdef[16];
	const struct opt table[] = {
		O_FLAG("latency", 0, &latency, "this benchmark (not allocbench's tables)"),
		O_INT("threads", 't', &o->threads, "N", "threads on the pool", tdef, 1, MAXT),
		O_INT("rounds", 'r', &o->rounds, "N", "rounds of each side (on, off, hog)", rdef, 1,
		      MAX_ROUNDS),
		O_DUR("ms", 0, &o->ms, "DURATION", "the timed loop of a round (bare: ms)", mdef, 1,
		      1, 1000000),
		O_SIZE("bytes", 'b', &o->bytes, "SIZE", "objects each thread fills before the free",
		       "32M", 4096, 0),
		O_INT("free", 0, &o->free_pct, "PCT", "percent of them freed at random", fdef, 0, 99),
		O_DUR("settle", 0, &o->settle, "DURATION",
		      "also report the loop's first DURATION apart\nfrom the rest (bare: ms)", sdef,
		      1, 0, 1000000),
		O_STR("on", 0, &on, "WHAT",
		      "what the \"on\" side switches on: both,\ncompact (compaction only) or trim "
		      "(the\npages layer's trimming only)", "both", .choices = ons),
		O_DUR("trace", 0, &o->trace, "DURATION",
		      "every DURATION of the \"on\" side's loops,\nits pages and counts on stderr "
		      "(the\nstats calls take every lock: not for\ntiming; bare: ms)", "0", 1, 0,
		      1000000),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the table"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"allocbench", "--latency [OPTIONS]",
		"Single-operation latency (alloc, free, map+unmap) on threads sharing one\n"
		"zsmalloc pool after a mass free, with background compaction and the pages\n"
		"layer's trimming on and off, alternated: p50, p99, p99.9, max.",
		table, NULL,
	};

	*o = (struct opts){ .threads = DEF_THREADS, .rounds = DEF_ROUNDS, .ms = DEF_MS,
			    .bytes = DEF_BYTES, .free_pct = DEF_FREE, .settle = DEF_SETTLE };
	snprintf(tdef, sizeof(tdef), "%d", DEF_THREADS);
	snprintf(rdef, sizeof(rdef), "%d", DEF_ROUNDS);
	snprintf(mdef, sizeof(mdef), "%d", DEF_MS);
	snprintf(fdef, sizeof(fdef), "%d", DEF_FREE);
	snprintf(sdef, sizeof(sdef), "%d", DEF_SETTLE);
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	o->on = !strcmp(on, "compact") ? ON_COMPACT : !strcmp(on, "trim") ? ON_TRIM : ON_BOTH;
	return 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static double share(const struct side *sd)
{
	return ratio((double)sd->bg_cpu_ns, (double)sd->window_ns);
}

/* p99.9 of op k on side sd in part pt. */
static double p999(const struct side *sd, int pt, int k)
{
	return hist_q(&sd->part[pt][k], 0.999);
}

static void report(const struct opts *o, const struct side sd[NSIDE], double timer)
{
	double q[NSIDE][NOP][4];

	for (int s = 0; s < NSIDE; s++)
		for (int k = 0; k < NOP; k++) {
			q[s][k][0] = hist_q(&sd[s].part[PART_ALL][k], 0.5);
			q[s][k][1] = hist_q(&sd[s].part[PART_ALL][k], 0.99);
			q[s][k][2] = hist_q(&sd[s].part[PART_ALL][k], 0.999);
			q[s][k][3] = (double)sd[s].part[PART_ALL][k].max;
		}
	if (o->json) {
		struct json j;

		json_begin(&j, stdout, "allocbench");
		json_str(&j, "mode", "latency");
		json_str(&j, "allocator", "zsmalloc");
		json_int(&j, "threads", o->threads);
		json_int(&j, "rounds", o->rounds);
		json_int(&j, "round_ms", o->ms);
		json_uint(&j, "bytes_per_thread", o->bytes);
		json_int(&j, "free_pct", o->free_pct);
		json_str(&j, "on", on_names[o->on]);
		json_fixed(&j, "timer_ns", timer, 1);
		json_array(&j, "results");
		for (int s = 0; s < NSIDE; s++)
			for (int k = 0; k < NOP; k++) {
				json_object(&j, NULL);
				json_str(&j, "op", op_names[k]);
				json_str(&j, "compaction", side_names[s]);
				json_uint(&j, "ops", sd[s].part[PART_ALL][k].n);
				json_fixed(&j, "p50_ns", q[s][k][0], 0);
				json_fixed(&j, "p99_ns", q[s][k][1], 0);
				json_fixed(&j, "p999_ns", q[s][k][2], 0);
				json_fixed(&j, "max_ns", q[s][k][3], 0);
				json_object_end(&j);
			}
		json_array_end(&j);
		json_object(&j, "ratio_p999");
		for (int k = 0; k < OP_EMPTY; k++)
			json_fixed(&j, op_names[k], ratio(q[0][k][2], q[1][k][2]), 3);
		json_object_end(&j);
		json_object(&j, "ratio_p999_hog");   /* hog/off: the ceiling */
		for (int k = 0; k < OP_EMPTY; k++)
			json_fixed(&j, op_names[k], ratio(q[SIDE_HOG][k][2], q[SIDE_OFF][k][2]), 3);
		json_object_end(&j);
		json_int(&j, "settle_ms", o->settle);
		json_array(&j, "parts");  /* the loop's first --settle ms, and the rest */
		for (int pt = PART_FIRST; pt < NPART; pt++) {
			json_object(&j, NULL);
			json_str(&j, "part", part_names[pt]);
			json_object(&j, "ops");
			for (int k = 0; k < OP_EMPTY; k++)
				json_uint(&j, op_names[k], sd[SIDE_ON].part[pt][k].n);
			json_object_end(&j);
			json_object(&j, "ratio_p999");
			for (int k = 0; k < OP_EMPTY; k++)
				json_fixed(&j, op_names[k], ratio(p999(&sd[SIDE_ON], pt, k),
								  p999(&sd[SIDE_OFF], pt, k)), 3);
			json_object_end(&j);
			json_object(&j, "ratio_p999_hog");
			for (int k = 0; k < OP_EMPTY; k++)
				json_fixed(&j, op_names[k], ratio(p999(&sd[SIDE_HOG], pt, k),
								  p999(&sd[SIDE_OFF], pt, k)), 3);
			json_object_end(&j);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_array(&j, "sides");
		for (int s = 0; s < NSIDE; s++) {
			json_object(&j, NULL);
			json_str(&j, "compaction", side_names[s]);
			json_uint(&j, "objects_moved", sd[s].moved);
			json_uint(&j, "compactions", sd[s].passes);
			json_uint(&j, "pages_compacted", sd[s].pages_compacted);
			json_uint(&j, "pages_trimmed", sd[s].trimmed);
			json_uint(&j, "pages_prefaulted", sd[s].prefaulted);
			json_uint(&j, "pages_refilled", sd[s].refilled);
			json_uint(&j, "failed_allocs", sd[s].fails);
			json_uint(&j, "bad_reads", sd[s].bad);
			json_fixed(&j, "background_cpu", share(&sd[s]), 4);
			json_fixed(&j, "hog_burst_us", sd[s].hog_burst_ns / 1e3, 1);
			json_uint(&j, "hog_steps", sd[s].hog_steps);
			json_uint(&j, "hog_step_max_ns", sd[s].hog_step_max_ns);
			json_uint(&j, "hog_steps_over_100us", sd[s].hog_step_over_100us);
			if (!sd[s].lock_ok) {
				json_null(&j, "lock_hold");
			} else {
				json_array(&j, "lock_hold");
				for (int k = 0; k < ZM_LOCK_KINDS; k++) {
					json_object(&j, NULL);
					json_str(&j, "kind", kind_names[k]);
					json_uint(&j, "max_ns", sd[s].lock[k].max_ns);
					json_str(&j, "site", sd[s].lock[k].site ? sd[s].lock[k].site : "");
					json_uint(&j, "over_10us", sd[s].lock[k].over_10us);
					json_uint(&j, "over_100us", sd[s].lock[k].over_100us);
					json_uint(&j, "holds", sd[s].lock[k].holds);
					json_object_end(&j);
				}
				json_array_end(&j);
			}
			json_object_end(&j);
		}
		json_array_end(&j);
		json_end(&j);
		return;
	}
	printf("zmem allocbench --latency: zsmalloc, %d threads on one pool, each filling\n"
	       "%.0f MiB of mixed sizes and freeing %d%% at random, then free + alloc +\n"
	       "map+unmap for %d ms; %d round%s each with %s on\nand off, alternated.  "
	       "ns per operation; the timer (rdtsc/rdtscp, %.0f ns for an\nempty region) "
	       "is included.\n\n",
	       o->threads, o->bytes / 1048576.0, o->free_pct, o->ms, o->rounds,
	       o->rounds > 1 ? "s" : "", o->on == ON_BOTH ? "compaction and trimming" :
	       o->on == ON_COMPACT ? "compaction (trimming off both sides)" :
	       "trimming (compaction off both sides)", timer);
	printf("%-10s %-4s %10s %8s %8s %9s %10s\n", "op", "side", "ops", "p50", "p99", "p99.9",
	       "max");
	for (int k = 0; k < NOP; k++)
		for (int s = 0; s < NSIDE; s++)
			printf("%-10s %-4s %10llu %8.0f %8.0f %9.0f %10.0f\n", op_names[k],
			       side_names[s], (unsigned long long)sd[s].part[PART_ALL][k].n, q[s][k][0],
			       q[s][k][1], q[s][k][2], q[s][k][3]);
	printf("\np99.9 on/off:  ");
	for (int k = 0; k < OP_EMPTY; k++)
		printf("  %s %.2f", op_names[k], ratio(q[SIDE_ON][k][2], q[SIDE_OFF][k][2]));
	printf("\np99.9 hog/off: ");
	for (int k = 0; k < OP_EMPTY; k++)
		printf("  %s %.2f", op_names[k], ratio(q[SIDE_HOG][k][2], q[SIDE_OFF][k][2]));
	printf("   (the ceiling)\np99.9 on/hog:  ");
	for (int k = 0; k < OP_EMPTY; k++)
		printf("  %s %.2f", op_names[k], ratio(q[SIDE_ON][k][2], q[SIDE_HOG][k][2]));
	for (int pt = PART_FIRST; pt < NPART && o->settle > 0 && o->settle < o->ms; pt++) {
		printf(pt == PART_FIRST ? "\np99.9 on/off, the first %4d ms:" :
					  "\np99.9 on/off, after %4d ms:    ", o->settle);
		for (int k = 0; k < OP_EMPTY; k++)
			printf("  %s %.2f", op_names[k], ratio(p999(&sd[SIDE_ON], pt, k),
							       p999(&sd[SIDE_OFF], pt, k)));
		printf("  (hog/off");
		for (int k = 0; k < OP_EMPTY; k++)
			printf(" %.2f", ratio(p999(&sd[SIDE_HOG], pt, k), p999(&sd[SIDE_OFF], pt, k)));
		printf(")");
	}
	printf("\nbackground CPU beside the timed threads: on %.1f%%, off %.1f%%, hog %.1f%%\n"
	       "(bursts of %.0f us)\n", 100 * share(&sd[SIDE_ON]), 100 * share(&sd[SIDE_OFF]),
	       100 * share(&sd[SIDE_HOG]), sd[SIDE_HOG].hog_burst_ns / 1e3);
	for (int s = 0; s < NSIDE; s++) {
		printf("%-3s: %llu objects moved in %llu passes (%llu pages), %llu pages trimmed,\n"
		       "     %llu made resident in calls (%llu ahead), %llu failed allocs, "
		       "%llu bad reads\n",
		       side_names[s], (unsigned long long)sd[s].moved,
		       (unsigned long long)sd[s].passes, (unsigned long long)sd[s].pages_compacted,
		       (unsigned long long)sd[s].trimmed, (unsigned long long)sd[s].prefaulted,
		       (unsigned long long)sd[s].refilled,
		       (unsigned long long)sd[s].fails, (unsigned long long)sd[s].bad);
	}
	printf("hog steps: %llu copies of %d KiB timed by the thread's CPU clock, longest\n"
	       "%.1f us, %llu over 100 us (the ceiling for the compactor's holds)\n",
	       (unsigned long long)sd[SIDE_HOG].hog_steps, HOG_STEP / 1024,
	       sd[SIDE_HOG].hog_step_max_ns / 1e3,
	       (unsigned long long)sd[SIDE_HOG].hog_step_over_100us);
	printf("\nlongest lock hold in the timed loops:\n");
	for (int s = 0; s < NSIDE; s++) {
		printf("  %-3s:", side_names[s]);
		if (!sd[s].lock_ok) {
			printf(" n/a (release build)\n");
			continue;
		}
		for (int k = 0; k < ZM_LOCK_KINDS; k++) {
			char n[48] = "";

			if (sd[s].lock[k].holds)
				snprintf(n, sizeof(n), " of %llu",
					 (unsigned long long)sd[s].lock[k].holds);
			printf("  %s %.1f us (%s; %llu >= 10 us, %llu >= 100 us%s)%s", kind_names[k],
			       sd[s].lock[k].max_ns / 1e3,
			       sd[s].lock[k].site ? sd[s].lock[k].site : "-",
			       (unsigned long long)sd[s].lock[k].over_10us,
			       (unsigned long long)sd[s].lock[k].over_100us, n,
			       k + 1 < ZM_LOCK_KINDS ? "\n       " : "\n");
		}
	}
	if (sd[0].lock_ok)
		printf("(class, zone, other: wall time, a preempted holder's too; compactor: its "
		       "CPU\ntime in its class lock holds)\n");
}

int allocbench_latency(int argc, char **argv)
{
	struct opts o;
	struct side *sd;
	uint64_t scale;
	double timer;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	sd = calloc(NSIDE, sizeof(*sd));
	if (!sd)
		return cli_fail("allocbench", "out of memory");
	scale = calibrate();
	timer = timer_cost(scale);
	for (int r = 0; r < o.rounds; r++) {
		/* the sides in turns (the first of a pair ran slower
		 * elsewhere: zmem churn --foreground), hog after on, whose
		 * background CPU it copies */
		static const int order[3][NSIDE] = { { SIDE_ON, SIDE_OFF, SIDE_HOG },
						      { SIDE_OFF, SIDE_ON, SIDE_HOG },
						      { SIDE_ON, SIDE_HOG, SIDE_OFF } };

		for (int i = 0; i < NSIDE; i++) {
			int side = order[r % 3][i];

			cli_progress("round %d of %d, %s", r + 1, o.rounds, side_names[side]);
			if (round_run(&o, side, scale, 1000 + (uint64_t)r * 104729, &sd[side],
				      &sd[SIDE_ON])) {
				free(sd);
				return CLI_FAIL;
			}
		}
	}
	cli_progress_done();
	report(&o, sd, timer);
	free(sd);
	return 0;
}
