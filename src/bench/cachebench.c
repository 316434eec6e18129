/*
 * zmem cachebench: tmem (tmem.h) under memory pressure, in the setting of
 * zcache's 2011 evaluation.  Four modes, each on every allocator asked
 * for (default: every backend of zm_pool_backends()):
 *
 *   frontswap   a program's memory larger than its RAM: it writes --size
 *               bytes one page at a time into a "RAM" of --ram bytes
 *               (default half), in the spirit of xcfmalloc's 2011 512 MB into a
 *               256 MB cgroup.  The RAM is an LRU of pages; when it is
 *               full, the oldest page is swapped out: put into a
 *               PERSISTENT pool (object 0, index = page number).  A page
 *               the pool refuses goes to "disk" (the benchmark keeps it).
 *               Then the program touches every page again in order: a
 *               swapped page is fetched with get, compared with what was
 *               written, and flushed (its swap slot freed); bringing it in
 *               swaps out the oldest page again.  Last, every page still
 *               in the pool is fetched and compared.  The sweeps are
 *               sequential, so the LRU is also first in, first out.
 *               Reported: pages stored and pool pages at the end of the
 *               write (effective = pool pages / pages stored, the 2011
 *               figure, beside the one reported then), refusals by cause, ns per
 *               put and get.  Policies (--policy): "zcache", the pool's
 *               defaults (zcache's max_zsize and max_mean_zsize), and
 *               "off" (only pages that do not compress are refused):
 *               text compressing to 75% is above zcache's mean bound, so
 *               "zcache" refuses nearly all of it, and the 2011 figure
 *               is about "off".
 *   cleancache  a file-reading workload over a set of files larger than a
 *               page cache of --cache bytes (an LRU of pages kept here):
 *               --reads random page reads, zipf-skewed (--zipf) over all
 *               pages of the file set (a seeded permutation decides which
 *               pages are hot).  A clean page evicted from the page cache
 *               is put into an EPHEMERAL pool (object = file number, index
 *               = page number; the last page of a file is short); a
 *               page-cache miss tries zm_tmem_get first (a hit: no file
 *               read; the data is compared with the file's), else reads
 *               the file (pread).  One instance per allocator and tmem
 *               budget (--budgets).  The first WARMUP_PCT% of the reads
 *               fill the caches; the counters and timings are the rest's.
 *               After the reads, every page of the file set is fetched
 *               once more and each hit compared with the file.  Files:
 *               generated in a temporary directory under --dir (text from
 *               the workload generator at a mix of compression ratios, and
 *               some incompressible files, of varied sizes), removed
 *               afterwards; or --files DIR, a real tree, read only.
 *   mixed       after each cleancache run, on its instance with the budget
 *               full of ephemeral pages: half the budget's worth of file
 *               pages put into a persistent pool (policy off), so that
 *               every put needs room only evicting ephemeral pages can
 *               make, and only pages freed whole can give (the reviewers'
 *               point: an ephemeral cache must free pageframes).
 *               Reported: stored, refused for room, ephemeral pages
 *               evicted per put, pages freed; every page stored is got
 *               back and compared.
 *   speed       the same pages (the first --data set that is not zero
 *               pages, default text:0.75) put and got through a zm_store
 *               and through a tmem persistent pool of an ample budget, the
 *               same codec and allocator, the policy off on both sides:
 *               ns per put into an empty pool, per get, per put over a
 *               stored page, median of SPEED_REPS runs, and tmem / store.
 *
 * Codec: --codec, default lzo1x when built (zcache's), else lz4.
 * Output: a table per mode (or --json: {"zmem": VERSION, "command":
 * "cachebench", ..., "results": [...]}, every row with the same keys, null
 * where a figure does not apply), and --plot FILE.svg: the cleancache hit
 * ratio and memory against the budget, a line per allocator.  The exit
 * status is 1 if any page came back wrong or a call failed unexpectedly,
 * never because of a figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/common.h>
#include <zmem/pool.h>
#include <zmem/store.h>
#include <zmem/tmem.h>
#include "workload/workload.h"
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define PS 4096
#define DEF_SIZE ((size_t)64 << 20)      /* frontswap: the program's memory */
#define DEF_FILE_SET ((size_t)64 << 20)  /* cleancache: generated files */
#define DEF_CACHE ((size_t)8 << 20)      /* cleancache: the page cache */
#define DEF_BUDGETS "4M,8M,16M,32M"
#define DEF_READS 100000
#define DEF_ZIPF 0.95
#define DEF_SEED 20111201  /* any constant: the same files and reads each run */
#define WARMUP_PCT 20      /* cleancache: reads that only fill the caches */
#define SPEED_REPS 3
#define DEF_SPEED_SIZE ((size_t)16 << 20) /* 3 runs x 2 sides x 3 passes of it
					     per allocator: seconds with lzo */
#define MAX_LIST 16
#define MIN_TIMED 100      /* the tables show ns of at least this many calls */
#define MIB 1048576.0

enum { M_FRONTSWAP = 1, M_CLEANCACHE = 2, M_SPEED = 4, M_MIXED = 8 };
enum kind { K_FRONTSWAP, K_CLEANCACHE, K_SPEED, K_MIXED };
static const char *const kind_names[] = { "frontswap", "cleancache", "speed", "mixed" };

/* The generated file set: a ratio per file, drawn with these weights
 * (percent of files); 1.0 is random data, which does not compress. */
static const struct {
	enum workload_kind kind;
	double ratio;
	unsigned weight;
} file_mix[] = {
	{ WORKLOAD_TEXT, 0.25, 20 },
	{ WORKLOAD_TEXT, 0.40, 25 },
	{ WORKLOAD_TEXT, 0.55, 25 },
	{ WORKLOAD_TEXT, 0.75, 20 },
	{ WORKLOAD_RANDOM, 1.00, 10 },
};
#define FILE_MIN_PAGES 1
#define FILE_MAX_PAGES 1024  /* 4 MiB */

struct opts {
	unsigned modes;
	const char *alloc[MAX_LIST];
	size_t nalloc;
	char abuf[512];          /* alloc[] points into it */
	size_t budgets[MAX_LIST];
	size_t nbudgets;
	const char *data[MAX_LIST];
	size_t ndata;
	bool policy_zcache, policy_off;
	size_t size, ram, swap_budget, cache, file_set, speed_size;
	const char *files, *dir, *codec, *plot;
	uint64_t reads, seed;
	double zipf;
	int exclusive, json, wide;
};

/* One line of a table, one row of the JSON. */
struct row {
	enum kind kind;
	const char *allocator;
	const char *data;        /* frontswap, speed: the data set */
	const char *policy;      /* frontswap: zcache / off */
	const char *evicts;      /* what one eviction step frees */
	uint64_t budget;
	uint64_t puts, stored, gets, hits;
	uint64_t evicted_objects, evicted_pages, evictions;
	uint64_t refused_zsize, refused_mean, refused_share, refused_full, dropped;
	uint64_t pages, pool_pages, pool_bytes, meta_bytes; /* at the end of the
							       write, or now */
	uint64_t orig_bytes, compr_bytes;
	double reference;        /* effective reported in 2011, percent; < 0 none */
	double ns_get, ns_put;
	double ns_hit, ns_miss;  /* cleancache: gets that hit, that missed */
	uint64_t mismatches, errors;
	/* cleancache */
	uint64_t reads, cache_hits, file_reads;
	/* speed */
	double store_ns_put, store_ns_get, store_ns_replace, ns_replace;
	bool ephemeral;          /* speed: the ephemeral pool's row */
};

static double div0(double a, double b)
{
	return b > 0 ? a / b : -1;
}

static uint64_t refused(const struct row *r)
{
	return r->refused_zsize + r->refused_mean + r->refused_share + r->refused_full;
}

static double effective(const struct row *r)
{
	return div0((double)r->pool_pages, (double)r->pages);
}

static double reported_for(const char *allocator, const char *data)
{
	int text = !strcmp(data, "text:0.75") || !strcmp(data, "text");
	double r;

	if (!text && strcmp(data, "zero"))
		return -1;
	r = bench_2011_reported(allocator, text);
	return r > 0 ? r : -1;
}

struct rows {
	struct row *v;
	size_t n, cap;
};

static struct row *new_row(struct rows *rs, enum kind k, const char *alloc)
{
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct row *v = realloc(rs->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		rs->v = v, rs->cap = cap;
	}
	memset(&rs->v[rs->n], 0, sizeof(rs->v[0]));
	rs->v[rs->n].kind = k;
	rs->v[rs->n].allocator = alloc;
	rs->v[rs->n].reference = -1;
	rs->v[rs->n].store_ns_put = rs->v[rs->n].store_ns_get = -1;
	rs->v[rs->n].store_ns_replace = rs->v[rs->n].ns_replace = -1;
	rs->v[rs->n].ns_hit = rs->v[rs->n].ns_miss = -1;
	return &rs->v[rs->n++];
}

/* Counters of a row from the difference of two snapshots of the stats;
 * the memory figures from the later one. */
static void take_stats(struct row *r, const struct zm_tmem_stats *a, const struct zm_tmem_stats *b)
{
	r->puts = b->puts - a->puts;
	r->stored = b->puts_stored - a->puts_stored;
	r->gets = b->gets - a->gets;
	r->hits = b->hits - a->hits;
	r->evicted_objects = b->evicted_objects - a->evicted_objects;
	r->evicted_pages = b->evicted_pages - a->evicted_pages;
	r->evictions = b->evictions - a->evictions;
	r->refused_zsize = b->refused_zsize - a->refused_zsize;
	r->refused_mean = b->refused_mean - a->refused_mean;
	r->refused_share = b->refused_share - a->refused_share;
	r->refused_full = b->refused_full - a->refused_full;
	r->dropped = b->dropped - a->dropped;
	r->pages = b->ephemeral_pages + b->persistent_pages;
	r->pool_pages = b->pool_pages;
	r->pool_bytes = b->pool_bytes;
	r->meta_bytes = b->meta_bytes;
	r->orig_bytes = b->orig_bytes;
	r->compr_bytes = b->compr_bytes;
	r->budget = b->budget_bytes;
	r->evicts = b->evicts;
}

static void note_error(struct row *r, const char *what, int rc)
{
	if (!r->errors++)
		fprintf(stderr, "zmem cachebench: %s %s (%s): %s\n", kind_names[r->kind], what,
			r->allocator, strerror(-rc));
}

static int make_tmem(const struct opts *o, const char *alloc, size_t budget, unsigned pct,
		     struct zm_tmem **t)
{
	struct zm_tmem_config cfg = { .budget_bytes = budget, .allocator = alloc,
				      .codec = o->codec, .page_size = PS,
				      .persistent_pct = pct };
	int rc = zm_tmem_create(&cfg, t);

	if (rc)
		fprintf(stderr, "zmem cachebench: creating a tmem (%s, %s, %zu bytes): %s\n", alloc,
			o->codec, budget, strerror(-rc));
	return rc;
}

static int make_pool(struct zm_tmem *t, enum zm_tmem_kind kind, int exclusive, bool policy_off)
{
	struct zm_tmem_pool_config pc = { .kind = kind, .exclusive_gets = exclusive };
	int id;

	if (policy_off) {
		/* the most a pool takes: a page less the key an ephemeral
		 * object carries (tmem.h: 16 bytes), for either kind */
		pc.max_zsize = PS - 16;
		pc.max_mean_zsize = SIZE_MAX;
	}
	id = zm_tmem_pool_create(t, &pc);
	if (id < 0)
		fprintf(stderr, "zmem cachebench: creating a %s pool: %s\n",
			kind == ZM_TMEM_EPHEMERAL ? "ephemeral" : "persistent", strerror(-id));
	return id;
}

/* ---- frontswap ------------------------------------------------------- */

enum { P_RESIDENT, P_SWAPPED, P_DISK, P_NONE };

struct swapper {
	struct zm_tmem *t;
	int pool;
	const struct bench_data *d;
	uint8_t *state;      /* per page */
	uint32_t *ring;      /* the RAM: pages in touch order */
	size_t head, count, cap;
	uint64_t put_ns, get_ns, nput, nget;
	struct row *r;
};

/* Swap out the oldest page of the RAM. */
static void swap_out(struct swapper *s)
{
	uint32_t p = s->ring[s->head];
	uint64_t t0 = cli_now_ns();
	int rc = zm_tmem_put(s->t, s->pool, 0, p, s->d->buf + (size_t)p * PS, PS);

	s->put_ns += cli_now_ns() - t0, s->nput++;
	s->head = (s->head + 1) % s->cap, s->count--;
	if (!rc)
		s->state[p] = P_SWAPPED;
	else if (rc == -E2BIG || rc == -ENOSPC)
		s->state[p] = P_DISK;
	else {
		s->state[p] = P_DISK;
		note_error(s->r, "put", rc);
	}
}

/* The program touches page p: in RAM afterwards. */
static void touch(struct swapper *s, uint32_t p, uint8_t *buf)
{
	if (s->state[p] == P_RESIDENT)
		return;  /* not in a sequential sweep over more than the RAM */
	if (s->state[p] == P_SWAPPED) {
		uint64_t t0 = cli_now_ns();
		int rc = zm_tmem_get(s->t, s->pool, 0, p, buf, PS);

		s->get_ns += cli_now_ns() - t0, s->nget++;
		if (rc != PS || memcmp(buf, s->d->buf + (size_t)p * PS, PS)) {
			if (!s->r->mismatches++)
				fprintf(stderr, "zmem cachebench: frontswap %s: page %u came back %s\n",
					s->r->allocator, p, rc < 0 ? strerror(-rc) : "wrong");
		}
		rc = zm_tmem_flush_page(s->t, s->pool, 0, p);
		if (rc)
			note_error(s->r, "flush_page", rc);
	}
	if (s->count == s->cap)
		swap_out(s);
	s->ring[(s->head + s->count) % s->cap] = p;
	s->count++;
	s->state[p] = P_RESIDENT;
}

static int run_frontswap(const struct opts *o, const char *alloc, const struct bench_data *d,
			 bool policy_off, struct row *r)
{
	uint32_t n = (uint32_t)(d->len / PS);
	struct swapper s = { .d = d, .r = r };
	struct zm_tmem_stats a, b, end;
	uint8_t *buf = malloc(PS);
	int rc = -1;

	r->data = d->name;
	r->policy = policy_off ? "off" : "zcache";
	r->reference = policy_off ? reported_for(alloc, d->name) : -1;
	s.cap = o->ram / PS;
	s.state = malloc(n);
	s.ring = malloc(s.cap * sizeof(*s.ring));
	if (!buf || !s.state || !s.ring) {
		fprintf(stderr, "zmem cachebench: out of memory\n");
		goto out;
	}
	memset(s.state, P_NONE, n);
	if (make_tmem(o, alloc, o->swap_budget, 0, &s.t))
		goto out;
	s.pool = make_pool(s.t, ZM_TMEM_PERSISTENT, 0, policy_off);
	if (s.pool < 0)
		goto out;
	zm_tmem_stats(s.t, s.pool, &a);
	/* the write: every page once, in order */
	for (uint32_t p = 0; p < n; p++)
		touch(&s, p, buf);
	zm_tmem_stats(s.t, s.pool, &b);
	take_stats(r, &a, &b);  /* what the 2011 figure is about */
	/* a second sweep: every swapped page comes back */
	for (uint32_t p = 0; p < n; p++)
		touch(&s, p, buf);
	/* and what the pool holds at the end */
	for (uint32_t p = 0; p < n; p++) {
		if (s.state[p] != P_SWAPPED)
			continue;
		uint64_t t0 = cli_now_ns();
		int g = zm_tmem_get(s.t, s.pool, 0, p, buf, PS);

		s.get_ns += cli_now_ns() - t0, s.nget++;
		if (g != PS || memcmp(buf, d->buf + (size_t)p * PS, PS))
			r->mismatches++;
	}
	zm_tmem_stats(s.t, s.pool, &end);
	r->puts = end.puts - a.puts;
	r->gets = end.gets - a.gets;
	r->hits = end.hits - a.hits;
	r->ns_put = div0((double)s.put_ns, (double)s.nput);
	r->ns_get = div0((double)s.get_ns, (double)s.nget);
	if (zm_tmem_check(s.t))
		note_error(r, "check", -EUCLEAN);
	rc = 0;
out:
	zm_tmem_destroy(s.t);
	free(buf), free(s.state), free(s.ring);
	return rc;
}

/* ---- the file set ---------------------------------------------------- */

struct file {
	char *path;
	int fd;             /* -1: opened for each read */
	uint64_t size;
	uint32_t pages;
	uint64_t first;     /* global number of its first page */
	double ratio;       /* generated: the target; < 0 unknown */
};

struct fileset {
	struct file *f;
	size_t n, cap;
	uint64_t pages, bytes;
	char *tmpdir;       /* generated: removed at the end */
	size_t limit;       /* --files: stop after this many bytes; 0 = all */
};

static int add_file(struct fileset *fs, const char *path, uint64_t size, double ratio)
{
	struct file *f;

	if (fs->n == fs->cap) {
		size_t cap = fs->cap ? fs->cap * 2 : 256;

		f = realloc(fs->f, cap * sizeof(*f));
		if (!f)
			return -1;
		fs->f = f, fs->cap = cap;
	}
	f = &fs->f[fs->n];
	f->path = strdup(path);
	if (!f->path)
		return -1;
	f->fd = -1;
	f->size = size;
	f->pages = (uint32_t)((size + PS - 1) / PS);
	f->first = fs->pages;
	f->ratio = ratio;
	fs->pages += f->pages;
	fs->bytes += size;
	fs->n++;
	return 0;
}

static struct fileset *walk_fs;

/* a file of the --files tree that cannot be read: the run fails with its
 * error, as a --corpus tree's (a tree the user named is read whole) */
static char walk_err_path[4096];
static int walk_err;

static int walk_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	if (type == FTW_DNR) {
		walk_err = EACCES;
		snprintf(walk_err_path, sizeof(walk_err_path), "%s", path);
		return -1;
	}
	if (type != FTW_F || !S_ISREG(sb->st_mode) || sb->st_size <= 0)
		return 0;
	if (access(path, R_OK)) {
		walk_err = errno;
		snprintf(walk_err_path, sizeof(walk_err_path), "%s", path);
		return -1;
	}
	if ((uint64_t)sb->st_size / PS >= UINT32_MAX)
		return 0;
	if (walk_fs->pages + (uint64_t)sb->st_size / PS + 1 >= UINT32_MAX)
		return 1;
	if (add_file(walk_fs, path, (uint64_t)sb->st_size, -1))
		return -1;
	return walk_fs->limit && walk_fs->bytes >= walk_fs->limit ? 1 : 0;
}

/* Open every file if the descriptors allow; else each read opens its own. */
static void open_files(struct fileset *fs)
{
	struct rlimit rl;
	size_t room = 256;

	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		room = rl.rlim_cur > 64 ? (size_t)rl.rlim_cur - 64 : 0;
	}
	for (size_t i = 0; i < fs->n && i < room; i++)
		fs->f[i].fd = open(fs->f[i].path, O_RDONLY | O_CLOEXEC);
}

static int gen_files(const struct opts *o, struct fileset *fs)
{
	char path[4096], hb[32];
	struct zm_codec *codec = NULL;
	uint8_t *buf = malloc((size_t)FILE_MAX_PAGES * PS);
	uint64_t s = o->seed ^ 0x5eed5eedull, left = o->file_set;
	unsigned total = 0;
	int rc;

	for (size_t i = 0; i < sizeof(file_mix) / sizeof(file_mix[0]); i++)
		total += file_mix[i].weight;
	snprintf(path, sizeof(path), "%s/zmem-cachebench-XXXXXX", o->dir);
	if (!buf || !mkdtemp(path)) {
		fprintf(stderr, "zmem cachebench: making a directory in %s: %s\n", o->dir,
			strerror(buf ? errno : ENOMEM));
		free(buf);
		return -1;
	}
	fs->tmpdir = strdup(path);
	rc = fs->tmpdir ? zm_codec_create(o->codec, 0, &codec) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "zmem cachebench: codec %s: %s\n", o->codec, strerror(-rc));
		free(buf);
		return -1;
	}
	while (left > 0) {
		/* sizes log-uniform over 1 .. FILE_MAX_PAGES pages; half of
		 * the files end in a short page */
		double e = (double)(zmi_rand(&s) % 10001) / 10000.0;
		uint32_t pages = (uint32_t)exp(e * log((double)FILE_MAX_PAGES));
		unsigned w = (unsigned)(zmi_rand(&s) % total), m = 0;
		uint64_t size;
		int fd;

		if (pages < FILE_MIN_PAGES)
			pages = FILE_MIN_PAGES;
		if ((uint64_t)pages * PS > left)
			pages = (uint32_t)((left + PS - 1) / PS);
		size = (uint64_t)pages * PS;
		if (zmi_rand(&s) % 2)
			size -= zmi_rand(&s) % (PS - 1) + 1;
		if (size > left)
			size = left;
		while (w >= file_mix[m].weight)
			w -= file_mix[m++].weight;
		rc = workload_fill(file_mix[m].kind, file_mix[m].ratio, codec,
				   o->seed + fs->n, buf, (size_t)pages * PS, PS, NULL);
		if (rc) {
			fprintf(stderr, "zmem cachebench: generating a file: %s\n", strerror(-rc));
			break;
		}
		snprintf(path, sizeof(path), "%s/f%05zu", fs->tmpdir, fs->n);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, buf, size) != (ssize_t)size || close(fd)) {
			fprintf(stderr, "zmem cachebench: writing %s: %s\n", path, strerror(errno));
			rc = -1;
			break;
		}
		if (add_file(fs, path, size, file_mix[m].ratio)) {
			rc = -1;
			break;
		}
		left -= size;
		cli_progress("generating files: %s", zmi_human_bytes(fs->bytes, hb, sizeof(hb)));
	}
	cli_progress_done();
	zm_codec_destroy(codec);
	free(buf);
	return rc ? -1 : 0;
}

static int make_fileset(const struct opts *o, struct fileset *fs)
{
	memset(fs, 0, sizeof(*fs));
	if (o->files) {
		fs->limit = o->file_set;
		walk_fs = fs;
		walk_err = 0;
		if (nftw(o->files, walk_one, 64, FTW_PHYS) < 0) {
			if (walk_err) {
				cli_fail("cachebench", "--files: %s: %s", walk_err_path,
					 strerror(walk_err));
				return -1;
			}
			fprintf(stderr, "zmem cachebench: reading %s: %s\n", o->files, strerror(errno));
			return -1;
		}
	} else if (gen_files(o, fs)) {
		return -1;
	}
	if (fs->pages < 2) {
		fprintf(stderr, "zmem cachebench: the file set has fewer than 2 pages\n");
		return -1;
	}
	open_files(fs);
	return 0;
}

static void free_fileset(struct fileset *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		if (fs->f[i].fd >= 0)
			close(fs->f[i].fd);
		if (fs->tmpdir)
			unlink(fs->f[i].path);
		free(fs->f[i].path);
	}
	if (fs->tmpdir)
		rmdir(fs->tmpdir);
	free(fs->tmpdir);
	free(fs->f);
}

/* The file of global page g (binary search over the first pages). */
static size_t file_of(const struct fileset *fs, uint64_t g)
{
	size_t lo = 0, hi = fs->n - 1;

	while (lo < hi) {
		size_t mid = (lo + hi + 1) / 2;

		if (fs->f[mid].first <= g)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* Read page idx of file f into buf: its length (1 .. PS), or -errno. */
static int read_page(struct file *f, uint32_t idx, uint8_t *buf)
{
	uint64_t off = (uint64_t)idx * PS;
	size_t want = f->size - off < PS ? (size_t)(f->size - off) : PS;
	int fd = f->fd >= 0 ? f->fd : open(f->path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, buf, want, (off_t)off);
	if (f->fd < 0)
		close(fd);
	if (got < 0)
		return -errno;
	return got == (ssize_t)want ? (int)want : -EIO;
}

/* ---- the reads ------------------------------------------------------- */

/* o->reads global page numbers, zipf(s) over a seeded permutation of the
 * pages: the same for every allocator and budget. */
static uint32_t *make_reads(const struct opts *o, uint64_t n)
{
	uint32_t *t = malloc(o->reads * sizeof(*t));
	uint32_t *perm = malloc(n * sizeof(*perm));
	double *cdf = malloc(n * sizeof(*cdf)), sum = 0;
	uint64_t s = o->seed ? o->seed : 1;

	if (!t || !perm || !cdf) {
		free(t), free(perm), free(cdf);
		return NULL;
	}
	for (uint64_t i = 0; i < n; i++) {
		perm[i] = (uint32_t)i;
		sum += pow((double)(i + 1), -o->zipf);
		cdf[i] = sum;
	}
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = zmi_rand(&s) % (i + 1);
		uint32_t x = perm[i];

		perm[i] = perm[j], perm[j] = x;
	}
	for (uint64_t k = 0; k < o->reads; k++) {
		double u = (double)(zmi_rand(&s) >> 11) / 9007199254740992.0 * sum;
		uint64_t lo = 0, hi = n - 1;

		while (lo < hi) {
			uint64_t mid = (lo + hi) / 2;

			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		t[k] = perm[lo];
	}
	free(perm), free(cdf);
	return t;
}

/* The page cache: an LRU of slots, most recent at the head. */
struct pcache {
	uint8_t *buf;        /* slots * PS */
	uint32_t *key;       /* global page of each slot */
	uint16_t *len;       /* its length (PS fits: 1 .. 4096) */
	int32_t *prev, *next;
	int32_t *where;      /* per global page: its slot, -1 */
	int32_t head, tail;
	uint32_t used, slots;
};

static int pcache_init(struct pcache *c, uint32_t slots, uint64_t pages)
{
	memset(c, 0, sizeof(*c));
	c->slots = slots;
	c->buf = malloc((size_t)slots * PS);
	c->key = malloc(slots * sizeof(*c->key));
	c->len = malloc(slots * sizeof(*c->len));
	c->prev = malloc(slots * sizeof(*c->prev));
	c->next = malloc(slots * sizeof(*c->next));
	c->where = malloc(pages * sizeof(*c->where));
	return c->buf && c->key && c->len && c->prev && c->next && c->where ? 0 : -1;
}

static void pcache_reset(struct pcache *c, uint64_t pages)
{
	memset(c->where, 0xff, pages * sizeof(*c->where));
	c->head = c->tail = -1;
	c->used = 0;
}

static void pcache_free(struct pcache *c)
{
	free(c->buf), free(c->key), free(c->len), free(c->prev), free(c->next), free(c->where);
}

static void lru_unlink(struct pcache *c, int32_t i)
{
	if (c->prev[i] >= 0)
		c->next[c->prev[i]] = c->next[i];
	else
		c->head = c->next[i];
	if (c->next[i] >= 0)
		c->prev[c->next[i]] = c->prev[i];
	else
		c->tail = c->prev[i];
}

static void lru_push(struct pcache *c, int32_t i)
{
	c->prev[i] = -1;
	c->next[i] = c->head;
	if (c->head >= 0)
		c->prev[c->head] = i;
	c->head = i;
	if (c->tail < 0)
		c->tail = i;
}

struct ccrun {
	const struct opts *o;
	struct fileset *fs;
	struct pcache *c;
	struct zm_tmem *t;
	int pool;
	uint8_t *vbuf;       /* the file's copy, for comparing */
	uint64_t put_ns, get_ns, nput, nget, hit_ns, nhit;
	struct row *r;
};

/* Does what get gave (len bytes in buf) equal page idx of file f? */
static bool matches(struct ccrun *x, size_t fi, uint32_t idx, const uint8_t *buf, int len)
{
	int want = read_page(&x->fs->f[fi], idx, x->vbuf);

	if (want < 0) {
		note_error(x->r, "reading a file", want);
		return true;
	}
	return len == want && !memcmp(buf, x->vbuf, (size_t)len);
}

static void cc_read(struct ccrun *x, uint32_t g)
{
	struct pcache *c = x->c;
	int32_t slot = c->where[g];
	size_t fi;
	uint32_t idx;
	uint8_t *p;
	uint64_t t0;
	int rc;

	x->r->reads++;
	if (slot >= 0) {
		x->r->cache_hits++;
		lru_unlink(c, slot);
		lru_push(c, slot);
		return;
	}
	if (c->used < c->slots) {
		slot = (int32_t)c->used++;
	} else {
		/* the coldest clean page goes to tmem */
		uint32_t og = c->key[c->tail];
		size_t ofi = file_of(x->fs, og);

		slot = c->tail;
		lru_unlink(c, slot);
		c->where[og] = -1;
		t0 = cli_now_ns();
		rc = zm_tmem_put(x->t, x->pool, ofi, (uint32_t)(og - x->fs->f[ofi].first),
				 c->buf + (size_t)slot * PS, c->len[slot]);
		x->put_ns += cli_now_ns() - t0, x->nput++;
		if (rc && rc != -E2BIG && rc != -ENOSPC)
			note_error(x->r, "put", rc);
	}
	fi = file_of(x->fs, g);
	idx = (uint32_t)(g - x->fs->f[fi].first);
	p = c->buf + (size_t)slot * PS;
	t0 = cli_now_ns();
	rc = zm_tmem_get(x->t, x->pool, fi, idx, p, PS);
	t0 = cli_now_ns() - t0;
	x->get_ns += t0, x->nget++;
	if (rc > 0)
		x->hit_ns += t0, x->nhit++;
	if (rc > 0 && !matches(x, fi, idx, p, rc)) {
		if (!x->r->mismatches++)
			fprintf(stderr, "zmem cachebench: cleancache %s: file %zu page %u came back "
				"wrong\n", x->r->allocator, fi, idx);
		rc = -ENOENT;  /* read the file instead */
	} else if (rc < 0 && rc != -ENOENT) {
		note_error(x->r, "get", rc);
	}
	if (rc <= 0) {
		rc = read_page(&x->fs->f[fi], idx, p);
		x->r->file_reads++;
		if (rc < 0) {
			note_error(x->r, "reading a file", rc);
			rc = 1;
		}
	}
	c->len[slot] = (uint16_t)rc;
	c->key[slot] = g;
	c->where[g] = slot;
	lru_push(c, slot);
}

/* mixed: swap pages arrive while the cleancache holds the whole budget.
 * Half the budget's worth of file pages (in file order) is put into a
 * persistent pool of the same instance: each needs room that only
 * evicting ephemeral pages can make, and only pages freed whole can go
 * to the other pool.  Every page stored is got back and compared. */
static void run_mixed(struct ccrun *x, size_t budget, struct row *r)
{
	uint64_t n = budget / PS / 2, t0;
	struct zm_tmem_stats a, b;
	uint8_t *stored, *buf = x->c->buf;
	int pool, rc;

	if (n > x->fs->pages)
		n = x->fs->pages;
	stored = calloc(n ? n : 1, 1);
	pool = make_pool(x->t, ZM_TMEM_PERSISTENT, 0, true);
	if (!stored || pool < 0) {
		note_error(r, "setting up", pool < 0 ? pool : -ENOMEM);
		free(stored);
		return;
	}
	zm_tmem_stats(x->t, 0, &a);
	x->put_ns = x->nput = 0;
	for (uint64_t g = 0; g < n; g++) {
		size_t fi = file_of(x->fs, g);
		uint32_t idx = (uint32_t)(g - x->fs->f[fi].first);
		int len = read_page(&x->fs->f[fi], idx, buf);

		if (len <= 0) {
			note_error(r, "reading a file", len < 0 ? len : -EIO);
			continue;
		}
		t0 = cli_now_ns();
		rc = zm_tmem_put(x->t, pool, fi, idx, buf, (size_t)len);
		x->put_ns += cli_now_ns() - t0, x->nput++;
		if (!rc)
			stored[g] = 1;
		else if (rc != -ENOSPC && rc != -E2BIG)
			note_error(r, "put", rc);
	}
	zm_tmem_stats(x->t, 0, &b);
	take_stats(r, &a, &b);
	r->budget = budget;
	r->ns_put = div0((double)x->put_ns, (double)x->nput);
	for (uint64_t g = 0; g < n; g++) {
		size_t fi = file_of(x->fs, g);
		uint32_t idx = (uint32_t)(g - x->fs->f[fi].first);

		if (!stored[g])
			continue;
		rc = zm_tmem_get(x->t, pool, fi, idx, buf, PS);
		if (rc <= 0 || !matches(x, fi, idx, buf, rc)) {
			if (!r->mismatches++)
				fprintf(stderr, "zmem cachebench: mixed %s: file %zu page %u came back "
					"wrong (%d)\n", r->allocator, fi, idx, rc);
		}
	}
	if (zm_tmem_check(x->t))
		note_error(r, "check", -EUCLEAN);
	free(stored);
}

static int run_cleancache(const struct opts *o, const char *alloc, size_t budget,
			  struct fileset *fs, struct pcache *c, const uint32_t *reads,
			  struct row *r, struct row *mr)
{
	struct ccrun x = { .o = o, .fs = fs, .c = c, .r = r };
	struct zm_tmem_stats a, b;
	uint64_t warm = o->reads * WARMUP_PCT / 100;
	int rc = -1;

	x.vbuf = malloc(PS);
	if (!x.vbuf || make_tmem(o, alloc, budget, 0, &x.t))
		goto out;
	x.pool = make_pool(x.t, ZM_TMEM_EPHEMERAL, o->exclusive, false);
	if (x.pool < 0)
		goto out;
	pcache_reset(c, fs->pages);
	for (uint64_t k = 0; k < warm; k++)
		cc_read(&x, reads[k]);
	zm_tmem_stats(x.t, x.pool, &a);
	x.put_ns = x.get_ns = x.nput = x.nget = x.hit_ns = x.nhit = 0;
	r->reads = r->cache_hits = r->file_reads = 0;
	for (uint64_t k = warm; k < o->reads; k++)
		cc_read(&x, reads[k]);
	zm_tmem_stats(x.t, x.pool, &b);
	take_stats(r, &a, &b);
	r->budget = budget;
	r->ns_put = div0((double)x.put_ns, (double)x.nput);
	r->ns_get = div0((double)x.get_ns, (double)x.nget);
	r->ns_hit = div0((double)x.hit_ns, (double)x.nhit);
	r->ns_miss = div0((double)(x.get_ns - x.hit_ns), (double)(x.nget - x.nhit));
	if (zm_tmem_check(x.t))
		note_error(r, "check", -EUCLEAN);
	/* every page once more: a hit must be the file's data */
	for (size_t fi = 0; fi < fs->n; fi++)
		for (uint32_t idx = 0; idx < fs->f[fi].pages; idx++) {
			int g = zm_tmem_get(x.t, x.pool, fi, idx, c->buf, PS);

			if (g > 0 && !matches(&x, fi, idx, c->buf, g)) {
				if (!r->mismatches++)
					fprintf(stderr, "zmem cachebench: cleancache %s: file %zu page %u "
						"reads back wrong\n", alloc, fi, idx);
			} else if (g < 0 && g != -ENOENT) {
				note_error(r, "get", g);
			}
		}
	if (mr)
		run_mixed(&x, budget, mr);
	rc = 0;
out:
	zm_tmem_destroy(x.t);
	free(x.vbuf);
	return rc;
}

/* ---- speed ----------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median3(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One run through a store: ns per put (empty), get, put (replace). */
static int speed_store(const struct opts *o, const char *alloc, const struct bench_data *d,
		       double ns[3], struct row *r, bool verify)
{
	uint32_t n = (uint32_t)(d->len / PS);
	struct zm_store_config cfg = { .nr_pages = n, .page_size = PS, .codec = o->codec,
				       .allocator = alloc, .no_same_filled = true };
	uint8_t *buf = malloc(PS);
	struct zm_store *s;
	uint64_t t0;
	int rc = buf ? zm_store_create(&cfg, &s) : -ENOMEM;

	if (rc) {
		fprintf(stderr, "zmem cachebench: creating a store (%s): %s\n", alloc, strerror(-rc));
		free(buf);
		return -1;
	}
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_store_put(s, i, d->buf + (size_t)i * PS)))
			note_error(r, "store put", rc);
	ns[0] = (double)(cli_now_ns() - t0) / n;
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_store_get(s, i, buf)))
			note_error(r, "store get", rc);
	ns[1] = (double)(cli_now_ns() - t0) / n;
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_store_put(s, i, d->buf + (size_t)((i + 1) % n) * PS)))
			note_error(r, "store put", rc);
	ns[2] = (double)(cli_now_ns() - t0) / n;
	for (uint32_t i = 0; verify && i < n; i++)
		if (zm_store_get(s, i, buf) || memcmp(buf, d->buf + (size_t)((i + 1) % n) * PS, PS))
			r->mismatches++;
	zm_store_destroy(s);
	free(buf);
	return 0;
}

/* The same through a tmem persistent pool. */
static int speed_tmem(const struct opts *o, const char *alloc, const struct bench_data *d,
		      enum zm_tmem_kind kind, double ns[3], struct row *r, bool verify)
{
	uint32_t n = (uint32_t)(d->len / PS);
	struct zm_tmem_stats a, b;
	struct zm_tmem *t;
	uint8_t *buf = malloc(PS);
	uint64_t t0;
	int rc, pool;

	if (!buf || make_tmem(o, alloc, 2 * d->len + ((size_t)16 << 20), 100, &t)) {
		free(buf);
		return -1;
	}
	pool = make_pool(t, kind, 0, true);
	if (pool < 0) {
		zm_tmem_destroy(t);
		free(buf);
		return -1;
	}
	zm_tmem_stats(t, pool, &a);
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_tmem_put(t, pool, 0, i, d->buf + (size_t)i * PS, PS)) &&
		    rc != -E2BIG)
			note_error(r, "put", rc);
	ns[0] = (double)(cli_now_ns() - t0) / n;
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_tmem_get(t, pool, 0, i, buf, PS)) != PS && rc != -ENOENT)
			note_error(r, "get", rc);
	ns[1] = (double)(cli_now_ns() - t0) / n;
	t0 = cli_now_ns();
	for (uint32_t i = 0; i < n; i++)
		if ((rc = zm_tmem_put(t, pool, 0, i, d->buf + (size_t)((i + 1) % n) * PS, PS)) &&
		    rc != -E2BIG)
			note_error(r, "put", rc);
	ns[2] = (double)(cli_now_ns() - t0) / n;
	zm_tmem_stats(t, pool, &b);
	if (verify) {
		take_stats(r, &a, &b);
		for (uint32_t i = 0; i < n; i++) {
			rc = zm_tmem_get(t, pool, 0, i, buf, PS);
			if (rc == -ENOENT)
				continue;  /* refused: does not compress */
			if (rc != PS || memcmp(buf, d->buf + (size_t)((i + 1) % n) * PS, PS))
				r->mismatches++;
		}
		if (zm_tmem_check(t))
			note_error(r, "check", -EUCLEAN);
	}
	zm_tmem_destroy(t);
	free(buf);
	return 0;
}

/* The same pages through a store, a persistent and an ephemeral pool,
 * SPEED_REPS times in turn (the order rotating, so that drift of the
 * machine hits each); r and re (the ephemeral row) get the medians. */
static int run_speed(const struct opts *o, const char *alloc, const struct bench_data *whole,
		     struct row *r, struct row *re)
{
	double st[3][SPEED_REPS], tm[3][SPEED_REPS], te[3][SPEED_REPS];
	struct bench_data part = *whole, *d = &part;

	part.len = o->speed_size / PS * PS < whole->len ? o->speed_size / PS * PS : whole->len;

	r->data = re->data = whole->name;
	r->policy = re->policy = "off";
	re->ephemeral = true;
	for (int k = 0; k < SPEED_REPS; k++) {
		double ns[3][3];

		cli_progress("speed, %s, run %d/%d", alloc, k + 1, SPEED_REPS);
		for (int j = 0; j < 3; j++) {
			int which = (j + k) % 3, rc;

			if (which == 0)
				rc = speed_store(o, alloc, d, ns[0], r, k == 0);
			else if (which == 1)
				rc = speed_tmem(o, alloc, d, ZM_TMEM_PERSISTENT, ns[1], r, k == 0);
			else
				rc = speed_tmem(o, alloc, d, ZM_TMEM_EPHEMERAL, ns[2], re, k == 0);
			if (rc)
				return -1;
		}
		for (int i = 0; i < 3; i++)
			st[i][k] = ns[0][i], tm[i][k] = ns[1][i], te[i][k] = ns[2][i];
	}
	cli_progress_done();
	r->store_ns_put = re->store_ns_put = median3(st[0], SPEED_REPS);
	r->store_ns_get = re->store_ns_get = median3(st[1], SPEED_REPS);
	r->store_ns_replace = re->store_ns_replace = median3(st[2], SPEED_REPS);
	r->ns_put = median3(tm[0], SPEED_REPS);
	r->ns_get = median3(tm[1], SPEED_REPS);
	r->ns_replace = median3(tm[2], SPEED_REPS);
	re->ns_put = median3(te[0], SPEED_REPS);
	re->ns_get = median3(te[1], SPEED_REPS);
	re->ns_replace = median3(te[2], SPEED_REPS);
	return 0;
}

/* ---- output ---------------------------------------------------------- */

static void pct_or_dash(char *buf, size_t len, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f%%", v);
}

static void size_label(char *buf, size_t len, uint64_t b)
{
	if (b >= (1u << 30) && b % (1u << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(b >> 30));
	else if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
	else if (b % 1024 == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)b);
}

/* ns per call, or "-" when too few calls were timed to mean anything
 * (one cold call costs tens of microseconds) */
static void ns_label(char *buf, size_t len, double ns, uint64_t calls)
{
	if (ns < 0 || calls < MIN_TIMED)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", ns);
}

/* The cleancache figures of one allocator summed over its budgets:
 * pages freed per evicted object, and the bytes they free against the
 * evicted objects' bytes (estimated at the mean compressed size of the
 * pages stored: the best a step can do is free exactly those). */
static void pages_per_object(const struct rows *rs, const char *alloc, double *ppo,
			     double *per_byte, const char **evicts)
{
	uint64_t objs = 0, pages = 0;
	double zbytes = 0;

	*evicts = "-";
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].kind == K_CLEANCACHE && !strcmp(rs->v[i].allocator, alloc)) {
			objs += rs->v[i].evicted_objects;
			pages += rs->v[i].evicted_pages;
			zbytes += (double)rs->v[i].evicted_objects *
				  div0((double)rs->v[i].compr_bytes, (double)rs->v[i].pages);
			if (rs->v[i].evicts)
				*evicts = rs->v[i].evicts;
		}
	*ppo = div0((double)pages, (double)objs);
	*per_byte = div0((double)pages * PS, zbytes);
}

static const struct row *find_cc(const struct rows *rs, const char *alloc, uint64_t budget)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].kind == K_CLEANCACHE && rs->v[i].budget == budget &&
		    !strcmp(rs->v[i].allocator, alloc))
			return &rs->v[i];
	return NULL;
}

/* Print an item of a list, on a new indented line if it would pass
 * column 80. */
static void __attribute__((format(printf, 2, 3))) item(int *col, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (*col + n > 80 && *col > 5) {
		printf("\n     ");
		*col = 5;
	}
	fputs(buf, stdout);
	*col += n;
}

static void print_tables(const struct opts *o, const struct rows *rs, const struct fileset *fs)
{
	char b1[32], b2[32], b3[32], b4[32];
	bool any;
	int col;

	printf("zmem cachebench: tmem under memory pressure (zcache's 2011 setting)\n"
	       "codec %s, %d-byte pages, seed %llu\n", o->codec, PS, (unsigned long long)o->seed);
	any = false;
	for (size_t i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];

		if (r->kind != K_FRONTSWAP)
			continue;
		if (!any) {
			size_label(b1, sizeof(b1), o->size);
			size_label(b2, sizeof(b2), o->ram);
			size_label(b3, sizeof(b3), o->swap_budget);
			printf("\nfrontswap: %s written one page at a time into a RAM of %s (LRU); "
			       "the rest\nswapped out to a persistent pool, tmem budget %s "
			       "(persistent share 75%%);\nfigures at the end of the write\n\n",
			       b1, b2, b3);
			/* 77 columns; --wide adds the refusals (101) */
			printf("%-9s %-6s %-9s %6s", "data", "policy", "allocator", "stored");
			if (o->wide)
				printf(" %5s %5s %5s %5s", "zsize", "mean", "share", "full");
			printf(" %7s %8s %7s %6s %6s %3s\n", "pool_pg", "effectiv", "2011",
			       "put_ns", "get_ns", "bad");
			any = true;
		}
		pct_or_dash(b1, sizeof(b1), 100 * effective(r));
		pct_or_dash(b2, sizeof(b2), r->reference);
		ns_label(b3, sizeof(b3), r->ns_put, r->puts);
		ns_label(b4, sizeof(b4), r->ns_get, r->gets);
		printf("%-9.9s %-6s %-9.9s %6llu", r->data, r->policy, r->allocator,
		       (unsigned long long)r->pages);
		if (o->wide)
			printf(" %5llu %5llu %5llu %5llu", (unsigned long long)r->refused_zsize,
			       (unsigned long long)r->refused_mean,
			       (unsigned long long)r->refused_share,
			       (unsigned long long)r->refused_full);
		printf(" %7llu %8s %7s %6s %6s %3llu\n", (unsigned long long)r->pool_pages, b1,
		       b2, b3, b4, (unsigned long long)(r->mismatches + r->errors));
	}
	if (any) {
		printf("\nstored = pages in the pool after the write; effectiv = pool pages / "
		       "pages\nstored (lower is better); 2011 = the figure reported then (32-bit, "
		       "lzo1x,\npolicy as run there): xvmalloc 1.93%% / 99.95%%, xcfmalloc 3.72%% / "
		       "78.11%%\n(zero pages / text at 75%%); put_ns, get_ns: inside "
		       "zm_tmem_put/get, both\nsweeps (-: fewer than %d calls); bad = pages back "
		       "wrong + errors.\n", MIN_TIMED);
		if (o->wide)
			printf("zsize/mean/share/full = puts refused (max_zsize, max_mean_zsize, "
			       "the\npersistent share, no room).\n");
		else
			printf("--wide adds the puts refused (max_zsize, max_mean_zsize, the "
			       "persistent\nshare, no room).\n");
	}
	any = false;
	for (size_t i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];

		if (r->kind != K_CLEANCACHE)
			continue;
		if (!any) {
			size_label(b1, sizeof(b1), o->cache);
			printf("\ncleancache: %zu files, %.1f MiB (%llu pages) %s;\npage cache %s; "
			       "%llu reads, zipf %.2f; the last %d%% measured\n\n", fs->n,
			       (double)fs->bytes / MIB, (unsigned long long)fs->pages,
			       o->files ? o->files : "generated", b1,
			       (unsigned long long)o->reads, o->zipf, 100 - WARMUP_PCT);
			/* 74 columns; --wide adds gets, ev_objs, put_ns (97) */
			printf("%-9s %6s", "allocator", "budget");
			if (o->wide)
				printf(" %7s", "gets");
			printf(" %7s %6s", "hits", "hit%");
			if (o->wide)
				printf(" %7s", "ev_objs");
			printf(" %8s %6s %7s %7s %6s", "ev_pages", "pg/obj", "refused", "mem_MiB",
			       "get_ns");
			if (o->wide)
				printf(" %6s", "put_ns");
			printf(" %3s\n", "bad");
			any = true;
		}
		size_label(b1, sizeof(b1), r->budget);
		double ppo = div0((double)r->evicted_pages, (double)r->evicted_objects);
		if (ppo < 0)
			snprintf(b2, sizeof(b2), "-");
		else
			snprintf(b2, sizeof(b2), "%.2f", ppo);
		printf("%-9.9s %6s", r->allocator, b1);
		if (o->wide)
			printf(" %7llu", (unsigned long long)r->gets);
		printf(" %7llu %6.2f", (unsigned long long)r->hits,
		       100 * (r->gets ? (double)r->hits / (double)r->gets : 0));
		if (o->wide)
			printf(" %7llu", (unsigned long long)r->evicted_objects);
		printf(" %8llu %6s %7llu %7.2f %6.0f", (unsigned long long)r->evicted_pages, b2,
		       (unsigned long long)refused(r),
		       (double)(r->pool_bytes + r->meta_bytes) / MIB, r->ns_get);
		if (o->wide)
			printf(" %6.0f", r->ns_put);
		printf(" %3llu\n", (unsigned long long)(r->mismatches + r->errors));
	}
	if (any) {
		uint64_t reads = 0, ch = 0, fr = 0;

		for (size_t i = 0; i < rs->n; i++)
			if (rs->v[i].kind == K_CLEANCACHE) {
				reads += rs->v[i].reads;
				ch += rs->v[i].cache_hits;
				fr += rs->v[i].file_reads;
			}
		printf("\nget_ns of the hits alone:");
		col = 26;
		for (size_t i = 0; i < rs->n; i++)
			if (rs->v[i].kind == K_CLEANCACHE) {
				size_label(b1, sizeof(b1), rs->v[i].budget);
				item(&col, " %s %s %.0f;", rs->v[i].allocator, b1, rs->v[i].ns_hit);
			}
		printf("\n\nhit%% = hits / gets, gets = page-cache misses (each tries tmem "
		       "first);\nev_pages = the backend pages freed by evicting ephemeral pages "
		       "(ev_objs)\nfor room; pg/obj = ev_pages / ev_objs; refused = puts refused "
		       "by policy or\nroom; mem_MiB = pool + metadata at the end; get_ns, put_ns: "
		       "inside\nzm_tmem_get/put.  Page cache hit ratio over every run %.1f%%; "
		       "file reads:\n%.1f%% of the reads.%s\n",
		       100 * div0((double)ch, (double)reads), 100 * div0((double)fr, (double)reads),
		       o->wide ? "" : "  --wide adds gets, ev_objs and put_ns.");
	}
	any = false;
	for (size_t i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];
		char nsb[32];

		if (r->kind != K_MIXED)
			continue;
		if (!any) {
			printf("\nmixed: after each cleancache run, half its budget's worth of file "
			       "pages put\ninto a persistent pool of the same instance (policy off)"
			       "; room comes only\nfrom evicting ephemeral pages, and only pages "
			       "freed whole can take them\n\n");
			printf("%-9s %6s %6s %6s %6s %7s %8s %6s %7s %6s %3s\n", "allocator",
			       "budget", "puts", "stored", "full", "ev_objs", "ev_pages", "pg/obj",
			       "ev/put", "put_ns", "bad");
			any = true;
		}
		size_label(b1, sizeof(b1), r->budget);
		ns_label(nsb, sizeof(nsb), r->ns_put, r->puts);
		printf("%-9s %6s %6llu %6llu %6llu %7llu %8llu %6.2f %7.1f %6s %3llu\n",
		       r->allocator, b1, (unsigned long long)r->puts, (unsigned long long)r->stored,
		       (unsigned long long)r->refused_full, (unsigned long long)r->evicted_objects,
		       (unsigned long long)r->evicted_pages,
		       r->evicted_objects ? (double)r->evicted_pages / (double)r->evicted_objects : 0,
		       r->puts ? (double)r->evicted_objects / (double)r->puts : 0, nsb,
		       (unsigned long long)(r->mismatches + r->errors));
	}
	if (any)
		printf("\nfull = persistent puts refused for want of room after up to 256 "
		       "eviction\nsteps; ev/put = ephemeral pages evicted per persistent put.\n");
	any = false;
	for (size_t i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];

		if (r->kind != K_SPEED)
			continue;
		if (!any) {
			size_label(b1, sizeof(b1), o->speed_size);
			printf("\nspeed: the same pages through a zm_store and a tmem pool of each "
			       "kind\n(ample budget, policy off, same codec and allocator), the first "
			       "%s of\n%s; ns per op, median of %d runs\n\n", b1, r->data, SPEED_REPS);
			/* 79 columns; --wide adds store_rep and tmem_rep (99) */
			printf("%-9s %-4s %9s %9s %6s %9s %9s %6s", "allocator", "pool", "store_put",
			       "tmem_put", "ratio", "store_get", "tmem_get", "ratio");
			if (o->wide)
				printf(" %9s %9s %6s %3s\n", "store_rep", "tmem_rep", "ratio", "bad");
			else
				printf(" %6s %3s\n", "rep", "bad");
			any = true;
		}
		printf("%-9.9s %-4s %9.0f %9.0f %6.3f %9.0f %9.0f %6.3f", r->allocator,
		       r->ephemeral ? "eph" : "pers", r->store_ns_put, r->ns_put,
		       div0(r->ns_put, r->store_ns_put), r->store_ns_get, r->ns_get,
		       div0(r->ns_get, r->store_ns_get));
		if (o->wide)
			printf(" %9.0f %9.0f %6.3f", r->store_ns_replace, r->ns_replace,
			       div0(r->ns_replace, r->store_ns_replace));
		else
			printf(" %6.3f", div0(r->ns_replace, r->store_ns_replace));
		printf(" %3llu\n", (unsigned long long)(r->mismatches + r->errors));
	}
	if (any)
		printf("\nput: into an empty pool; get; rep: a put over a stored page; ratio =\n"
		       "tmem / store; pool: persistent, or ephemeral (its puts also go on the\n"
		       "eviction list).%s\n",
		       o->wide ? "" : "  rep: its ratio (--wide: its ns too).");

	/* the figures the targets are about */
	printf("\nTargets (figures only):\n");
	if (o->modes & M_CLEANCACHE) {
		const struct row *z, *b;

		printf("  (a) cleancache hit ratio, zsmalloc against zbud at each budget:\n     ");
		col = 5;
		any = false;
		for (size_t k = 0; k < o->nbudgets; k++) {
			z = find_cc(rs, "zsmalloc", o->budgets[k]);
			b = find_cc(rs, "zbud", o->budgets[k]);
			if (!z || !b)
				continue;
			size_label(b1, sizeof(b1), o->budgets[k]);
			item(&col, " %s %.1f%% vs %.1f%% (%s);", b1,
			     100 * div0((double)z->hits, (double)z->gets),
			     100 * div0((double)b->hits, (double)b->gets),
			     z->hits * b->gets >= b->hits * z->gets ? ">=" : "<");
			any = true;
		}
		if (!any)
			printf(" (needs both allocators)");
		printf("\n  (b) pages freed per evicted object, over every budget (what a step\n"
		       "      evicts; bytes freed / the evicted objects' compressed bytes):"
		       "\n     ");
		col = 5;
		for (size_t a = 0; a < o->nalloc; a++) {
			double ppo, pb;
			const char *ev;

			pages_per_object(rs, o->alloc[a], &ppo, &pb, &ev);
			if (ppo >= 0)
				item(&col, " %s %.2f (%s; %.2fx);", o->alloc[a], ppo, ev, pb);
			else
				item(&col, " %s - (nothing evicted);", o->alloc[a]);
		}
		printf("\n");
	}
	if (o->modes & M_SPEED) {
		printf("  (c) tmem / store, ns per put and per get (persistent, ephemeral):\n     ");
		col = 5;
		for (size_t i = 0; i < rs->n; i++)
			if (rs->v[i].kind == K_SPEED)
				item(&col, " %s%s %.3f %.3f;", rs->v[i].allocator,
				     rs->v[i].ephemeral ? "/eph" : "",
				     div0(rs->v[i].ns_put, rs->v[i].store_ns_put),
				     div0(rs->v[i].ns_get, rs->v[i].store_ns_get));
		printf("\n");
	}
}

static struct json *J;

static void jnum(const char *key, double v)
{
	if (v >= 0)
		json_fixed(J, key, v, 4);
	else
		json_null(J, key);  /* does not apply (NaN and infinities too) */
}

static void ju(const char *key, uint64_t v)
{
	json_uint(J, key, v);
}

static void print_json(const struct opts *o, const struct rows *rs, const struct fileset *fs)
{
	struct json j;

	J = &j;
	json_begin(&j, stdout, "cachebench");
	json_str(&j, "codec", o->codec);
	ju("page_size_bytes", PS);
	ju("seed", o->seed);
	ju("frontswap_bytes", o->size);
	ju("ram_bytes", o->ram);
	ju("swap_budget_bytes", o->swap_budget);
	ju("speed_bytes", o->speed_size);
	ju("cache_bytes", o->cache);
	ju("reads", o->reads);
	ju("warmup_pct", WARMUP_PCT);
	jnum("zipf", o->zipf);
	json_str(&j, "files", o->files ? o->files : "generated");
	ju("file_count", fs ? fs->n : 0);
	ju("file_bytes", fs ? fs->bytes : 0);
	ju("file_pages", fs ? fs->pages : 0);
	ju("speed_reps", SPEED_REPS);
	json_str(&j, "plot", o->plot);
	json_array(&j, "results");
	for (size_t i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];
		double ppo = div0((double)r->evicted_pages, (double)r->evicted_objects);

		json_object(&j, NULL);
		json_str(&j, "allocator", r->allocator);
		json_str(&j, "kind", kind_names[r->kind]);
		json_str(&j, "pool_kind",
			 r->kind == K_CLEANCACHE || r->ephemeral ? "ephemeral" : "persistent");
		json_str(&j, "data", r->kind == K_CLEANCACHE || r->kind == K_MIXED ? NULL : r->data);
		json_str(&j, "policy", r->kind == K_CLEANCACHE ? "zcache" :
				       r->kind == K_MIXED ? "off" : r->policy);
		json_str(&j, "evicts", r->evicts);
		ju("budget_bytes", r->budget);
		ju("puts", r->puts);
		ju("puts_stored", r->stored);
		ju("gets", r->gets);
		ju("hits", r->hits);
		ju("evicted_objects", r->evicted_objects);
		ju("evicted_pages", r->evicted_pages);
		ju("evictions", r->evictions);
		ju("refused", refused(r));
		ju("refused_zsize", r->refused_zsize);
		ju("refused_mean", r->refused_mean);
		ju("refused_share", r->refused_share);
		ju("refused_full", r->refused_full);
		ju("dropped", r->dropped);
		ju("pages_stored", r->pages);
		ju("pool_pages", r->pool_pages);
		ju("pool_bytes", r->pool_bytes);
		ju("meta_bytes", r->meta_bytes);
		ju("mem_bytes", r->pool_bytes + r->meta_bytes);
		ju("orig_bytes", r->orig_bytes);
		ju("compr_bytes", r->compr_bytes);
		jnum("effective", effective(r));
		jnum("reference", r->reference >= 0 ? r->reference / 100 : -1);
		jnum("hit_ratio", div0((double)r->hits, (double)r->gets));
		jnum("pages_per_evicted", ppo);
		jnum("ns_per_get", r->ns_get);
		jnum("ns_per_hit", r->ns_hit);
		jnum("ns_per_miss", r->ns_miss);
		jnum("mean_zsize", div0((double)r->compr_bytes, (double)r->pages));
		jnum("ns_per_put", r->ns_put);
		jnum("ns_per_replace", r->ns_replace);
		jnum("store_ns_per_put", r->store_ns_put);
		jnum("store_ns_per_get", r->store_ns_get);
		jnum("store_ns_per_replace", r->store_ns_replace);
		jnum("put_ratio", r->kind == K_SPEED ? div0(r->ns_put, r->store_ns_put) : -1);
		jnum("get_ratio", r->kind == K_SPEED ? div0(r->ns_get, r->store_ns_get) : -1);
		if (r->kind == K_CLEANCACHE) {
			ju("reads", r->reads);
			ju("cache_hits", r->cache_hits);
			ju("file_reads", r->file_reads);
		} else {
			json_null(&j, "reads");
			json_null(&j, "cache_hits");
			json_null(&j, "file_reads");
		}
		ju("mismatches", r->mismatches);
		ju("errors", r->errors);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
	J = NULL;
}

/* A step of 1, 2, 2.5 or 5 times a power of ten that cuts hi into 3..8 parts. */
static double nice_step(double hi)
{
	double p = pow(10, floor(log10(hi > 0 ? hi : 1))), steps[] = { 0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5 };

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (hi / (steps[i] * p) <= 8)
			return steps[i] * p;
	return 10 * p;
}

#define PL 90.0
#define PR 30.0

/* One panel: y[a * nx + k] for allocator a at budget k (< 0: none),
 * from 0 to top (0: rounded up from the data), x evenly spaced. */
static void panel(FILE *f, double y0, double h, const char *title, const char *ytitle,
		  const char *xtitle, const char *const *xl, size_t nx, const char *const *names,
		  size_t ns, const double *y, double top, const double *ref)
{
	double pw = PLOT_W - PL - PR, step = pw / (double)nx, hi = 0, tick;
	char lab[32], tip[160];

	for (size_t i = 0; i < ns * nx; i++)
		hi = y[i] > hi ? y[i] : hi;
	for (size_t k = 0; ref && k < nx; k++)
		hi = ref[k] > hi ? ref[k] : hi;
	if (top > 0) {
		hi = top;
		tick = nice_step(top);
	} else {
		tick = nice_step(hi > 0 ? hi : 1);
		hi = ceil((hi > 0 ? hi * 1.05 : 1) / tick) * tick;
	}
	plot_text(f, PLOT_W / 2.0, y0 - 10, "middle", 14, title);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"#999\"/>\n", PL, y0, pw, h);
	fprintf(f, "<text x=\"22\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
		"transform=\"rotate(-90 22 %.1f)\">%s</text>\n", y0 + h / 2, y0 + h / 2, ytitle);
	for (double v = 0; v <= hi + tick / 1000; v += tick) {
		double yy = y0 + h - h * v / hi;

		plot_tick_label(lab, sizeof(lab), v, tick);
		plot_text(f, PL - 6, yy + 4, "end", 11, lab);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			PL, yy, PL + pw, yy);
	}
	for (size_t k = 0; k < nx; k++)
		plot_text(f, PL + step * ((double)k + 0.5), y0 + h + 16, "middle", 11, xl[k]);
	plot_text(f, PL + pw / 2, y0 + h + 36, "middle", 12, xtitle);
	if (ref) {
		/* the reference (the budget): dashed, grey, labelled; one
		 * budget is a level across its column, not a point */
		fputs("<polyline fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" "
		      "stroke-dasharray=\"6 4\" points=\"", f);
		if (nx == 1)
			fprintf(f, "%.1f,%.1f ", PL + step * 0.1, y0 + h - h * ref[0] / hi);
		for (size_t k = 0; k < nx; k++)
			fprintf(f, "%.1f,%.1f ", PL + step * ((double)k + (nx == 1 ? 0.9 : 0.5)),
				y0 + h - h * ref[k] / hi);
		fputs("\"/>\n", f);
		plot_text(f, PL + step * ((double)nx - (nx == 1 ? 0.1 : 0.5)) + 8,
			  y0 + h - h * ref[nx - 1] / hi + 4, "start", 11, "budget");
	}
	for (size_t a = 0; a < ns; a++) {
		const char *c = plot_color(a);
		int open = 0;

		for (size_t k = 0; k < nx; k++) {
			double v = y[a * nx + k];

			if (v < 0) {
				if (open)
					fputs("\"/>\n", f);
				open = 0;
				continue;
			}
			if (!open)
				fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
					"points=\"", c);
			fprintf(f, "%.1f,%.1f ", PL + step * ((double)k + 0.5), y0 + h - h * v / hi);
			open = 1;
		}
		if (open)
			fputs("\"/>\n", f);
		for (size_t k = 0; k < nx; k++) {
			double v = y[a * nx + k];

			if (v < 0)
				continue;
			snprintf(tip, sizeof(tip), "%s %s: %.2f", names[a], xl[k], v);
			plot_marker(f, a, PL + step * ((double)k + 0.5), y0 + h - h * v / hi, c,
				    false, tip);
		}
	}
}

static int write_plot(const struct opts *o, const struct rows *rs, const struct fileset *fs)
{
	size_t nx = o->nbudgets, ns = o->nalloc;
	double *hit = malloc(nx * ns * sizeof(double)), *mem = malloc(nx * ns * sizeof(double));
	double bud[MAX_LIST];
	char xl[MAX_LIST][32], title[256], sub[256], a1[32], a2[32];
	char xtitle[32], ytitle[32];
	const char *xp[MAX_LIST];
	double unit = MIB;  /* of the budgets and the memory */
	FILE *f;

	if (!hit || !mem) {
		free(hit), free(mem);
		return -ENOMEM;
	}
	/* KiB when every budget is under 1 MiB: "0.25" MiB says less */
	for (size_t k = 0; k < nx; k++)
		if (o->budgets[k] >= MIB)
			break;
		else if (k + 1 == nx)
			unit = 1024;
	for (size_t k = 0; k < nx; k++) {
		double m = (double)o->budgets[k] / unit;

		snprintf(xl[k], sizeof(xl[k]), m == floor(m) ? "%.0f" : "%.2f", m);
		xp[k] = xl[k];
		bud[k] = m;
	}
	for (size_t a = 0; a < ns; a++)
		for (size_t k = 0; k < nx; k++) {
			const struct row *r = find_cc(rs, o->alloc[a], o->budgets[k]);

			hit[a * nx + k] = r && r->gets ? 100.0 * (double)r->hits / (double)r->gets : -1;
			mem[a * nx + k] = r ? (double)(r->pool_bytes + r->meta_bytes) / unit : -1;
		}
	snprintf(title, sizeof(title), "zmem cachebench: cleancache hit ratio against the tmem "
		 "budget (codec %s)", o->codec);
	snprintf(sub, sizeof(sub), "%zu files, %s, page cache %s, %llu reads, zipf %.2f, "
		 "seed %llu", fs->n, zmi_human_bytes(fs->bytes, a1, sizeof(a1)),
		 zmi_human_bytes(o->cache, a2, sizeof(a2)), (unsigned long long)o->reads, o->zipf,
		 (unsigned long long)o->seed);
	snprintf(xtitle, sizeof(xtitle), "tmem budget (%s)", unit == MIB ? "MiB" : "KiB");
	snprintf(ytitle, sizeof(ytitle), "memory (%s)", unit == MIB ? "MiB" : "KiB");
	f = plot_begin(o->plot, 70 + 2 * (320 + 80), title);
	if (!f) {
		free(hit), free(mem);
		return -errno;
	}
	plot_text(f, PLOT_W / 2.0, 44, "middle", 12, sub);
	/* the legend: a line and a marker per allocator */
	for (size_t a = 0; a < ns; a++) {
		double x = PL + 140.0 * (double)a;

		fprintf(f, "<line x1=\"%.1f\" y1=\"66\" x2=\"%.1f\" y2=\"66\" stroke=\"%s\" "
			"stroke-width=\"2\"/>\n", x, x + 24, plot_color(a));
		plot_marker(f, a, x + 12, 66, plot_color(a), false, NULL);
		plot_text(f, x + 30, 70, "start", 12, o->alloc[a]);
	}
	panel(f, 110, 320, "tmem hit ratio (hits / gets)", "hit ratio (%)", xtitle, xp, nx,
	      o->alloc, ns, hit, 100, NULL);
	panel(f, 110 + 320 + 80, 320, "memory used at the end (pool + metadata)", ytitle,
	      xtitle, xp, nx, o->alloc, ns, mem, 0, bud);
	free(hit), free(mem);
	return plot_end(f);
}

/* ---- options --------------------------------------------------------- */

static int parse_modes(const char *s, unsigned *m)
{
	char buf[256], *save, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	*m = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "frontswap"))
			*m |= M_FRONTSWAP;
		else if (!strcmp(tok, "cleancache"))
			*m |= M_CLEANCACHE;
		else if (!strcmp(tok, "speed"))
			*m |= M_SPEED;
		else if (!strcmp(tok, "mixed"))
			*m |= M_MIXED;
		else if (!strcmp(tok, "both"))
			*m |= M_FRONTSWAP | M_CLEANCACHE;
		else if (!strcmp(tok, "all"))
			*m |= M_FRONTSWAP | M_CLEANCACHE | M_MIXED | M_SPEED;
		else
			return cli_usage("cachebench", "unknown mode '%s' in --mode (frontswap, "
					 "cleancache, mixed, speed, both, all)", tok);
	}
	return *m ? 0 : cli_usage("cachebench", "--mode names no mode");
}

/* Split a comma list into out: pointers into buf, a copy of it. */
static int split(const char *s, char *buf, size_t len, const char **out, size_t *n,
		 const char *what)
{
	char *copy = buf, *save, *tok;

	*n = 0;
	if (strlen(s) >= len)
		return cli_usage("cachebench", "the list of %s is too long: %s", what, s);
	strcpy(buf, s);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_LIST)
			return cli_usage("cachebench", "at most %d %s", MAX_LIST, what);
		out[(*n)++] = tok;
	}
	return *n ? 0 : cli_usage("cachebench", "an empty list of %s", what);
}

static int parse_budgets(const char *s, struct opts *o)
{
	const char *tok[MAX_LIST];
	char buf[1024];

	if (split(s, buf, sizeof(buf), tok, &o->nbudgets, "budgets"))
		return -1;
	for (size_t i = 0; i < o->nbudgets; i++) {
		uint64_t v;

		if (cli_size(tok[i], &v) || !v || v > SIZE_MAX)
			return cli_usage("cachebench", "invalid size '%s' in --budgets", tok[i]);
		o->budgets[i] = (size_t)v;
	}
	return 0;
}

static int parse_policy(const char *s, struct opts *o)
{
	const char *tok[MAX_LIST];
	char buf[256];
	size_t n;

	if (split(s, buf, sizeof(buf), tok, &n, "policies"))
		return -1;
	o->policy_zcache = o->policy_off = false;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(tok[i], "zcache"))
			o->policy_zcache = true;
		else if (!strcmp(tok[i], "off"))
			o->policy_off = true;
		else
			return cli_usage("cachebench", "unknown policy '%s' in --policy (zcache, off)",
					 tok[i]);
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *tmp = getenv("TMPDIR"), *modes = NULL, *budgets = NULL;
	const char *policy = NULL, *allocs[MAX_LIST];
	char joined[2 * sizeof(o->abuf)] = "";
	size_t nallocs = 0;
	char seed_def[24], reads_def[24], zipf_def[24];
	int rc;
	const struct opt table[] = {
		O_STR("mode", 'm', &modes, "M",
		      "frontswap, cleancache, mixed (after each\ncleancache run, persistent puts "
		      "into its full\nbudget), speed, both (frontswap and\ncleancache), all; or a list",
		      "frontswap,cleancache,mixed"),
		O_LIST("allocators", 'a', allocs, "LIST", "pool backends (repeatable)", "all",
		       &nallocs, MAX_LIST),
		O_LIST("allocator", 0, allocs, "LIST", "the same", NULL, &nallocs, MAX_LIST,
		       .hidden = 1),
		O_STR("codec", 'c', &o->codec, "NAME", "the codec", "lzo when built, else lz4"),
		O_U64("seed", 'S', &o->seed, "N", "files and reads (printed)", seed_def, 0, 0),
		O_SIZE("size", 's', &o->size, "SIZE", "frontswap, speed: the program's memory",
		       "64M", 2 * PS, (double)((uint64_t)1 << 40)),
		O_SIZE("ram", 'R', &o->ram, "SIZE", "its RAM, below --size", "half of --size", PS,
		       (double)((uint64_t)1 << 40)),
		O_SIZE("swap-budget", 'b', &o->swap_budget, "SIZE", "the tmem budget", "--size", PS,
		       (double)((uint64_t)1 << 40)),
		O_SIZE("speed-size", 'Z', &o->speed_size, "SIZE",
		       "speed: the first this many bytes of the\ndata, at most --size",
		       "16M", 2 * PS, (double)((uint64_t)1 << 40)),
		O_LIST("data", 'd', o->data, "SPEC",
		       "a data set, as zmem bench takes it\n(repeatable; speed uses the first "
		       "that is not\nzero)", "zero, text:0.75", &o->ndata, MAX_LIST),
		O_STR("policy", 'p', &policy, "LIST", "zcache (the pool's defaults), off", "both"),
		O_STR("budgets", 'B', &budgets, "LIST", "cleancache: tmem budgets (sizes)",
		      DEF_BUDGETS),
		O_SIZE("cache", 'C', &o->cache, "SIZE", "cleancache: the page cache", "8M", PS,
		       (double)((uint64_t)1 << 40)),
		O_STR("files", 'F', &o->files, "DIR", "read a real tree instead of generated files",
		      NULL),
		O_SIZE("file-set", 'f', &o->file_set, "SIZE",
		       "bytes of generated files (with --files: read\nat most this much of the "
		       "tree)", "64M", PS, (double)((uint64_t)1 << 40)),
		O_STR("dir", 'D', &o->dir, "DIR",
		      "where the generated files go (removed after)", "$TMPDIR or /var/tmp"),
		O_U64("reads", 'r', &o->reads, "N", "page reads", reads_def, 1, 0),
		O_DOUBLE("zipf", 'z', &o->zipf, "S", "their skew (0: uniform)", zipf_def, 0, 10),
		O_FLAG("exclusive", 'x', &o->exclusive,
		       "a tmem hit removes the page (zcache's\nexclusive gets)"),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the tables"),
		O_FLAG("wide", 0, &o->wide, "every column of the tables (about 100)"),
		O_STR("plot", 'P', &o->plot, "FILE.svg",
		      "cleancache hit ratio and memory against the\nbudget", "none"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"cachebench", "[OPTIONS]",
		"tmem (zcache's pools) under memory pressure: frontswap (a program larger than\n"
		"its RAM, swapping into a persistent pool), cleancache (file reads through a\n"
		"page cache that drops clean pages into an ephemeral pool), and speed (tmem\n"
		"against zm_store on the same pages).  Every page that comes back is verified.",
		table, NULL,
	};

	memset(o, 0, sizeof(*o));
	o->modes = M_FRONTSWAP | M_CLEANCACHE | M_MIXED;
	o->size = DEF_SIZE;
	o->cache = DEF_CACHE;
	o->reads = DEF_READS;
	o->zipf = DEF_ZIPF;
	o->seed = DEF_SEED;
	o->policy_zcache = o->policy_off = true;
	o->dir = tmp && *tmp ? tmp : "/var/tmp";
	snprintf(seed_def, sizeof(seed_def), "%d", DEF_SEED);
	snprintf(reads_def, sizeof(reads_def), "%d", DEF_READS);
	snprintf(zipf_def, sizeof(zipf_def), "%.2f", DEF_ZIPF);
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	/* every --allocators (or --allocator) given, each a list: one list
	 * (longer than abuf: split() says so) */
	for (size_t i = 0; i < nallocs; i++)
		snprintf(joined + strlen(joined), sizeof(joined) - strlen(joined), "%s%s",
			 i ? "," : "", allocs[i]);
	if ((modes && parse_modes(modes, &o->modes)) ||
	    (nallocs && split(joined, o->abuf, sizeof(o->abuf), o->alloc, &o->nalloc,
			      "allocators")) ||
	    parse_budgets(budgets ? budgets : DEF_BUDGETS, o) ||
	    (policy && parse_policy(policy, o)))
		return CLI_USAGE;
	if (!o->codec)
		o->codec = bench_zcache_codec();
	if (!o->ndata) {
		o->data[o->ndata++] = "zero";
		o->data[o->ndata++] = "text:0.75";
	}
	if (!o->ram)
		o->ram = o->size / 2;
	if (!o->swap_budget)
		o->swap_budget = o->size;
	if (!o->speed_size)
		o->speed_size = o->size < DEF_SPEED_SIZE ? o->size : DEF_SPEED_SIZE;
	if (o->speed_size > o->size)
		return cli_usage("cachebench", "--speed-size (%zu) must be at most --size (%zu)",
				 o->speed_size, o->size);
	if (!o->file_set && !o->files)
		o->file_set = DEF_FILE_SET;
	if (o->ram >= o->size)
		return cli_usage("cachebench", "--ram (%zu) must be below --size (%zu)", o->ram,
				 o->size);
	return 0;
}

static int check_allocators(struct opts *o)
{
	const char *const *all = zm_pool_backends();

	for (size_t i = 0; i < o->nalloc; i++) {
		size_t k;

		for (k = 0; all[k] && strcmp(all[k], o->alloc[i]); k++)
			;
		if (!all[k])
			return cli_check_allocator("cachebench", "--allocators", o->alloc[i]);
	}
	if (!o->nalloc)
		for (size_t k = 0; all[k] && o->nalloc < MAX_LIST; k++)
			o->alloc[o->nalloc++] = all[k];
	return 0;
}

int cmd_cachebench(int argc, char **argv)
{
	struct bench_data data[MAX_LIST];
	struct rows rs = { 0 };
	struct fileset fs = { 0 };
	struct pcache pc = { 0 };
	uint32_t *reads = NULL;
	uint64_t bad = 0;
	bool bad_plot = false;
	size_t ndata = 0;
	bool have_fs = false;
	struct opts o;
	struct zm_codec *cd;
	int status = 1, rc;
	char hb[32];

	rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (check_allocators(&o))
		return CLI_USAGE;
	for (size_t i = 0; i < o.ndata; i++)
		if (bench_data_check(o.data[i]))
			return CLI_USAGE;
	/* what cannot end well fails now, not after a phase (check.h) */
	for (size_t i = 0; i < o.ndata; i++)
		if (cli_check_data("cachebench", o.data[i]))
			return CLI_FAIL;
	if (cli_check_input("cachebench", "--files", o.files) ||
	    (!o.files && (o.modes & (M_CLEANCACHE | M_MIXED)) &&
	     cli_check_dir("cachebench", "--dir", o.dir)) ||
	    ((o.modes & (M_FRONTSWAP | M_SPEED)) && cli_check_memory("cachebench", "--size",
								     o.size, 1)) ||
	    ((o.modes & (M_CLEANCACHE | M_MIXED)) && cli_check_memory("cachebench", "--cache",
								      o.cache, 1)))
		return CLI_FAIL;
	if ((rc = cli_check_plot("cachebench", o.plot, o.json)))
		return rc;
	rc = zm_codec_create(o.codec, 0, &cd);
	if (rc) {
		fprintf(stderr, "zmem cachebench: codec '%s': %s\n", o.codec,
			rc == -EOPNOTSUPP ? "not in this build" : "unknown name or level");
		return 2;
	}
	zm_codec_destroy(cd);
	cli_note("codec %s, seed %llu", o.codec, (unsigned long long)o.seed);
	/* a tree to read is walked before any phase: a file in it that
	 * cannot be read ends the run now (generated files come later) */
	if ((o.modes & (M_CLEANCACHE | M_MIXED)) && o.files) {
		if (make_fileset(&o, &fs))
			goto out;
		have_fs = true;
	}
	if (o.modes & (M_FRONTSWAP | M_SPEED))
		for (size_t i = 0; i < o.ndata; i++) {
			cli_progress("preparing %s of %s", zmi_human_bytes(o.size, hb, sizeof(hb)),
				     o.data[i]);
			if (bench_data_make(o.data[i], o.size, PS, o.codec, &data[ndata])) {
				bench_data_free(&data[ndata]);
				goto out;
			}
			cli_progress_done();
			if (data[ndata].len / PS < 2 || data[ndata].len <= o.ram) {
				fprintf(stderr, "zmem cachebench: %s: %zu bytes, not more than the RAM\n",
					o.data[i], data[ndata].len);
				bench_data_free(&data[ndata]);
				goto out;
			}
			ndata++;
		}
	if (o.modes & M_FRONTSWAP) {
		/* the process's first run pays for first touches of memory
		 * the later ones reuse: the first row once more, unrecorded,
		 * before the recorded ones */
		struct row scratch = { .kind = K_FRONTSWAP, .allocator = o.alloc[0] };

		if (run_frontswap(&o, o.alloc[0], &data[0], true, &scratch))
			goto out;
	}
	if (o.modes & M_FRONTSWAP)
		for (size_t i = 0; i < ndata; i++)
			for (int pol = 0; pol < 2; pol++) {
				if (!(pol ? o.policy_zcache : o.policy_off))
					continue;
				for (size_t a = 0; a < o.nalloc; a++) {
					struct row *r = new_row(&rs, K_FRONTSWAP, o.alloc[a]);

					cli_progress("frontswap, %s, %s, policy %s",
						       data[i].name, o.alloc[a], pol ? "zcache" : "off");
					if (!r || run_frontswap(&o, o.alloc[a], &data[i], !pol, r))
						goto out;
				}
			}
	cli_progress_done();
	if (o.modes & M_MIXED)
		o.modes |= M_CLEANCACHE;  /* it runs on each cleancache run's instance */
	if (o.modes & M_CLEANCACHE) {
		if (!have_fs && make_fileset(&o, &fs))
			goto out;
		have_fs = true;
		cli_note("%zu files, %llu pages (%s)", fs.n, (unsigned long long)fs.pages,
			 fs.tmpdir ? fs.tmpdir : o.files);
		reads = make_reads(&o, fs.pages);
		if (!reads || pcache_init(&pc, (uint32_t)(o.cache / PS), fs.pages)) {
			fprintf(stderr, "zmem cachebench: out of memory for the reads\n");
			goto out;
		}
		for (size_t a = 0; a < o.nalloc; a++)
			for (size_t k = 0; k < o.nbudgets; k++) {
				struct row *r = new_row(&rs, K_CLEANCACHE, o.alloc[a]);
				struct row *mr = NULL;

				if (r && (o.modes & M_MIXED)) {
					mr = new_row(&rs, K_MIXED, o.alloc[a]);
					r = mr ? mr - 1 : NULL;  /* new_row may have moved them */
				}
				cli_progress("cleancache, %s, budget %s", o.alloc[a],
					     zmi_human_bytes(o.budgets[k], hb, sizeof(hb)));
				if (!r || ((o.modes & M_MIXED) && !mr) ||
				    run_cleancache(&o, o.alloc[a], o.budgets[k], &fs, &pc, reads, r, mr))
					goto out;
			}
		cli_progress_done();
	}
	if (o.modes & M_SPEED) {
		size_t i;

		for (i = 0; i < ndata && !strcmp(data[i].name, "zero"); i++)
			;
		if (i == ndata) {
			fprintf(stderr, "zmem cachebench: speed: no data set but zero pages\n");
			goto out;
		}
		for (size_t a = 0; a < o.nalloc; a++) {
			struct row *r = new_row(&rs, K_SPEED, o.alloc[a]);
			struct row *re = r ? new_row(&rs, K_SPEED, o.alloc[a]) : NULL;

			if (!re || run_speed(&o, o.alloc[a], &data[i], re - 1, re))
				goto out;
		}
	}
	for (size_t i = 0; i < rs.n; i++)
		bad += rs.v[i].mismatches + rs.v[i].errors;
	if (o.json)
		print_json(&o, &rs, have_fs ? &fs : NULL);
	else
		print_tables(&o, &rs, &fs);
	if (o.plot && have_fs) {
		rc = write_plot(&o, &rs, &fs);
		if (rc) {  /* the run asked for a plot it did not get: a failure */
			fprintf(stderr, "zmem cachebench: writing %s: %s\n", o.plot, strerror(-rc));
			bad_plot = true;
		} else if (!o.json)
			printf("\nplot: %s\n", o.plot);
	} else if (o.plot) {
		fprintf(stderr, "zmem cachebench: --plot draws the cleancache mode, which did not run\n");
	}
	if (bad)
		fprintf(stderr, "zmem cachebench: %llu pages back wrong or calls failed\n",
			(unsigned long long)bad);
	status = bad || bad_plot ? 1 : 0;
out:
	cli_progress_done();
	for (size_t i = 0; i < ndata; i++)
		bench_data_free(&data[i]);
	if (have_fs || fs.n || fs.tmpdir)
		free_fileset(&fs);
	pcache_free(&pc);
	free(reads);
	free(rs.v);
	return status;
}
