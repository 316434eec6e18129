/*
 * zmem regionbench: compressed regions (region.h) against plain memory and
 * against the kernel's own compressed swap, on the same traces, side by
 * side in one run.
 *
 * Every trace works on SIZE bytes of pages.  First the pages are filled in
 * order with the --data set (page i gets data page i modulo the data's
 * pages), then the trace runs; each access reads one 8-byte word of a
 * page, and --writes PCT of them write it back plus one:
 *
 *   seq      sequential passes over the pages
 *   random   uniform random pages
 *   hot      --hot A/P: A% of the accesses go to P% of the pages, the hot
 *            pages spread over the region by a seeded permutation
 *   heap     a heap that grows (the fill), frees a random half of its
 *            pages (zm_region_discard; madvise(MADV_DONTNEED) elsewhere),
 *            grows again into them (new content), then the hot trace over
 *            its pages
 *   table    what a program keeps: a chained hash table of records (a
 *            64-bit key, the next record's offset, a value of 128..888
 *            bytes of the --data set) laid end to end by a bump allocator
 *            (the fill); then lookups by key, --hot A/P of them on P% of
 *            the records, --writes PCT updating the value in place; every
 *            lookup checks the record's key and its value's checksum
 *            against a copy kept outside the memory measured, and one
 *            wrong record fails the run
 *
 * --threads LIST: each trace runs once per count; each thread has its own
 * contiguous part of the pages (its own table) and its share of the
 * accesses; the same seed and count give every side the same accesses,
 * so the pages end with the same bytes on every side, which is checked (a
 * hash of every page, against plain memory's with the same count).  Each
 * count's ops/s is set against the smallest count's, side by side, plain
 * memory's ratio being the machine's ceiling in the same run.
 *
 * The sides:
 *   plain         anonymous memory, no limit: the floor
 *   region auto   a region with --resident LIMIT, the default policy
 *   region fifo   the same, ZM_REGION_POLICY_FIFO: the baseline cold
 *                 selection is measured against (--policy both)
 *   kernel zram   --kernel (root): plain memory in a child process in a
 *                 memory cgroup limited to LIMIT, a zram device of its
 *                 own as the only swap in use (the highest priority)
 *   kernel zswap  the same with a swap file and zswap enabled, where the
 *                 kernel has zswap
 *
 * Every access is timed alike on every side (the monotonic clock around
 * the access), into a histogram: the fault latency columns are the
 * percentiles of the accesses that took SLOW_NS or more, the ones that
 * faulted, since a fault is all that can make a one-word access that slow
 * (the kernel's faults cannot be seen otherwise).  Faults: the region's
 * own counters (first touch, refault, write-protect); the kernel's major
 * faults (getrusage) for the kernel sides.
 *
 * --fault-cost: the cost of one touch of a compressed page: one thread,
 * every page compressed (zm_region_reclaim), then touched once each in
 * random order, timed after the first LIMIT's worth (from there on the
 * region is at its limit and each fault also evicts); the same on a
 * region never written (first touches: what the kernel's part of a fault
 * costs), on plain memory, and with --kernel in the cgroup with zram
 * (everything pushed to swap first by lowering the limit for a moment).
 *
 * Exit status: 0, 1 (a failure or pages that came out wrong), 2 (usage),
 * 77 (no userfaultfd here: nothing measured; tests skip on it).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/region.h>
#include <zmem/store.h>
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "bench/kswap.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define DEF_SIZE ((size_t)64 << 20)  /* all four traces on three sides in
					well under 20 s on 2 cores */
#define DEF_PER_PAGE 4               /* accesses per page by default */
#define DEF_WRITES 25
#define DEF_SEED 20261205
#define DATA_MAX ((size_t)64 << 20)  /* the data set repeats past this */
#define SLOW_NS 1024                 /* an access this slow faulted */
#define LAT_SUB 16                   /* histogram: sub-buckets per power of 2 */
#define LAT_BUCKETS (61 * LAT_SUB)
#define MAX_THREADS 64
#define MAX_TC 8                     /* thread counts in --threads LIST */
#define THREADS_TARGET 1.6           /* N threads against the base count */
#define EXIT_NO_UFFD 77
#define MIB 1048576.0

enum trace { T_SEQ, T_RANDOM, T_HOT, T_HEAP, T_TABLE, NTRACES };
enum side { S_PLAIN, S_AUTO, S_FIFO, S_ZRAM, S_ZSWAP, NSIDES };

static const char *const trace_names[NTRACES] = { "seq", "random", "hot", "heap", "table" };
static const char *const side_names[NSIDES] = { "plain", "region auto", "region fifo",
						"kernel zram", "kernel zswap" };
static const char *const side_keys[NSIDES] = { "plain", "region-auto", "region-fifo",
					       "kernel-zram", "kernel-zswap" };

struct opts {
	const char *data, *codec, *allocator, *plot, *dir;
	size_t size, resident;
	uint64_t accesses, seed;
	unsigned hot_access, hot_pages, writes;
	unsigned unit_pages;            /* the regions' store's (store.h) */
	unsigned tc[MAX_TC], ntc;       /* --threads LIST, ascending; tc[0]: the base */
	unsigned threads;               /* the largest count */
	bool traces[NTRACES], sides[NSIDES];
	int json, kernel, fault_cost, wait, wide;
	int corrupt;                    /* hidden, for the tests: the regions' tables
					   are damaged after the fill */
};

/* One trace on one side. */
struct row {
	bool ran, verified;
	double time_s, fill_s;
	uint64_t ops, faults, slow;
	double p50, p99, p999;          /* us, of the slow accesses */
	uint64_t peak_resident, compressed, total;
	uint64_t pool;                  /* the region's pool (pool_bytes) */
	/* the region's own figures */
	uint64_t faults_first, faults_refault, faults_wp, refaults_young, evictions;
	double handler_p50, handler_p99; /* us, its fault histogram */
	uint64_t hash;
	uint64_t bad;                   /* table: lookups that found a wrong record */
	char bad_what[160];             /* the first of them */
	char note[128];
};

/* Every trace and side, for one thread count. */
typedef struct row rowset[NTRACES][NSIDES];

/* ---- access latencies ----------------------------------------------- */

static unsigned lat_bucket(uint64_t ns)
{
	unsigned e;

	if (ns < LAT_SUB)
		return (unsigned)ns;
	e = 63u - (unsigned)__builtin_clzll(ns);
	if (e > 63 - 4)
		return LAT_BUCKETS - 1;
	return (e - 3) * LAT_SUB + (unsigned)((ns >> (e - 4)) & (LAT_SUB - 1));
}

static double lat_value(unsigned b)
{
	unsigned e, sub;

	if (b < LAT_SUB)
		return b;
	e = b / LAT_SUB + 3;
	sub = b % LAT_SUB;
	/* the bucket's middle */
	return ((double)(LAT_SUB + sub) + 0.5) * (double)((uint64_t)1 << (e - 4));
}

/* The q-quantile (0..1) of the samples at or above min_ns, in us; 0 if none. */
static double lat_quantile(const uint64_t *h, uint64_t min_ns, double q)
{
	unsigned from = lat_bucket(min_ns);
	uint64_t n = 0, want, seen = 0;

	for (unsigned b = from; b < LAT_BUCKETS; b++)
		n += h[b];
	if (!n)
		return 0;
	want = (uint64_t)(q * (double)n);
	if (want >= n)
		want = n - 1;
	for (unsigned b = from; b < LAT_BUCKETS; b++) {
		seen += h[b];
		if (seen > want)
			return lat_value(b) / 1000.0;
	}
	return 0;
}

/* The region's fault histogram (log2 buckets): the q-quantile in us. */
static double hist2_quantile(const uint64_t *h, double q)
{
	uint64_t n = 0, want, seen = 0;

	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++)
		n += h[i];
	if (!n)
		return 0;
	want = (uint64_t)(q * (double)n);
	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++) {
		seen += h[i];
		if (seen > want)
			return 1.5 * (double)((uint64_t)1 << i) / 1000.0;
	}
	return 0;
}

/* ---- the traces ----------------------------------------------------- */

struct job {
	const struct opts *o;
	const struct bench_data *d;
	enum trace t;
	uint8_t *base;
	size_t ps, npages, ndata;
	struct zm_region *r;            /* NULL: plain memory */
	unsigned nt;                    /* threads */
	pthread_barrier_t bar;
};

struct worker {
	struct job *j;
	unsigned id;
	pthread_t th;
	uint64_t ops, sink;
	int err;
	/* the table trace: its buckets at tb, nb of them; the records'
	 * value checksums, outside the memory measured */
	size_t tb, nb, nrec, to;
	uint64_t *sums, bad;
	char bad_what[160];
	uint64_t hist[LAT_BUCKETS];
};

static void fill_page(const struct job *j, size_t i, size_t shift)
{
	memcpy(j->base + i * j->ps, j->d->buf + ((i + shift) % j->ndata) * j->ps, j->ps);
}

static void drop_page(struct worker *w, size_t i)
{
	const struct job *j = w->j;
	int rc = j->r ? zm_region_discard(j->r, i * j->ps, j->ps) :
			madvise(j->base + i * j->ps, j->ps, MADV_DONTNEED) ? -errno : 0;

	if (rc && !w->err)
		w->err = rc;
}

/* One access, timed. */
static inline void access_page(struct worker *w, size_t i, uint64_t rnd, bool wr)
{
	const struct job *j = w->j;
	volatile uint64_t *p = (volatile uint64_t *)(j->base + i * j->ps) +
			       rnd % (j->ps / sizeof(uint64_t));
	uint64_t t0 = cli_now_ns(), v;

	v = *p;
	if (wr)
		*p = v + 1;
	w->hist[lat_bucket(cli_now_ns() - t0)]++;
	w->sink += v;
}

/* Pages lo..lo+m-1 in a seeded order: perm[0..m) */
static uint32_t *shuffled(size_t lo, size_t m, uint64_t *s)
{
	uint32_t *perm = malloc((m ? m : 1) * sizeof(*perm));

	if (!perm)
		return NULL;
	for (size_t i = 0; i < m; i++)
		perm[i] = (uint32_t)(lo + i);
	for (size_t i = m; i > 1; i--) {
		size_t k = (size_t)(zmi_rand(s) % i);
		uint32_t x = perm[i - 1];

		perm[i - 1] = perm[k], perm[k] = x;
	}
	return perm;
}


/* ---- the table trace: a chained hash table built in the memory ------- */

/* A record: its key, the offset of the next record of its chain (from
 * the base; 0 ends the chain: offset 0 is a bucket, never a record), and
 * a value of VAL_MIN..VAL_MAX bytes of the data set (text-like), laid end
 * to end by a bump allocator, 8-byte aligned. */
struct rec {
	uint64_t key, next;
	uint32_t len, pad;
	uint64_t val[];
};

#define VAL_MIN 128
#define VAL_STEPS 96                 /* lengths VAL_MIN + 8 * (0..95): 128..888 */
#define VAL_AVG (VAL_MIN + 4 * VAL_STEPS)
#define VAL_WRITE 4                  /* words an update overwrites */

/* Record idx of thread id: keys unique (zmi_mix64 is a bijection). */
static uint64_t table_key(const struct worker *w, size_t idx)
{
	return zmi_mix64(zmi_mix64(w->j->o->seed) ^ ((uint64_t)w->id << 40) ^ idx);
}

static uint32_t table_len(uint64_t key)
{
	return VAL_MIN + 8 * (uint32_t)(zmi_mix64(key) % VAL_STEPS);
}

static uint64_t val_sum(const uint64_t *v, uint32_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (uint32_t i = 0; i < len / 8; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h;
}

/* Fill the thread's part [from, to) of the memory: the buckets, then
 * records until the next would not fit. */
static int table_build(struct worker *w, size_t from, size_t to)
{
	const struct job *j = w->j;
	size_t est = (to - from) / (sizeof(struct rec) + VAL_AVG) + 1, nb = 1, off, idx;
	uint64_t *buckets;

	while (nb < est)
		nb <<= 1;
	w->sums = malloc(((to - from) / (sizeof(struct rec) + VAL_MIN) + 1) * sizeof(*w->sums));
	if (!w->sums)
		return -ENOMEM;
	w->tb = from, w->nb = nb, w->to = to;
	buckets = (uint64_t *)(j->base + from);
	memset(buckets, 0, nb * sizeof(*buckets));
	off = from + nb * sizeof(*buckets);
	for (idx = 0;; idx++) {
		uint64_t key = table_key(w, idx);
		uint32_t len = table_len(key);
		size_t src = (size_t)(zmi_mix64(key ^ 1) % (j->d->len - len)) & ~(size_t)7;
		struct rec *r = (struct rec *)(j->base + off);

		if (off + sizeof(*r) + len > to)
			break;
		r->key = key, r->len = len, r->pad = 0;
		memcpy(r->val, j->d->buf + src, len);
		r->next = buckets[key & (nb - 1)];
		buckets[key & (nb - 1)] = off;
		w->sums[idx] = val_sum(r->val, len);
		off += sizeof(*r) + len;
	}
	w->nrec = idx;
	if (j->o->corrupt && j->r)
		for (size_t p = from; p < to; p += j->ps)
			j->base[p + j->ps / 2] ^= 0x20;
	return 0;
}

static void table_bad(struct worker *w, size_t idx, uint64_t key, size_t off, const char *what)
{
	if (!w->bad++)
		snprintf(w->bad_what, sizeof(w->bad_what),
			 "thread %u, record %zu, key %016llx at offset %zu: %s", w->id, idx,
			 (unsigned long long)key, off, what);
}

/* Look record idx up by its key, check it, maybe update its value; timed. */
static void table_lookup(struct worker *w, size_t idx, uint64_t rnd, bool wr)
{
	const struct job *j = w->j;
	uint64_t t0 = cli_now_ns(), key = table_key(w, idx), sum;
	const uint64_t *buckets = (const uint64_t *)(j->base + w->tb);
	size_t off = buckets[key & (w->nb - 1)], lo = w->tb + w->nb * sizeof(uint64_t), steps = 0;
	struct rec *r = NULL;

	for (; off; off = r->next) {
		/* a wrong offset must not be followed out of the part */
		if (off < lo || off % 8 || off + sizeof(*r) > w->to || ++steps > w->nrec) {
			table_bad(w, idx, key, off, "a chain leads out of the table");
			return;
		}
		r = (struct rec *)(j->base + off);
		if (r->key == key)
			break;
	}
	if (!off) {
		table_bad(w, idx, key, 0, "not found");
		return;
	}
	if (r->len != table_len(key) || off + sizeof(*r) + r->len > w->to) {
		table_bad(w, idx, key, off, "the value's length is wrong");
		return;
	}
	sum = val_sum(r->val, r->len);
	if (sum != w->sums[idx]) {
		table_bad(w, idx, key, off, "the value's checksum is wrong");
		return;
	}
	if (wr) {
		/* VAL_WRITE words of other text, in place */
		uint32_t words = r->len / 8, at = (uint32_t)(rnd % (words - VAL_WRITE + 1));
		size_t src = (size_t)((rnd >> 20) % (j->d->len - 8 * VAL_WRITE));

		memcpy(&r->val[at], j->d->buf + src, 8 * VAL_WRITE);
		w->sums[idx] = val_sum(r->val, r->len);
	}
	w->hist[lat_bucket(cli_now_ns() - t0)]++;
	w->sink += sum;
}

/* The items lo .. lo + m - 1 in a random order, the first *nhot of them
 * (hot_pages% of m, at least one) the hot set; NULL (w->err set) without
 * memory. */
static uint32_t *hot_set(struct worker *w, size_t lo, size_t m, uint64_t *s, size_t *nhot)
{
	uint32_t *perm = shuffled(lo, m, s);

	if (!perm) {
		w->err = -ENOMEM;
		return NULL;
	}
	*nhot = m * w->j->o->hot_pages / 100;
	if (!*nhot)
		*nhot = 1;
	return perm;
}

/* An item of the hot set (the first nhot of perm) for hot_access% of the
 * draws, of the rest otherwise; a and b: two random words. */
static size_t pick_hot(const struct opts *o, const uint32_t *perm, size_t nhot, size_t m,
		       uint64_t a, uint64_t b)
{
	if (nhot == m || (a & 0xffff) % 100 < o->hot_access)
		return perm[b % nhot];
	return perm[nhot + b % (m - nhot)];
}

static void run_table(struct worker *w, uint64_t n, uint64_t *s)
{
	const struct opts *o = w->j->o;
	size_t m = w->nrec, nhot;
	uint32_t *perm;

	if (!m || !(perm = hot_set(w, 0, m, s, &nhot)))
		return;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t a = zmi_rand(s), b = zmi_rand(s);
		bool wr = (a >> 32) % 100 < o->writes;
		table_lookup(w, pick_hot(o, perm, nhot, m, a, b), a >> 16, wr);
	}
	w->ops += n;
	free(perm);
}

static void run_trace(struct worker *w, size_t lo, size_t m, uint64_t n, uint64_t *s)
{
	const struct opts *o = w->j->o;
	enum trace t = w->j->t;
	uint32_t *perm = NULL;
	size_t nhot = 0;

	if (t == T_TABLE) {
		run_table(w, n, s);
		return;
	}
	if (t == T_HEAP) {
		/* free a random half, grow again into it */
		perm = shuffled(lo, m, s);
		if (!perm) {
			w->err = -ENOMEM;
			return;
		}
		for (size_t k = 0; k < m / 2; k++)
			drop_page(w, perm[k]);
		for (size_t k = 0; k < m / 2; k++)
			fill_page(w->j, perm[k], 1);
		w->ops += m / 2 * 2;
		free(perm);
		perm = NULL;
	}
	if ((t == T_HOT || t == T_HEAP) && !(perm = hot_set(w, lo, m, s, &nhot)))
		return;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t a = zmi_rand(s), b = zmi_rand(s);
		bool wr = (a >> 32) % 100 < o->writes;
		size_t i;

		switch (t) {
		case T_SEQ:
			i = lo + (size_t)(k % m);
			break;
		case T_RANDOM:
			i = lo + (size_t)(b % m);
			break;
		default:
			i = pick_hot(o, perm, nhot, m, a, b);
			break;
		}
		access_page(w, i, a >> 16, wr);
	}
	w->ops += n;
	free(perm);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j = w->j;
	unsigned nt = j->nt;
	size_t lo = j->npages * w->id / nt, hi = j->npages * (w->id + 1) / nt;
	uint64_t n = j->o->accesses / nt + (w->id < j->o->accesses % nt);
	uint64_t s = zmi_mix64(j->o->seed * 0x9E3779B97F4A7C15ull + w->id * 1000003u + j->t) | 1;

	if (j->t == T_TABLE) {
		w->err = table_build(w, lo * j->ps, hi * j->ps);
	} else {
		for (size_t i = lo; i < hi; i++)
			fill_page(j, i, 0);
	}
	pthread_barrier_wait(&j->bar);  /* filled */
	pthread_barrier_wait(&j->bar);  /* go */
	if (hi > lo && !w->err)
		run_trace(w, lo, hi - lo, n, &s);
	return NULL;
}

static uint64_t hash_pages(const uint8_t *base, size_t len)
{
	const uint64_t *p = (const uint64_t *)base;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len / 8; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* Hooks around the trace, for the side's own counters. */
struct hooks {
	void (*before)(void *ctx);   /* after the fill, before the trace */
	void (*after)(void *ctx);    /* after the trace */
	void *ctx;
};

/* Fill and run the trace on base with j->nt threads; time, ops and the
 * latencies into w; -EBADMSG if a table lookup found a wrong record. */
static int run_job(struct job *j, const struct hooks *hk, struct row *w)
{
	struct worker *ws = calloc(j->nt, sizeof(*ws));
	uint64_t t0, t1, t2, hist[LAT_BUCKETS] = { 0 };
	unsigned nt = j->nt, started = 0;
	int rc = 0;

	if (!ws || pthread_barrier_init(&j->bar, NULL, nt + 1)) {
		free(ws);
		return -ENOMEM;
	}
	t0 = cli_now_ns();
	for (unsigned i = 0; i < nt; i++) {
		ws[i].j = j;
		ws[i].id = i;
		if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]))
			break;
		started++;
	}
	if (started < nt) {
		/* cannot meet the barrier: the workers started wait forever */
		fprintf(stderr, "zmem regionbench: cannot start %u threads\n", nt);
		exit(CLI_FAIL);
	}
	pthread_barrier_wait(&j->bar);
	w->fill_s = (double)(cli_now_ns() - t0) / 1e9;
	if (hk && hk->before)
		hk->before(hk->ctx);
	t1 = cli_now_ns();
	pthread_barrier_wait(&j->bar);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(ws[i].th, NULL);
	t2 = cli_now_ns();
	if (hk && hk->after)
		hk->after(hk->ctx);
	pthread_barrier_destroy(&j->bar);
	for (unsigned i = 0; i < nt; i++) {
		w->ops += ws[i].ops;
		if (ws[i].err && !rc)
			rc = ws[i].err;
		if (ws[i].bad && !w->bad)
			snprintf(w->bad_what, sizeof(w->bad_what), "%s", ws[i].bad_what);
		w->bad += ws[i].bad;
		for (unsigned b = 0; b < LAT_BUCKETS; b++)
			hist[b] += ws[i].hist[b];
		free(ws[i].sums);
	}
	free(ws);
	if (w->bad && !rc)
		rc = -EBADMSG;
	w->time_s = (double)(t2 - t1) / 1e9;
	for (unsigned b = lat_bucket(SLOW_NS); b < LAT_BUCKETS; b++)
		w->slow += hist[b];
	w->p50 = lat_quantile(hist, SLOW_NS, 0.5);
	w->p99 = lat_quantile(hist, SLOW_NS, 0.99);
	w->p999 = lat_quantile(hist, SLOW_NS, 0.999);
	w->hash = hash_pages(j->base, j->npages * j->ps);
	return rc;
}

/* ---- plain memory ----------------------------------------------------- */

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int run_plain(struct job *j, struct row *w)
{
	size_t len = j->npages * j->ps;
	int rc;

	j->base = map_anon(len);
	if (!j->base)
		return -ENOMEM;
	j->r = NULL;
	rc = run_job(j, NULL, w);
	w->peak_resident = len;
	w->total = len;
	munmap(j->base, len);
	return rc;
}

/* ---- a region ----------------------------------------------------------- */

static int region_open(const struct opts *o, unsigned policy, size_t size, size_t limit,
		       struct zm_region **r)
{
	struct zm_store_config sc = { .codec = o->codec, .allocator = o->allocator,
				      .unit_pages = o->unit_pages };
	struct zm_region_config cfg = {
		.size = size, .resident_limit = limit, .policy = policy,
		.flags = o->wait ? ZM_REGION_WAIT : 0,
		.store = &sc, .store_size = sizeof(sc),
	};

	return zm_region_create(&cfg, r);
}

struct region_ctx {
	struct zm_region *r;
	struct zm_region_stats a, b;
};

static void region_before(void *ctx)
{
	struct region_ctx *c = ctx;

	zm_region_stats(c->r, &c->a);
}

static void region_after(void *ctx)
{
	struct region_ctx *c = ctx;

	zm_region_stats(c->r, &c->b);
}

static int run_region(struct job *j, unsigned policy, struct row *w)
{
	struct region_ctx c = { 0 };
	struct hooks hk = { region_before, region_after, &c };
	uint64_t h[ZM_REGION_HIST_BUCKETS];
	struct zm_region_stats e;
	int rc;

	rc = region_open(j->o, policy, j->npages * j->ps, j->o->resident, &c.r);
	if (rc)
		return rc;
	j->r = c.r;
	j->base = zm_region_base(c.r);
	rc = run_job(j, &hk, w);
	zm_region_stats(c.r, &e);  /* after the hash's read of every page */
	w->faults_first = c.b.faults_first - c.a.faults_first;
	w->faults_refault = c.b.faults_refault - c.a.faults_refault;
	w->faults_wp = c.b.faults_wp - c.a.faults_wp;
	w->refaults_young = c.b.refaults_young - c.a.refaults_young;
	w->evictions = c.b.evictions - c.a.evictions;
	w->faults = w->faults_first + w->faults_refault + w->faults_wp;
	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++)
		h[i] = c.b.fault_hist[i] - c.a.fault_hist[i];
	w->handler_p50 = hist2_quantile(h, 0.5);
	w->handler_p99 = hist2_quantile(h, 0.99);
	w->peak_resident = c.b.resident_max;
	w->compressed = c.b.stored_bytes;
	w->pool = c.b.pool_bytes;
	w->total = c.b.resident_bytes + c.b.pool_bytes + c.b.meta_bytes;
	snprintf(w->note, sizeof(w->note), "limit %llu + slack %llu",
		 (unsigned long long)e.resident_limit, (unsigned long long)e.slack);
	zm_region_destroy(c.r);
	j->r = NULL;
	return rc;
}

/* ---- the kernel's side: a memory cgroup and a swap (kswap.h) ----------- */

/* What the child sends back. */
struct child_res {
	int rc;
	struct row row;
	uint64_t majflt;
	uint64_t compressed;   /* read by the parent while the child waits */
};

struct kctx {
	struct rusage a, b;
};

static void kernel_before(void *ctx)
{
	getrusage(RUSAGE_SELF, &((struct kctx *)ctx)->a);
}

static void kernel_after(void *ctx)
{
	getrusage(RUSAGE_SELF, &((struct kctx *)ctx)->b);
}

/* What a kernel side runs in its child: fn(job, arg, row). */
typedef int (*child_fn)(struct job *j, void *arg, struct row *w, uint64_t *majflt);

static int child_trace(struct job *j, void *arg, struct row *w, uint64_t *majflt)
{
	struct kctx c;
	struct hooks hk = { kernel_before, kernel_after, &c };
	size_t len = j->npages * j->ps;
	int rc;

	(void)arg;
	j->base = map_anon(len);
	if (!j->base)
		return -ENOMEM;
	rc = run_job(j, &hk, w);
	*majflt = (uint64_t)(c.b.ru_majflt - c.a.ru_majflt);
	return rc;
}

/* Run fn in a child in cg; fill r (peak and compressed read while the
 * child waits at its end).  0, or -1 with why. */
static int run_child(struct job *j, const struct kcgroup *cg, const struct kswap *k,
		     child_fn fn, void *arg, struct child_res *res, char *why, size_t wl)
{
	int up[2], down[2], st;
	char go = 1;
	pid_t pid;

	if (pipe(up) || pipe(down)) {
		snprintf(why, wl, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, wl, "fork: %s", strerror(errno));
		return -1;
	}
	if (!pid) {
		struct child_res cr = { 0 };

		kswap_signals_child();
		close(up[0]), close(down[1]);
		if (read(down[0], &go, 1) != 1)
			_exit(1);
		cr.rc = fn(j, arg, &cr.row, &cr.majflt);
		if (write(up[1], &cr, sizeof(cr)) != sizeof(cr))
			_exit(1);
		(void)!read(down[0], &go, 1);  /* the parent has read the counters */
		_exit(0);
	}
	close(up[1]), close(down[0]);
	if (kcg_enter(cg, pid)) {
		snprintf(why, wl, "moving the child into %.120s failed", cg->dir);
		kill(pid, SIGKILL);
	} else if (write(down[1], &go, 1) != 1) {
		kill(pid, SIGKILL);
	}
	memset(res, 0, sizeof(*res));
	if (read(up[0], res, sizeof(*res)) == sizeof(*res)) {
		res->row.peak_resident = kcg_peak(cg);
		res->row.total = kcg_usage(cg);
		if (k->kind == KSWAP_ZRAM) {
			uint64_t v[3];

			if (!kswap_zram_mm(k, v, 3)) {
				res->compressed = v[1];
				res->row.total += v[2];  /* mem_used_total */
			}
		} else {
			/* zswap's pool is charged to the cgroup: in its usage */
			res->compressed = kswap_meminfo("Zswap");
		}
		(void)!write(down[1], &go, 1);
	} else {
		res->rc = -EPIPE;
	}
	close(up[0]), close(down[1]);
	waitpid(pid, &st, 0);
	if (res->rc == -EPIPE) {
		snprintf(why, wl, "the child died (%s %d): the cgroup's out-of-memory killer?",
			 WIFSIGNALED(st) ? "signal" : "status",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		return -1;
	}
	return 0;
}

/* Bring up side s's swap and cgroup, run fn in a child there, tear down:
 * 0, -EBADMSG (the child's table lookups found wrong records), or -1 with
 * why (the side is skipped). */
static int run_kernel(struct job *j, enum side s, uint64_t limit, child_fn fn, void *arg,
		      struct row *w, char *why, size_t wl)
{
	struct kswap k;
	struct child_res res;
	struct kcgroup cg;
	struct sigaction old[KSWAP_NSTOP];
	/* twice the pages: slots held by pages in the swap cache too, and a
	 * full swap would end in the cgroup's out-of-memory killer */
	size_t bytes = 2 * j->npages * j->ps;
	int rc = -1;

	if (geteuid() != 0) {
		snprintf(why, wl, "needs root (a memory cgroup and swapon)");
		return -1;
	}
	kswap_signals_hold(old);
	if (kswap_up(&k, s == S_ZRAM ? KSWAP_ZRAM : KSWAP_ZSWAP, j->o->codec, j->o->dir, bytes,
		     why, wl))
		goto down;
	if (kcg_create(&cg, "zmem-regionbench", limit, why, wl))
		goto down;
	rc = run_child(j, &cg, &k, fn, arg, &res, why, wl);
	kcg_destroy(&cg);
	if (!rc) {
		*w = res.row;
		w->faults = res.majflt;
		w->compressed = res.compressed;
		if (res.rc == -EBADMSG) {
			rc = -EBADMSG;  /* wrong records: a failure, not a skip */
		} else if (res.rc) {
			snprintf(why, wl, "in the child: %s", strerror(-res.rc));
			rc = -1;
		}
	}
down:
	kswap_down(&k);
	kswap_signals_release(old);
	return rc;
}

/* ---- one trace, every side ------------------------------------------- */

/* pool: the pool the region had at the end of this trace, which zswap's
 * cgroup gets on top of the limit (zswap's pool is charged to it; zram's
 * is charged to nobody) */
static int run_side(const struct opts *o, const struct bench_data *d, enum trace t,
		    enum side s, unsigned nt, uint64_t pool, struct row *w)
{
	struct job j = {
		.o = o, .d = d, .t = t, .ps = 4096, .npages = o->size / 4096,
		.ndata = d->len / 4096, .nt = nt,
	};
	char why[256] = "";
	int rc;

	memset(w, 0, sizeof(*w));
	switch (s) {
	case S_PLAIN:
		rc = run_plain(&j, w);
		break;
	case S_AUTO:
	case S_FIFO:
		rc = run_region(&j, s == S_AUTO ? ZM_REGION_POLICY_AUTO : ZM_REGION_POLICY_FIFO, w);
		break;
	default:
		rc = run_kernel(&j, s, o->resident + (s == S_ZSWAP ? pool : 0), child_trace, NULL,
				w, why, sizeof(why));
		if (rc == -1) {
			cli_progress_done();
			cli_notice("%s: %s: skipped: %s", trace_names[t], side_names[s], why);
			return 0;
		}
		break;
	}
	if (rc == -EBADMSG) {
		cli_progress_done();
		fprintf(stderr, "zmem regionbench: %s on %s, %u thread%s: %llu lookup%s found a "
			"wrong record; the first: %s\n", trace_names[t], side_names[s], nt,
			nt > 1 ? "s" : "", (unsigned long long)w->bad, w->bad == 1 ? "" : "s",
			w->bad_what);
		return rc;
	}
	if (rc) {
		cli_progress_done();
		fprintf(stderr, "zmem regionbench: %s on %s: %s\n", trace_names[t], side_names[s],
			strerror(-rc));
		return rc;
	}
	w->ran = true;
	return 0;
}

/* ---- fault cost ------------------------------------------------------ */

enum fc_side { FC_REGION, FC_ZERO, FC_PLAIN, FC_KERNEL, NFC };

static const char *const fc_names[NFC] = { "region", "region zero", "plain first touch",
					   "kernel zram" };
static const char *const fc_keys[NFC] = { "region", "region-zero", "plain-first-touch",
					  "kernel-zram" };

struct fc_row {
	bool ran;
	uint64_t touches, faults;
	double p50, p99, p999, handler_p50, handler_p99;
	char note[128];
};

/* Touch the pages of base in perm's order; time those from skip on. */
static void touch_all(uint8_t *base, size_t ps, const uint32_t *perm, size_t n, size_t skip,
		      uint64_t *hist)
{
	volatile uint64_t sink = 0;

	for (size_t k = 0; k < n; k++) {
		uint64_t t0 = cli_now_ns();

		sink += *(volatile uint64_t *)(base + (size_t)perm[k] * ps);
		if (k >= skip)
			hist[lat_bucket(cli_now_ns() - t0)]++;
	}
	(void)sink;
}

static void fc_fill(struct fc_row *w, const uint64_t *hist)
{
	for (unsigned b = 0; b < LAT_BUCKETS; b++)
		w->touches += hist[b];
	w->p50 = lat_quantile(hist, 0, 0.5);
	w->p99 = lat_quantile(hist, 0, 0.99);
	w->p999 = lat_quantile(hist, 0, 0.999);
	w->ran = true;
}

static int fc_region(const struct opts *o, const struct bench_data *d, const uint32_t *perm,
		     size_t n, bool data, struct fc_row *w)
{
	size_t ps = 4096, skip = o->resident / ps;
	struct zm_region_stats a, b;
	uint64_t *hist = calloc(LAT_BUCKETS, sizeof(*hist)), h2[ZM_REGION_HIST_BUCKETS];
	struct zm_region *r;
	uint8_t *base;
	int rc;

	if (!hist)
		return -ENOMEM;
	rc = region_open(o, ZM_REGION_POLICY_AUTO, n * ps, o->resident, &r);
	if (rc) {
		free(hist);
		return rc;
	}
	base = zm_region_base(r);
	if (data) {
		for (size_t i = 0; i < n; i++)
			memcpy(base + i * ps, d->buf + i % (d->len / ps) * ps, ps);
		if (zm_region_reclaim(r, n * ps) < 0)
			snprintf(w->note, sizeof(w->note), "reclaim failed");
	}
	/* the warm-up: until the region is at its limit */
	touch_all(base, ps, perm, skip, skip, hist);
	zm_region_stats(r, &a);
	touch_all(base, ps, perm + skip, n - skip, 0, hist);
	zm_region_stats(r, &b);
	fc_fill(w, hist);
	w->faults = b.faults_first + b.faults_refault - a.faults_first - a.faults_refault;
	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++)
		h2[i] = b.fault_hist[i] - a.fault_hist[i];
	w->handler_p50 = hist2_quantile(h2, 0.5);
	w->handler_p99 = hist2_quantile(h2, 0.99);
	zm_region_destroy(r);
	free(hist);
	return 0;
}

struct fc_arg {
	const uint32_t *perm;
	size_t n;
	const struct kcgroup *cg;
};

/* In the kernel's child: fill, push everything to swap (the limit lowered
 * for a moment), touch. */
static int child_fault_cost(struct job *j, void *arg, struct row *w, uint64_t *majflt)
{
	const struct fc_arg *a = arg;
	size_t ps = j->ps, skip = j->o->resident / ps;
	uint64_t *hist = calloc(LAT_BUCKETS, sizeof(*hist));
	struct rusage r0, r1;
	uint8_t *base = map_anon(a->n * ps);

	if (!hist || !base)
		return -ENOMEM;
	for (size_t i = 0; i < a->n; i++)
		memcpy(base + i * ps, j->d->buf + i % j->ndata * ps, ps);
	kcg_set_limit(a->cg, (uint64_t)16 << 20);
	kcg_set_limit(a->cg, j->o->resident);
	getrusage(RUSAGE_SELF, &r0);
	touch_all(base, ps, a->perm, a->n, skip, hist);
	getrusage(RUSAGE_SELF, &r1);
	*majflt = (uint64_t)(r1.ru_majflt - r0.ru_majflt);
	/* the row carries the percentiles back */
	w->p50 = lat_quantile(hist, 0, 0.5);
	w->p99 = lat_quantile(hist, 0, 0.99);
	w->p999 = lat_quantile(hist, 0, 0.999);
	for (unsigned b = 0; b < LAT_BUCKETS; b++)
		w->ops += hist[b];
	free(hist);
	return 0;
}

static int fault_cost(const struct opts *o, const struct bench_data *d, struct fc_row *rows)
{
	size_t ps = 4096, n = o->size / ps, skip = o->resident / ps;
	uint64_t s = zmi_mix64(o->seed) | 1;
	uint32_t *perm = shuffled(0, n, &s);
	uint64_t *hist = calloc(LAT_BUCKETS, sizeof(*hist));
	uint8_t *plain;
	int rc;

	if (!perm || !hist || skip >= n) {
		free(perm), free(hist);
		return skip >= n ? -EINVAL : -ENOMEM;
	}
	cli_progress("fault cost: region");
	rc = fc_region(o, d, perm, n, true, &rows[FC_REGION]);
	if (!rc) {
		cli_progress("fault cost: region zero");
		rc = fc_region(o, d, perm, n, false, &rows[FC_ZERO]);
	}
	if (!rc) {
		cli_progress("fault cost: plain first touch");
		plain = map_anon(n * ps);
		if (!plain) {
			rc = -ENOMEM;
		} else {
			touch_all(plain, ps, perm, n, 0, hist);
			fc_fill(&rows[FC_PLAIN], hist);
			rows[FC_PLAIN].faults = n;
			munmap(plain, n * ps);
		}
	}
	if (!rc && o->kernel) {
		struct job j = { .o = o, .d = d, .ps = ps, .npages = n, .ndata = d->len / ps };
		struct kswap k = { .zram_id = -1 };
		struct child_res res;
		struct kcgroup cg;
		char why[256] = "";
		struct fc_arg a = { perm, n, &cg };
		struct sigaction old[KSWAP_NSTOP];

		cli_progress("fault cost: kernel zram");
		kswap_signals_hold(old);
		if (geteuid() != 0)
			snprintf(why, sizeof(why), "needs root");
		else if (!kswap_up(&k, KSWAP_ZRAM, o->codec, o->dir, 2 * n * ps, why, sizeof(why)) &&
			 !kcg_create(&cg, "zmem-regionbench", o->resident, why, sizeof(why))) {
			if (!run_child(&j, &cg, &k, child_fault_cost, &a, &res, why, sizeof(why))) {
				struct fc_row *w = &rows[FC_KERNEL];

				w->ran = true;
				w->touches = res.row.ops;
				w->faults = res.majflt;
				w->p50 = res.row.p50, w->p99 = res.row.p99, w->p999 = res.row.p999;
			}
			kcg_destroy(&cg);
		}
		kswap_down(&k);
		kswap_signals_release(old);
		if (!rows[FC_KERNEL].ran) {
			cli_progress_done();
			cli_notice("fault cost: kernel zram: skipped: %s", why);
		}
	}
	cli_progress_done();
	free(perm), free(hist);
	return rc;
}

/* ---- output ---------------------------------------------------------- */

static double ratio(double a, double b)
{
	return b > 0 ? a / b : -1;
}

static double ops_per_s(const struct row *w)
{
	return w->time_s > 0 ? (double)w->ops / w->time_s : 0;
}

/* Side s's ops/s with thread count k against the base count's (tc[0]),
 * on trace t: -1 if either did not run or k is the base. */
static double threads_ratio(const struct opts *o, const rowset *rows, unsigned k, int t, int s)
{
	const struct row *w = &rows[k][t][s], *b = &rows[0][t][s];

	if (!k || o->ntc < 2 || !w->ran || !b->ran)
		return -1;
	return ratio(ops_per_s(w), ops_per_s(b));
}

/* The threads target: THREADS_TARGET, or plain memory's own ratio in the
 * same run if that is lower (the machine's ceiling). */
static double threads_target(double plain)
{
	return plain >= 0 && plain < THREADS_TARGET ? plain : THREADS_TARGET;
}

static void thread_list(const struct opts *o, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned k = 0; k < o->ntc && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", k ? "," : "", o->tc[k]);
}

static void print_table(const struct opts *o, const struct bench_data *d, const rowset *rows)
{
	char lim[32], sz[32], tl[64], xb[16];

	thread_list(o, tl, sizeof(tl));
	snprintf(xb, sizeof(xb), "x %u thr", o->tc[0]);
	printf("zmem regionbench: %s of %s, resident limit %s, %s/%s,\nunits of %u page%s, "
	       "%s thread%s, %llu accesses, %u%% writes, hot %u/%u\n\n",
	       zmi_human_bytes(o->size, sz, sizeof(sz)), d->name,
	       zmi_human_bytes(o->resident, lim, sizeof(lim)), o->codec, o->allocator,
	       o->unit_pages, o->unit_pages > 1 ? "s" : "", tl,
	       o->ntc > 1 || o->tc[0] > 1 ? "s" : "", (unsigned long long)o->accesses, o->writes,
	       o->hot_access, o->hot_pages);
	/* 68 columns (77 with threads); --wide adds ops/s, faults/s, p50, p99.9,
	 * peak and compressed (about 130) */
	printf("%-6s %-12s %3s %7s", "trace", "side", "thr", "time s");
	if (o->wide)
		printf(" %9s %9s %8s", "ops/s", "faults/s", "p50 us");
	printf(" %8s", "p99 us");
	if (o->wide)
		printf(" %8s %8s %9s", "p99.9 us", "peak MiB", "compr MiB");
	printf(" %9s %7s %9s", "total MiB", "x plain", "auto/fifo");
	if (o->ntc > 1)
		printf(" %8s", xb);
	printf("\n");
	for (int t = 0; t < NTRACES; t++)
		for (unsigned k = 0; k < o->ntc; k++)
			for (int s = 0; s < NSIDES; s++) {
				const rowset *rs = &rows[k];
				const struct row *w = &(*rs)[t][s], *p = &(*rs)[t][S_PLAIN];
				double af = s == S_AUTO && (*rs)[t][S_FIFO].ran ?
					ratio((double)w->faults, (double)(*rs)[t][S_FIFO].faults) : -1;
				double tr = threads_ratio(o, rows, k, t, s);

				if (!w->ran)
					continue;
				printf("%-6s %-12s %3u %7.3f", trace_names[t], side_names[s],
				       o->tc[k], w->time_s);
				if (o->wide)
					printf(" %9.0f %9.0f %8.1f", ops_per_s(w),
					       w->time_s > 0 ? (double)w->faults / w->time_s : 0,
					       w->p50);
				printf(" %8.1f", w->p99);
				if (o->wide)
					printf(" %8.1f %8.1f %9.1f", w->p999, w->peak_resident / MIB,
					       w->compressed / MIB);
				printf(" %9.1f %7.2f", w->total / MIB,
				       p->ran ? ratio(w->time_s, p->time_s) : 0);
				if (af >= 0)
					printf(" %9.2f", af);
				else if (tr >= 0)
					printf(" %9s", "");
				if (tr >= 0)
					printf(" %8.2f", tr);
				printf("%s\n", w->verified || s == S_PLAIN ? "" : "  WRONG BYTES");
			}
	printf("\nfault latency: the accesses that took %d ns or more (timed alike on every"
	       "\nside; table: whole lookups); faults: the region's (first touch + refault +"
	       "\nwrite-protect), the kernel's major faults; peak: resident pages at most (the"
	       "\nkernel: the cgroup's peak usage); total: resident + pool + metadata at the end"
	       "\n(the kernel: the cgroup's usage, + zram's pool); x plain: time / plain\n"
	       "memory's; auto/fifo: the region's faults against FIFO's.%s\n", SLOW_NS,
	       o->wide ? "" : "\n--wide adds ops/s, faults/s, the fault latency's p50 and "
	       "p99.9, peak and\ncompressed memory.");
	if (o->ntc > 1)
		printf("%s: ops/s against the same side's with %u thread%s (each thread on a "
		       "part of\nits own).\n", xb, o->tc[0], o->tc[0] > 1 ? "s" : "");
	for (int t = 0, first = 1; t < NTRACES; t++)
		for (unsigned k = 0; k < o->ntc; k++)
			for (int s = S_AUTO; s <= S_FIFO; s++) {
				const struct row *w = &rows[k][t][s];

				if (!w->ran)
					continue;
				if (first)
					printf("\nRegion faults (first / refault / write-protect, young "
					       "refaults, evictions;\nhandler p50/p99 us):\n");
				first = 0;
				printf("  %-6s %-12s %3u  %llu / %llu / %llu, %llu, %llu; %.1f / %.1f\n",
				       trace_names[t], side_names[s], o->tc[k],
				       (unsigned long long)w->faults_first,
				       (unsigned long long)w->faults_refault,
				       (unsigned long long)w->faults_wp,
				       (unsigned long long)w->refaults_young,
				       (unsigned long long)w->evictions, w->handler_p50, w->handler_p99);
			}
	if (rows[0][T_HOT][S_AUTO].ran) {
		const struct row *a = &rows[0][T_HOT][S_AUTO], *z = &rows[0][T_HOT][S_ZRAM];
		const struct row *f = &rows[0][T_HOT][S_FIFO];

		printf("\nTargets (hot trace, %u thread%s; figures only):\n", o->tc[0],
		       o->tc[0] > 1 ? "s" : "");
		if (z->ran)
			printf("  time: region %.2f s, kernel zram %.2f s (%.2fx; target <= 1)\n",
			       a->time_s, z->time_s, ratio(a->time_s, z->time_s));
		printf("  total memory: %.1f MiB against 1.05 x (limit + compressed) = %.1f MiB\n"
		       "    (%.3fx of limit + compressed)\n", a->total / MIB,
		       1.05 * ((double)o->resident + (double)a->compressed) / MIB,
		       ratio((double)a->total, (double)o->resident + (double)a->compressed));
		if (f->ran)
			printf("  faults: auto %llu, fifo %llu (%.2fx; target <= 0.5)\n",
			       (unsigned long long)a->faults, (unsigned long long)f->faults,
			       ratio((double)a->faults, (double)f->faults));
	}
	for (unsigned k = 1, first = 1; k < o->ntc; k++)
		for (int t = 0; t < NTRACES; t++) {
			double p = threads_ratio(o, rows, k, t, S_PLAIN), tg = threads_target(p);

			if (p < 0 || (threads_ratio(o, rows, k, t, S_AUTO) < 0 &&
				      threads_ratio(o, rows, k, t, S_FIFO) < 0))
				continue;
			if (first)
				printf("\nTargets (threads: N threads' ops/s against %u thread%s, each "
				       "on its own part;\nat least %.1fx, or plain memory's ratio in "
				       "this run, the machine's ceiling):\n", o->tc[0],
				       o->tc[0] > 1 ? "s'" : "'s", THREADS_TARGET);
			first = 0;
			printf("  %-6s %u threads: plain %.2fx, target >= %.2fx:\n       ",
			       trace_names[t], o->tc[k], p, tg);
			for (int s = S_AUTO; s <= S_FIFO; s++) {
				double r = threads_ratio(o, rows, k, t, s);

				if (r >= 0)
					printf(" %s %.2fx (%s);", side_names[s], r,
					       r >= tg ? "met" : "missed");
			}
			printf("\n");
		}
}

static void print_fc(const struct opts *o, const struct fc_row *rows)
{
	char sz[32], lim[32];

	printf("zmem regionbench --fault-cost: %s of %s, resident limit %s, %s,\nunits of %u "
	       "page%s, one thread%s\n\n", zmi_human_bytes(o->size, sz, sizeof(sz)), o->data,
	       zmi_human_bytes(o->resident, lim, sizeof(lim)), o->codec, o->unit_pages,
	       o->unit_pages > 1 ? "s" : "",
	       o->wait ? ", faults served by the region thread (--wait)" : "");
	/* 70 columns; --wide adds touches and p99.9 (90) */
	printf("%-18s", "side");
	if (o->wide)
		printf(" %9s", "touches");
	printf(" %9s %8s %8s", "faults", "p50 us", "p99 us");
	if (o->wide)
		printf(" %9s", "p99.9 us");
	printf(" %11s %11s\n", "handler p50", "handler p99");
	for (int i = 0; i < NFC; i++) {
		const struct fc_row *w = &rows[i];

		if (!w->ran)
			continue;
		printf("%-18s", fc_names[i]);
		if (o->wide)
			printf(" %9llu", (unsigned long long)w->touches);
		printf(" %9llu %8.2f %8.2f", (unsigned long long)w->faults, w->p50, w->p99);
		if (o->wide)
			printf(" %9.2f", w->p999);
		if (i <= FC_ZERO)
			printf(" %11.2f %11.2f", w->handler_p50, w->handler_p99);
		printf("%s%s\n", w->note[0] ? "  " : "", w->note);
	}
	printf("\nEvery page touched once in random order, timed from the touch %zu on (the "
	       "region\nat its limit: each fault also evicts).  region: every page compressed "
	       "first;\nregion zero: pages never written (first touches: the kernel's part and "
	       "the\nhandler's floor); kernel zram: the same pages in a cgroup of the limit, "
	       "pushed\nto swap first.%s\nTarget (region): p50 <= 6 us, p99 <= 20 us.\n",
	       o->resident / 4096, o->wide ? "" : "  --wide adds the touches and p99.9.");
}

static void json_params(struct json *j, const struct opts *o, const struct bench_data *d)
{
	json_str(j, "data", d->name);
	json_str(j, "data_note", d->note);
	json_uint(j, "size_bytes", o->size);
	json_uint(j, "resident_limit_bytes", o->resident);
	json_uint(j, "page_size_bytes", 4096);
	json_str(j, "codec", o->codec);
	json_str(j, "allocator", o->allocator);
	json_uint(j, "unit_pages", o->unit_pages);
	json_bool(j, "wait", o->wait);
	json_array(j, "threads");
	for (unsigned k = 0; k < o->ntc; k++)
		json_uint(j, NULL, o->tc[k]);
	json_array_end(j);
	json_uint(j, "threads_base", o->tc[0]);
	json_fixed(j, "threads_target", THREADS_TARGET, 2);
	json_uint(j, "accesses", o->accesses);
	json_uint(j, "writes_pct", o->writes);
	json_uint(j, "hot_access_pct", o->hot_access);
	json_uint(j, "hot_pages_pct", o->hot_pages);
	json_uint(j, "seed", o->seed);
	json_uint(j, "slow_ns", SLOW_NS);
	json_str(j, "plot", o->plot);
}

static void print_json(const struct opts *o, const struct bench_data *d, const rowset *rows)
{
	struct json j;

	json_begin(&j, stdout, "regionbench");
	json_params(&j, o, d);
	json_array(&j, "results");
	for (int t = 0; t < NTRACES; t++)
		for (unsigned k = 0; k < o->ntc; k++)
			for (int s = 0; s < NSIDES; s++) {
				const struct row *w = &rows[k][t][s], *p = &rows[k][t][S_PLAIN];
				const struct row *f = &rows[k][t][S_FIFO];
				double tr = threads_ratio(o, rows, k, t, s);
				double tp = threads_ratio(o, rows, k, t, S_PLAIN);

				if (!w->ran)
					continue;
				json_object(&j, NULL);
				json_str(&j, "trace", trace_names[t]);
				json_str(&j, "side", side_keys[s]);
				json_uint(&j, "threads", o->tc[k]);
				json_fixed(&j, "time_s", w->time_s, 4);
				json_fixed(&j, "fill_s", w->fill_s, 4);
				json_uint(&j, "ops", w->ops);
				json_fixed(&j, "ops_per_s", ops_per_s(w), 0);
				json_uint(&j, "faults", w->faults);
				json_fixed(&j, "faults_per_s",
					   w->time_s > 0 ? (double)w->faults / w->time_s : 0, 0);
				json_uint(&j, "slow_accesses", w->slow);
				json_fixed(&j, "fault_p50_us", w->p50, 2);
				json_fixed(&j, "fault_p99_us", w->p99, 2);
				json_fixed(&j, "fault_p999_us", w->p999, 2);
				json_uint(&j, "peak_resident_bytes", w->peak_resident);
				json_uint(&j, "compressed_bytes", w->compressed);
				json_uint(&j, "total_bytes", w->total);
				if (p->ran)
					json_fixed(&j, "time_vs_plain", ratio(w->time_s, p->time_s), 3);
				if (s == S_AUTO || s == S_FIFO) {
					json_uint(&j, "faults_first", w->faults_first);
					json_uint(&j, "faults_refault", w->faults_refault);
					json_uint(&j, "faults_wp", w->faults_wp);
					json_uint(&j, "refaults_young", w->refaults_young);
					json_uint(&j, "evictions", w->evictions);
					json_fixed(&j, "handler_p50_us", w->handler_p50, 2);
					json_fixed(&j, "handler_p99_us", w->handler_p99, 2);
				}
				if (s == S_AUTO && f->ran)
					json_fixed(&j, "faults_vs_fifo",
						   ratio((double)w->faults, (double)f->faults), 3);
				if (tr >= 0) {
					/* ops/s against the base count's, the same side */
					json_fixed(&j, "threads_ratio", tr, 3);
					if (s != S_PLAIN && tp >= 0) {
						json_fixed(&j, "threads_ratio_plain", tp, 3);
						json_fixed(&j, "threads_target_ratio",
							   threads_target(tp), 3);
						json_bool(&j, "threads_target_met",
							  tr >= threads_target(tp));
					}
				}
				if (t == T_TABLE)
					json_uint(&j, "lookups_wrong", w->bad);
				json_bool(&j, "verified", w->verified || s == S_PLAIN);
				json_object_end(&j);
			}
	json_array_end(&j);
	json_end(&j);
}

static void print_fc_json(const struct opts *o, const struct bench_data *d,
			  const struct fc_row *rows)
{
	struct json j;

	json_begin(&j, stdout, "regionbench");
	json_params(&j, o, d);
	json_str(&j, "mode", "fault-cost");
	json_array(&j, "results");
	for (int i = 0; i < NFC; i++) {
		const struct fc_row *w = &rows[i];

		if (!w->ran)
			continue;
		json_object(&j, NULL);
		json_str(&j, "side", fc_keys[i]);
		json_uint(&j, "touches", w->touches);
		json_uint(&j, "faults", w->faults);
		json_fixed(&j, "p50_us", w->p50, 2);
		json_fixed(&j, "p99_us", w->p99, 2);
		json_fixed(&j, "p999_us", w->p999, 2);
		if (i <= FC_ZERO) {
			json_fixed(&j, "handler_p50_us", w->handler_p50, 2);
			json_fixed(&j, "handler_p99_us", w->handler_p99, 2);
		}
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
}

/* Time, total memory and fault p99 by trace, a marker per side (rows:
 * the base thread count's); the traces are categories, not joined. */
static int write_plot(const char *path, const struct opts *o, const struct bench_data *d,
		      struct row (*rows)[NSIDES])
{
	double y[3][NSIDES][NTRACES];
	const char *x[NTRACES], *names[NSIDES];
	struct plot_series s[NSIDES];
	size_t nx = 0, ns = 0;
	int sides[NSIDES];
	char title[256], a[32], b[32];
	FILE *f;

	for (int t = 0; t < NTRACES; t++) {
		bool any = false;

		for (int k = 0; k < NSIDES; k++)
			any |= rows[t][k].ran;
		if (any)
			x[nx++] = trace_names[t];
	}
	for (int k = 0; k < NSIDES; k++) {
		bool any = false;

		for (int t = 0; t < NTRACES; t++)
			any |= rows[t][k].ran;
		if (any)
			sides[ns] = k, names[ns++] = side_names[k];
	}
	for (size_t i = 0; i < ns; i++) {
		size_t xi = 0;

		for (int t = 0; t < NTRACES; t++) {
			const struct row *w = &rows[t][sides[i]];
			bool any = false;

			for (int k = 0; k < NSIDES; k++)
				any |= rows[t][k].ran;
			if (!any)
				continue;
			y[0][i][xi] = w->ran ? w->time_s : -1;
			y[1][i][xi] = w->ran ? w->total / MIB : -1;
			y[2][i][xi] = w->ran && w->slow ? w->p99 : -1;
			xi++;
		}
	}
	snprintf(title, sizeof(title), "zmem regionbench: %s, %s, resident %s, %s", d->name,
		 zmi_human_bytes(o->size, a, sizeof(a)), zmi_human_bytes(o->resident, b, sizeof(b)),
		 o->codec);
	f = plot_begin(path, 70 + 3 * (260 + 75) + 20, title);
	if (!f)
		return -errno;
	plot_legend(f, 50, names, ns);
	for (int p = 0; p < 3; p++) {
		static const struct plot_axes ax[3] = {
			{ .title = "wall time of the trace", .xtitle = "trace",
			  .ytitle = "time (s)", .logy = 1, .dots = 1 },
			{ .title = "total memory at the end", .xtitle = "trace",
			  .ytitle = "memory (MiB)", .dots = 1 },
			{ .title = "fault latency p99", .xtitle = "trace",
			  .ytitle = "latency (us)", .logy = 1, .dots = 1 },
		};

		for (size_t i = 0; i < ns; i++)
			s[i] = (struct plot_series){ names[i], y[p][i] };
		plot_panel_axes(f, 100 + p * 335, 260, &ax[p], x, nx, s, ns);
	}
	return plot_end(f);
}

/* ---- options ---------------------------------------------------------- */

static int parse_list(const char *s, const char *const *names, int n, bool *on,
		      const char *opt)
{
	char buf[128], *save, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	memset(on, 0, sizeof(bool) * (size_t)n);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k;

		if (!strcmp(tok, "all")) {
			for (k = 0; k < n; k++)
				on[k] = true;
			continue;
		}
		for (k = 0; k < n && strcmp(tok, names[k]); k++)
			;
		if (k == n)
			return cli_usage("regionbench", "unknown %s '%s'", opt, tok);
		on[k] = true;
	}
	return 0;
}

/* --threads LIST: counts 1..MAX_THREADS, at most MAX_TC of them, into
 * o->tc ascending without repeats.  0, or -1. */
static int parse_threads(const char *s, struct opts *o)
{
	char buf[128], *save, *tok;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	o->ntc = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		unsigned k;

		if (cli_parse_u64(tok, &v) || v < 1 || v > MAX_THREADS)
			return -1;
		for (k = 0; k < o->ntc && o->tc[k] < v; k++)
			;
		if (k < o->ntc && o->tc[k] == v)
			continue;
		if (o->ntc == MAX_TC)
			return -1;
		memmove(&o->tc[k + 1], &o->tc[k], (o->ntc - k) * sizeof(o->tc[0]));
		o->tc[k] = (unsigned)v;
		o->ntc++;
	}
	if (!o->ntc)
		return -1;
	o->threads = o->tc[o->ntc - 1];
	return 0;
}

/* A count, with an optional k, M or G (10^3, 10^6, 10^9): 0, or -1. */
static int parse_count(const char *s, uint64_t *v)
{
	static const char units[] = "kMG";
	char num[32];
	size_t n = strlen(s);
	uint64_t mul = 1;
	const char *u;

	if (!n || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	if ((u = strchr(units, num[n - 1])) && num[n - 1]) {
		for (long k = u - units; k >= 0; k--)
			mul *= 1000;
		num[--n] = 0;
	}
	if (cli_parse_u64(num, v) || !*v || *v > UINT64_MAX / mul)
		return -1;
	*v *= mul;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const char *const policies[] = { "auto", "fifo", "both", NULL };
	const char *tmp = getenv("TMPDIR"), *traces = "all", *hot = NULL, *policy = "both";
	const char *accesses = NULL, *threads = "1";
	uint64_t writes = DEF_WRITES, unit_pages = 1;
	char seed_def[24];
	int rc;
	const struct opt table[] = {
		O_SIZE("size", 's', &o->size, "SIZE", "bytes of pages each trace works on", "64M",
		       (double)(256 * 4096), (double)((uint64_t)1 << 40)),
		O_SIZE("resident", 'r', &o->resident, "LIMIT",
		       "the regions' resident limit, the kernel's\ncgroup limit", "a quarter of --size",
		       (double)(ZM_REGION_MIN_RESIDENT * 4096), (double)((uint64_t)1 << 40)),
		O_STR("trace", 't', &traces, "LIST", "of seq,random,hot,heap,table", "all"),
		O_STR("hot", 'H', &hot, "A/P", "A% of the accesses go to P% of the pages", "80/20"),
		O_STR("accesses", 'a', &accesses, "N", "accesses per trace (k, M, G: 10^3, 10^6,\n10^9)",
		      "4 per page"),
		O_U64("writes", 'w', &writes, "PCT", "accesses that also write", "25", 0, 100),
		O_STR("data", 'd', &o->data, "SPEC", "what the pages hold, as zmem bench takes it",
		      "text:0.5"),
		O_STR("threads", 'T', &threads, "LIST",
		      "thread counts, on disjoint parts: each trace\nonce per count; 1,2: also "
		      "2 threads' ops/s\nagainst 1 thread's", "1"),
		O_STR("codec", 'c', &o->codec, "NAME", "the regions' codec", "lz4"),
		O_STR("allocator", 'A', &o->allocator, "NAME", "the regions' pool", "zsmalloc"),
		O_U64("unit-pages", 'u', &unit_pages, "N",
		      "the regions' store keeps up to N adjacent pages\nevicted together as one "
		      "unit (1, 4, 16)", "1", 1, ZM_STORE_UNIT_MAX),
		O_STR("policy", 'p', &policy, "P", "the regions' cold selection", "both",
		      .choices = policies),
		O_FLAG("kernel", 'k', &o->kernel,
		       "also the kernel's zram and zswap as swap of a\nmemory cgroup (root)"),
		O_FLAG("fault-cost", 'f', &o->fault_cost,
		       "the cost of one touch of a compressed page\ninstead of the traces"),
		O_FLAG("wait", 'W', &o->wait,
		       "regions whose faults the region thread serves\n(ZM_REGION_WAIT) instead "
		       "of the faulting\nthread's SIGBUS handler"),
		O_STR("dir", 'D', &o->dir, "DIR", "where zswap's swap file goes (removed after)",
		      "$TMPDIR or /var/tmp"),
		O_U64("seed", 'S', &o->seed, "S", "the traces' seed", seed_def, 0, 0),
		O_STR("plot", 'P', &o->plot, "FILE.svg", "time, memory and fault p99 by trace",
		      "none"),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the tables"),
		O_FLAG("wide", 0, &o->wide, "every column of the tables (about 130)"),
		O_FLAG("test-corrupt-table", 0, &o->corrupt, "damage the regions' tables",
		       .hidden = 1),
		O_END,
	};
	const struct opt_cmd cmd = {
		"regionbench", "[OPTIONS]",
		"Compressed regions against plain memory and the kernel's compressed swap:\n"
		"sequential, random, hot-set, heap and hash-table traces over --size bytes\n"
		"with --resident of them uncompressed, side by side.",
		table,
		"Exit status 77: no userfaultfd here (nothing measured).\n",
	};

	memset(o, 0, sizeof(*o));
	o->data = "text:0.5";
	o->codec = "lz4";
	o->allocator = "zsmalloc";
	o->dir = tmp && *tmp ? tmp : "/var/tmp";
	o->size = DEF_SIZE;
	o->hot_access = 80;
	o->hot_pages = 20;
	o->seed = DEF_SEED;
	snprintf(seed_def, sizeof(seed_def), "%d", DEF_SEED);
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	o->writes = (unsigned)writes;
	o->unit_pages = (unsigned)unit_pages;
	if (unit_pages & (unit_pages - 1))
		return cli_usage("regionbench", "--unit-pages must be a power of two (1, 4, 16)");
	if (accesses && parse_count(accesses, &o->accesses))
		return cli_usage("regionbench", "invalid --accesses '%s' (a count: 3000000, 3M)",
				 accesses);
	if (parse_threads(threads, o))
		return cli_usage("regionbench", "--threads must be a list of at most %d counts "
				 "1..%d (1,2), not '%s'", MAX_TC, MAX_THREADS, threads);
	if (parse_list(traces, trace_names, NTRACES, o->traces, "trace"))
		return CLI_USAGE;
	o->sides[S_PLAIN] = true;
	o->sides[S_AUTO] = strcmp(policy, "fifo") != 0;
	o->sides[S_FIFO] = strcmp(policy, "auto") != 0;
	o->sides[S_ZRAM] = o->sides[S_ZSWAP] = o->kernel;
	if (hot) {
		char end;

		if (sscanf(hot, "%u/%u%c", &o->hot_access, &o->hot_pages, &end) != 2 ||
		    hot[0] < '0' || hot[0] > '9' || o->hot_access > 100 || !o->hot_pages ||
		    o->hot_pages >= 100)
			return cli_usage("regionbench", "invalid --hot '%s' (A/P: percentages, "
					 "P 1..99)", hot);
	}
	o->size = o->size / 4096 * 4096;
	if (!o->resident)
		o->resident = o->size / 4 / 4096 * 4096;
	o->resident = o->resident / 4096 * 4096;
	if (o->resident < ZM_REGION_MIN_RESIDENT * 4096)
		o->resident = ZM_REGION_MIN_RESIDENT * 4096;
	if (o->resident >= o->size)
		return cli_usage("regionbench", "--resident must be less than --size");
	if (o->size / 4096 >= UINT32_MAX)
		return cli_usage("regionbench", "--size must be less than 2^32 pages");
	if (o->size / 4096 < o->threads)
		return cli_usage("regionbench", "--threads must be at most the pages");
	if (!o->accesses)
		o->accesses = o->size / 4096 * DEF_PER_PAGE;
	return 0;
}

static int check_codec(const char *name)
{
	struct zm_codec *c;
	int rc = zm_codec_create(name, 0, &c);

	if (rc)
		return cli_usage("regionbench", "codec '%s': %s", name,
				 rc == -EOPNOTSUPP ? "not in this build" : "unknown name or level");
	zm_codec_destroy(c);
	return 0;
}

/* Can this process have a region at all?  0, or the exit status. */
static int probe(const struct opts *o)
{
	struct zm_region *r;
	int rc = region_open(o, ZM_REGION_POLICY_AUTO, (size_t)1 << 20,
			     ZM_REGION_MIN_RESIDENT * 4096, &r);

	if (!rc) {
		zm_region_destroy(r);
		return 0;
	}
	if (rc == -EPERM || rc == -ENOSYS) {
		fprintf(stderr, "zmem regionbench: no userfaultfd here (%s): nothing measured "
			"(vm.unprivileged_userfaultfd, /dev/userfaultfd)\n", strerror(-rc));
		return EXIT_NO_UFFD;
	}
	if (rc == -EINVAL)
		return cli_usage("regionbench", "the region refuses --allocator '%s' or --codec '%s'",
				 o->allocator, o->codec);
	return cli_fail("regionbench", "creating a region: %s", strerror(-rc));
}

int cmd_regionbench(int argc, char **argv)
{
	static rowset rows[MAX_TC];
	static struct fc_row fc[NFC];
	struct bench_data d = { 0 };
	struct opts o;
	uint64_t bad = 0;
	int status;

	status = parse(argc, argv, &o);
	if (status)
		return status < 0 ? CLI_OK : status;
	if (check_codec(o.codec) || bench_data_check(o.data) ||
	    cli_check_allocator("regionbench", "--allocator", o.allocator))
		return CLI_USAGE;
	/* what cannot end well fails now, not after the run (check.h) */
	if (cli_check_data("regionbench", o.data) ||
	    cli_check_dir("regionbench", "--dir", o.dir) ||
	    cli_check_memory("regionbench", "--size", o.size, 1))
		return CLI_FAIL;
	if ((status = cli_check_plot("regionbench", o.plot, o.json)))
		return status;
	status = probe(&o);
	if (status)
		return status;
	if (o.kernel && geteuid() != 0)
		cli_notice("--kernel needs root: the kernel's sides are skipped");
	status = CLI_FAIL;
	cli_progress("preparing %s", o.data);
	if (bench_data_make(o.data, o.size < DATA_MAX ? o.size : DATA_MAX, 4096, o.codec, &d))
		goto out;
	cli_progress_done();
	cli_note("%s: %s; seed %llu", d.name, d.note, (unsigned long long)o.seed);
	if (o.fault_cost) {
		if (fault_cost(&o, &d, fc)) {
			fprintf(stderr, "zmem regionbench: the fault-cost run failed\n");
			goto out;
		}
		if (o.json)
			print_fc_json(&o, &d, fc);
		else
			print_fc(&o, fc);
		status = CLI_OK;
		goto out;
	}
	for (int t = 0; t < NTRACES; t++) {
		if (!o.traces[t])
			continue;
		for (unsigned k = 0; k < o.ntc; k++)
			for (int s = 0; s < NSIDES; s++) {
				struct row *rt = rows[k][t];

				if (!o.sides[s])
					continue;
				cli_progress("%s: %s, %u thread%s", trace_names[t], side_names[s],
					     o.tc[k], o.tc[k] > 1 ? "s" : "");
				uint64_t pool = rt[S_AUTO].ran ? rt[S_AUTO].pool : rt[S_FIFO].pool;

				if (run_side(&o, &d, (enum trace)t, (enum side)s, o.tc[k], pool,
					     &rt[s]))
					goto out;
				if (rt[s].ran && s != S_PLAIN) {
					rt[s].verified = rt[s].hash == rt[S_PLAIN].hash;
					if (!rt[s].verified) {
						cli_progress_done();
						fprintf(stderr, "zmem regionbench: %s on %s, %u "
							"thread%s: the pages end different from plain "
							"memory's\n", trace_names[t], side_names[s],
							o.tc[k], o.tc[k] > 1 ? "s" : "");
						bad++;
					}
				}
			}
	}
	cli_progress_done();
	if (o.json)
		print_json(&o, &d, rows);
	else
		print_table(&o, &d, rows);
	if (o.plot) {
		int rc = write_plot(o.plot, &o, &d, rows[0]);

		if (rc) {  /* the run asked for a plot it did not get: a failure */
			fprintf(stderr, "zmem regionbench: writing %s: %s\n", o.plot, strerror(-rc));
			bad++;
		} else if (!o.json)
			printf("\nplot: %s\n", o.plot);
	}
	status = bad ? CLI_FAIL : CLI_OK;
out:
	cli_progress_done();
	bench_data_free(&d);
	return status;
}
