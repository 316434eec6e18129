/*
 * The page generator: zero, random and text pages, each page tuned to a
 * target compression ratio measured with the caller's codec.
 *
 * Each kind has one knob that moves its ratio monotonically: for random,
 * the fraction of the page that is random (the rest is zero); for text, the
 * mix of repeated sentences and random words (workload_internal.h).  Page
 * i is generated from a seed derived from (seed, i) at the knob the
 * previous page ended with, compressed, and if its ratio is further than
 * TUNE_TOL from its target the knob moves by a secant step along the
 * slope learnt from earlier probes until the target is bracketed, then by
 * regula falsi inside the bracket, for at most TUNE_EVALS compressions;
 * the page keeps the best knob seen.  Typically that is one to three
 * compressions per page.
 *
 * Page i's target is the requested ratio plus the error of the pages
 * before it (clamped to TUNE_CARRY), so the mean over any run of pages
 * converges on the request even where single pages miss it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/codec.h>
#include "base/abi.h"
#include "workload/workload_internal.h"

/* the published layout's end (base/abi.h): never changes */
#define WL_STATS_MIN zmi_size_upto(struct workload_stats, compress_calls)

/* A page within one percent of its target is accepted: finer than that,
 * one sentence more or less repeated (about 80 bytes, 2% of a 4 KiB page)
 * is a step too coarse to hit, and tuning would only burn compressions. */
#define TUNE_TOL 0.01
/* Compressions spent on one page at most; the bracket is found within 6
 * doublings from any start, leaving a few for refinement. */
#define TUNE_EVALS 10
/* Secant steps go this much further than the learnt slope says, so that
 * a step that falls short of the target is rare and one that overshoots
 * brackets it. */
#define TUNE_OVERSHOOT 1.2
/* The slope (ratio per knob unit) is kept above this, so that a flat
 * stretch (lz4 on all-random words) cannot make steps explode. */
#define TUNE_MIN_SLOPE 0.05
/* Most a page's target may move to repay the error of earlier pages. */
#define TUNE_CARRY 0.10

#define DEFAULT_TEXT_RATIO 0.75
#define DEFAULT_PAGE 4096

struct workload {
	enum workload_kind kind;
	double ratio;              /* the target */
	struct zm_codec *codec;    /* measures: the caller's or own_codec */
	struct zm_codec *own_codec;
	uint64_t seed;
	size_t page_size;
	double knob, knob_max;     /* where the last page ended; its range */
	double slope;              /* d ratio / d knob, learnt */
	unsigned char *scratch;    /* compressed output, page_size bytes */
	double sum_ratio;          /* sum of per-page ratios so far */
	struct workload_stats st;
};

static const char *const kind_names[] = {
	[WORKLOAD_ZERO] = "zero",
	[WORKLOAD_RANDOM] = "random",
	[WORKLOAD_TEXT] = "text",
};

int workload_kind_parse(const char *name, enum workload_kind *kind)
{
	if (!name || !kind)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (!strcmp(name, kind_names[i])) {
			*kind = (enum workload_kind)i;
			return 0;
		}
	return -EINVAL;
}

const char *workload_kind_name(enum workload_kind kind)
{
	return (unsigned)kind < sizeof(kind_names) / sizeof(kind_names[0]) ?
	       kind_names[kind] : NULL;
}

int workload_create_sized(const struct workload_config *ucfg, size_t cfg_size,
			  struct workload **out)
{
	struct workload_config cfg_copy, *cfg = &cfg_copy;
	struct workload *w;
	size_t ps;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ucfg)
		return -EINVAL;
	rc = zmi_struct_in(cfg, sizeof(*cfg), ucfg, cfg_size,
			   zmi_size_upto(struct workload_config, page_size));
	if (rc)
		return rc;
	if (!workload_kind_name(cfg->kind))
		return -EINVAL;
	ps = cfg->page_size ? cfg->page_size : DEFAULT_PAGE;
	if (ps < WORKLOAD_MIN_PAGE || ps > WORKLOAD_MAX_PAGE || ps % 64)
		return -EINVAL;
	if (!(cfg->ratio >= 0 && cfg->ratio <= 1)) /* also refuses NaN */
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = cfg->kind;
	w->ratio = cfg->ratio;
	if (w->ratio == 0)
		w->ratio = cfg->kind == WORKLOAD_TEXT ? DEFAULT_TEXT_RATIO : 1.0;
	w->seed = cfg->seed;
	w->page_size = ps;
	w->knob_max = cfg->kind == WORKLOAD_TEXT ? WORKLOAD_TEXT_KNOB_MAX : 1.0;
	w->knob = cfg->kind == WORKLOAD_TEXT ? 1.0 : w->ratio;
	w->slope = cfg->kind == WORKLOAD_TEXT ? 0.5 : 1.0;
	w->codec = cfg->codec;
	if (!w->codec) {
		rc = zm_codec_create("lz4", 0, &w->own_codec);
		if (rc) {
			free(w);
			return rc;
		}
		w->codec = w->own_codec;
	}
	w->scratch = malloc(ps);
	if (!w->scratch) {
		workload_destroy(w);
		return -ENOMEM;
	}
	*out = w;
	return 0;
}

void workload_destroy(struct workload *w)
{
	if (!w)
		return;
	zm_codec_destroy(w->own_codec);
	free(w->scratch);
	free(w);
}

/* Page `seed`'s bytes at knob k. */
static void gen_page(struct workload *w, uint64_t seed, double k, unsigned char *p)
{
	size_t ps = w->page_size, nrand, i = 0;
	struct workload_rng r;

	switch (w->kind) {
	case WORKLOAD_ZERO:
		memset(p, 0, ps);
		break;
	case WORKLOAD_RANDOM:
		nrand = (size_t)(k * (double)ps + 0.5);
		if (nrand > ps)
			nrand = ps;
		workload_rng_seed(&r, seed);
		for (; i + 8 <= nrand; i += 8) {
			uint64_t x = workload_rng_next(&r);

			memcpy(p + i, &x, 8);
		}
		for (; i < nrand; i++)
			p[i] = (unsigned char)workload_rng_next(&r);
		memset(p + nrand, 0, ps - nrand);
		break;
	case WORKLOAD_TEXT:
		text_page(seed, k, (char *)p, ps);
		break;
	}
}

/* The compression ratio of one page: 1 if it does not fit in a page. */
static int measure(struct workload *w, const unsigned char *p, double *ratio)
{
	int n = zm_codec_compress(w->codec, p, w->page_size, w->scratch, w->page_size);

	w->st.compress_calls++;
	if (n == -ENOSPC)
		n = (int)w->page_size;
	if (n < 0)
		return n;
	*ratio = (double)n / (double)w->page_size;
	return 0;
}

struct probe {
	double k, r;
};

static inline double clampd(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* Generate page p at the knob whose ratio comes closest to target. */
static int tune_page(struct workload *w, uint64_t seed, double target,
		     unsigned char *p, double *ratio)
{
	struct probe lo = { -1, 0 }, hi = { -1, 0 }, best, cur, prev;
	int evals = 0, rc;

	cur.k = w->knob;
	gen_page(w, seed, cur.k, p);
	if ((rc = measure(w, p, &cur.r)))
		return rc;
	best = cur;
	evals++;
	while (w->kind != WORKLOAD_ZERO && fabs(best.r - target) > TUNE_TOL &&
	       evals < TUNE_EVALS) {
		if (cur.r < target)
			lo = cur;
		else
			hi = cur;
		prev = cur;
		if (lo.k >= 0 && hi.k >= 0) {
			/* bracketed: regula falsi, every third probe bisects */
			double span = hi.r - lo.r;

			cur.k = span > 1e-9 && evals % 3 != 2 ?
				lo.k + (target - lo.r) * (hi.k - lo.k) / span :
				(lo.k + hi.k) / 2;
		} else {
			/* not yet: a secant step with the learnt slope, a
			 * little long so that it brackets when it misses */
			cur.k = clampd(cur.k + TUNE_OVERSHOOT * (target - cur.r) / w->slope,
				       0, w->knob_max);
			if (cur.k == prev.k)
				break; /* at the end of the range: out of reach */
		}
		gen_page(w, seed, cur.k, p);
		if ((rc = measure(w, p, &cur.r)))
			return rc;
		evals++;
		if (fabs(cur.r - target) < fabs(best.r - target))
			best = cur;
		if (fabs(cur.k - prev.k) > 0.01 && (cur.r - prev.r) / (cur.k - prev.k) > 0)
			w->slope = clampd(0.7 * w->slope +
					  0.3 * (cur.r - prev.r) / (cur.k - prev.k),
					  TUNE_MIN_SLOPE, 4);
	}
	if (best.k != cur.k)
		gen_page(w, seed, best.k, p);
	w->knob = best.k;
	*ratio = best.r;
	return 0;
}

int workload_next(struct workload *w, void *buf, size_t len)
{
	unsigned char *p = buf;

	if (!w || !buf || len % w->page_size)
		return -EINVAL;
	for (size_t off = 0; off < len; off += w->page_size) {
		uint64_t i = w->st.pages;
		uint64_t seed = workload_mix(w->seed ^ workload_mix(i * 4 + (unsigned)w->kind));
		double carry = w->ratio * (double)i - w->sum_ratio, r = 0;
		double target;
		int rc;

		carry = carry > TUNE_CARRY ? TUNE_CARRY : carry < -TUNE_CARRY ? -TUNE_CARRY : carry;
		target = w->ratio + carry;
		if ((rc = tune_page(w, seed, target, p + off, &r)))
			return rc;
		w->sum_ratio += r;
		w->st.pages++;
		w->st.orig_bytes += w->page_size;
		w->st.compr_bytes += (uint64_t)(r * (double)w->page_size + 0.5);
		if (r >= 1.0)
			w->st.huge_pages++;
	}
	return 0;
}

int workload_stats_sized(const struct workload *w, struct workload_stats *out,
			 size_t size)
{
	struct workload_stats st;

	if (!w)
		return -EINVAL;
	st = w->st;
	st.ratio = st.orig_bytes ? (double)st.compr_bytes / (double)st.orig_bytes : 0;
	return zmi_struct_out(out, size, WL_STATS_MIN, &st, sizeof(st));
}

int workload_fill_sized(enum workload_kind kind, double ratio,
			struct zm_codec *codec, uint64_t seed, void *buf, size_t len,
			size_t page_size, struct workload_stats *st, size_t st_size)
{
	struct workload_config cfg = {
		.kind = kind, .ratio = ratio, .codec = codec, .seed = seed,
		.page_size = page_size,
	};
	struct workload *w;
	int rc = workload_create(&cfg, &w);

	if (rc)
		return rc;
	rc = workload_next(w, buf, len);
	if (st && !rc)
		rc = workload_stats_sized(w, st, st_size);
	workload_destroy(w);
	return rc;
}
