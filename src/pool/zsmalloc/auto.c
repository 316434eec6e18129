/*
 * Automatic compaction: run by the process's background worker
 * (base/worker.c), off the callers' paths, one work item per pool that
 * has a policy, with the two triggers of the 2016 discussion (background §4).
 *
 *   WATERMARK  a class shard whose freeable pages (populated bytes not
 *              holding objects, in pages) reach `watermark` % of its pages,
 *              and at least one zspage's worth, is flagged by the free that
 *              crossed the line; the worker compacts flagged classes.
 *   RATIO      when the pool's used/allocated bytes fall below `ratio` %,
 *              the worker runs passes that start at the class last freed
 *              (of those each shard noted, the one with the most slack:
 *              zs_auto_freed in zsmalloc/zsmalloc.h),
 *              walk the classes round robin and stop after `budget` zspages
 *              packed or evacuated, until the ratio reaches `target` % or a
 *              pass frees nothing.  The gap between the two (hysteresis) is
 *              what keeps compaction off the foreground under steady
 *              random churn, where used/allocated settles near 86% by
 *              itself (docs/compaction.md), while a mass free (ratio 25%)
 *              is compacted back to the target at once.
 *
 * The free path's part is a few arithmetic operations under the class lock
 * it already holds (under RATIO only when the free moved a zspage down a
 * fullness group); under WATERMARK, when a class crosses the line, one
 * atomic exchange and, when it changed, a condition signal
 * (zmi_worker_kick).  Under RATIO the worker calls the pool's item by
 * itself every period (50 ms), which reads the classes' counters without
 * their locks.
 *
 * Lock order: a->set_lock -> the worker's lock (zmi_worker_add/del, which
 * waits for the item's running callback: set_lock is never taken by the
 * callback, and compact_lock is not held there); the callback takes
 * zp->compact_lock, then class locks; the free path takes the worker's
 * lock (a leaf) under a class lock, only to signal.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "base/os.h"
#include "base/worker.h"
#include "pool/zsmalloc/zsmalloc.h"

#define ZS_DEF_WATERMARK 40       /* the 2016 proposal's */
#define ZS_DEF_RATIO 75           /* start below: measured, docs/compaction.md */
#define ZS_DEF_TARGET 99          /* compact up to (measured: docs/compaction.md) */
#define ZS_DEF_BUDGET 64          /* zspages per pass */
#define ZS_AUTO_PERIOD_MS 50      /* wake to look this often */
/* After the ratio fell below compact_ratio, and after the episode of
 * compaction that crossing started, keep compacting up to the target for
 * this long: a mass free that the thread caught half way (its first frees
 * crossed the ratio, the rest came after the thread had reached the
 * target) is finished, not left half done (docs/compaction.md).  Steady
 * churn never crosses the ratio, so it is never armed. */
#define ZS_AUTO_GRACE_MS 1000
#define ZS_AUTO_MIN_SLACK (64u << 10) /* bytes of slack worth compacting */

struct zs_auto {
	struct zmi_work work;     /* the pool's item with the worker */
	pthread_mutex_t set_lock; /* registering and unregistering it */
	struct zs_pool *zp;       /* immutable */
	unsigned watermark, ratio, target, budget;
	uint64_t armed_until;     /* callback only: RATIO compacts up to the
				     target until then (ns) */
	bool fresh;               /* callback only: armed by a crossing, no
				     episode finished since */
	uint64_t used_mark;       /* callback only: the pool's used bytes when
				     the last episode began */
	uint8_t *want;            /* atomic per class entry: watermark crossed */
};

void zs_auto_note_free(struct zs_pool *zp, struct zs_class *c)
{
	struct zs_auto *a = __atomic_load_n(&zp->autoc, __ATOMIC_ACQUIRE);
	uint64_t slack;
	unsigned i = c->idx;

	if (!a)
		return;
	slack = zs_slack_pages(zp, c);
	if (slack < c->pages || slack < ZS_AUTO_MIN_CLASS_SLACK)
		return;  /* not worth a wakeup */
	/* wake the worker when a class crosses the watermark */
	if (slack * 100 < (uint64_t)a->watermark * c->npages ||
	    __atomic_load_n(&a->want[i], __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&a->want[i], 1, __ATOMIC_RELAXED);
	zmi_worker_kick(&a->work);
}

/* Used and allocated bytes of the whole pool, and the slack compaction
 * could win: each class's beyond its last page (a class always keeps a
 * partly used page, which no compaction can give back).  Read without the
 * class locks (an estimate is enough; taking every lock each period would
 * push allocating threads to other shards for nothing). */
struct usage {
	uint64_t used, alloc, excess;
};

static struct usage usage(struct zs_pool *zp)
{
	struct usage s = { 0, 0, 0 };

	ZS_FOR_EACH_CLASS(zp, c) {
		uint64_t u = (uint64_t)__atomic_load_n(&c->used, __ATOMIC_RELAXED) * c->size;
		uint64_t a = (uint64_t)__atomic_load_n(&c->npages, __ATOMIC_RELAXED) << zp->shift;

		s.used += u;
		s.alloc += a;
		if (a > u + zp->page_size)
			s.excess += a - u - zp->page_size;
	}
	/* mixed zspages: their live granules; two of a shard's are open, each
	 * with a partly used page */
	ZS_FOR_EACH_MIXED(zp, c) {
		uint64_t u = zs_mixed_live(c) * ZS_GRANULE;
		uint64_t a = (uint64_t)__atomic_load_n(&c->npages, __ATOMIC_RELAXED) << zp->shift;

		s.used += u;
		s.alloc += a;
		if (a > u + 2 * zp->page_size)
			s.excess += a - u - 2 * zp->page_size;
	}
	return s;
}

static long account(struct zs_pool *zp, long freed, uint64_t t0)
{
	zs_stat_add(&zp->compactions, 1);
	zs_stat_add(&zp->pages_compacted, (uint64_t)zs_net_freed(freed));
	zs_stat_add(&zp->compact_ns, zmi_os_now_ns() - t0);
	return freed;
}

/* The classes a pass walks, for zs_compact_run (which quiesces their
 * zspages together, a barrier for up to a batch of them whatever their
 * classes).  WATERMARK: the flagged ones; RATIO: round robin from `i`,
 * those with 2 pages of slack or more. */
struct walk {
	struct zs_pool *zp;
	struct zs_auto *a;
	unsigned i, n;  /* the next class index, and how many are left */
	bool any;       /* WATERMARK: a flagged class was found */
};

static struct zs_class *next_flagged(void *arg)
{
	struct walk *w = arg;

	for (; w->i < w->zp->total; w->i++)
		if (__atomic_exchange_n(&w->a->want[w->i], 0, __ATOMIC_RELAXED)) {
			w->any = true;
			return zs_class_of(w->zp, w->i++);
		}
	return NULL;
}

static long watermark_pass(struct zs_pool *zp, struct zs_auto *a)
{
	uint64_t t0 = zmi_os_now_ns();
	struct walk w = { .zp = zp, .a = a };
	long freed = zs_compact_run(zp, next_flagged, &w, NULL);

	/* a flagged mixed class leaves the run (next_flagged gives it, the
	 * run skips it): its sparse zspages are evacuated here */
	if (w.any)
		freed += zs_mixed_compact(zp, NULL, NULL);
	return w.any ? account(zp, freed, t0) : 0;
}

/* Where a pass starts: of the classes each shard last freed from, the
 * one with the most slack (counters read without the locks: a hint). */
static unsigned ratio_start(struct zs_pool *zp)
{
	unsigned best = 0;
	uint64_t most = 0;

	for (unsigned sh = 0; sh < zp->nshards; sh++) {
		/* hints name classes zs_free noted: never huge ones */
		unsigned idx = __atomic_load_n(&zp->hint[sh].idx, __ATOMIC_RELAXED);
		struct zs_class *c = zs_class_at(zp, idx);
		uint64_t have, used;

		if (!c)
			continue;
		have = (uint64_t)__atomic_load_n(&c->npages, __ATOMIC_RELAXED) << zp->shift;
		used = (uint64_t)__atomic_load_n(&c->used, __ATOMIC_RELAXED) * c->size;
		if (have > used && have - used > most) {
			most = have - used;
			best = idx;
		}
	}
	return best;
}

static struct zs_class *next_slack(void *arg)
{
	struct walk *w = arg;

	for (; w->n; w->n--) {
		struct zs_class *c = zs_class_at(w->zp, w->i++ % w->zp->total);
		uint64_t slack;

		if (!c)
			continue;
		zs_compact_lock(c);
		slack = c->huge ? 0 : zs_slack_pages(w->zp, c);
		zs_compact_unlock(c);
		if (slack >= 2) {
			w->n--;
			return c;
		}
	}
	return NULL;
}

/* One bounded pass from the class last freed, round robin; *won grows
 * by the bytes it took off the pool: a mixed zspage's objects fill class
 * pages as its own go, so that part is counted by what the pool lost
 * meanwhile, the packing of the classes by the pages it freed. */
static long ratio_pass(struct zs_pool *zp, struct zs_auto *a, uint64_t *won)
{
	uint64_t t0 = zmi_os_now_ns(), a0 = usage(zp).alloc, a1;
	struct walk w = { .zp = zp, .a = a, .i = ratio_start(zp), .n = zp->total };
	unsigned budget = a->budget;
	long emptied;
	/* sparse mixed zspages into their classes first, which then pack */
	long freed = zs_mixed_compact(zp, &budget, &emptied), packed;

	a1 = usage(zp).alloc;
	packed = zs_compact_run(zp, next_slack, &w, &budget);
	*won += (a0 > a1 ? a0 - a1 : 0) + ((uint64_t)(packed > 0 ? packed : 0) << zp->shift);
	/* the stats net; the episode goes on while the passes empty
	 * zspages (won bounds it) */
	account(zp, freed + packed, t0);
	return emptied + packed;
}

/* Is used/allocated below percent, with at least ZS_AUTO_MIN_SLACK of
 * slack that compaction could win?  (A small pool always looks
 * fragmented: each class keeps a partly used page.  Counting the slack
 * beyond those pages lets a pool of a few MB be compacted as tightly as a
 * large one, and an idle small pool alone.) */
static bool below(const struct usage *u, unsigned percent)
{
	return u->excess > ZS_AUTO_MIN_SLACK && u->used * 100 < u->alloc * percent;
}

/* While armed after an episode: compact again only if the pool went on
 * shrinking (a mass free the first episode caught half way), by
 * ZS_AUTO_SHRINK_PCT of its used bytes: steady churn after it keeps them
 * flat, and its slack is taken by its own allocations. */
#define ZS_AUTO_SHRINK_PCT 5
static bool still_shrinking(const struct zs_auto *a, const struct usage *u)
{
	return a->fresh || u->used * 100 < a->used_mark * (100 - ZS_AUTO_SHRINK_PCT);
}

/* After an episode (no lock held): the memory it freed goes back to the
 * OS.  The pages this thread's cache holds (sources' pages it freed,
 * refills for keepers that grew) go back to the pages layer, which gives
 * its free resident pages back (with the default reserve all but the
 * recent demand and what its decay keeps for the allocations of the next
 * few hundred ms, given back by zm_pages_trim_due below), so that after a
 * mass free the arena keeps little beyond the pool's own pages within
 * half a second (docs/results/2026-12-02-memory-back.md,
 * docs/results/2026-12-05-trim-decay.md). */
static void give_back(struct zs_pool *zp)
{
	zm_pages_flush_thread(zp->pages);
	zm_pages_trim_idle(zp->pages);
}

/* The episode's last step (compact_lock held): the zspages it freed left
 * their records' pages and the tables sparse; the records of the
 * sparsest pages move into the others and those pages go back, and so do
 * the tables' pages whose entries are all free (zsmalloc/record.c,
 * zsmalloc/handle.c). */
static void compact_meta(struct zs_pool *zp)
{
	zs_meta_compact(zp);
}

/* The pool's work item: called by the worker every ZS_AUTO_PERIOD_MS
 * and when kicked; one call at a time. */
static void auto_run(void *arg)
{
	struct zs_auto *a = arg;
	struct zs_pool *zp = a->zp;
	enum zm_compact_policy pol = __atomic_load_n(&zp->auto_pol, __ATOMIC_RELAXED);

	bool episode = false;
	int pf;

	pthread_mutex_lock(&zp->compact_lock);
	pf = zm_pages_thread_prefault(0);   /* zs_compactor_prefault */
	if (pol == ZM_COMPACT_WATERMARK) {
		watermark_pass(zp, a);
	} else if (pol == ZM_COMPACT_RATIO) {
		/* below the threshold: armed for ZS_AUTO_GRACE_MS; while
		 * armed, passes until the target is reached or nothing
		 * moves, then the sweep */
		uint64_t now = zmi_os_now_ns();
		struct usage u = usage(zp);

		if (below(&u, a->ratio)) {
			a->armed_until = now + ZS_AUTO_GRACE_MS * 1000000ull;
			a->fresh = true;
		}
		if (now < a->armed_until && below(&u, a->target) && still_shrinking(a, &u)) {
			/* the slack there is now, not what frees make
			 * meanwhile: under churn, allocations take that, and
			 * chasing it kept the compactor running the whole
			 * grace window.  Counted by what each pass took off
			 * the pool's bytes (a mixed zspage's objects fill
			 * class pages as its own go) */
			uint64_t slack = u.alloc - u.used, won = 0;

			a->used_mark = u.used;  /* frees from now on: shrinking */

			while (ratio_pass(zp, a, &won) > 0 && !zmi_worker_stopping(&a->work) &&
			       (u = usage(zp), below(&u, a->target)) && won < slack) {
				pthread_mutex_unlock(&zp->compact_lock);
				/* the demand counts on while an episode runs:
				 * churn takes what it frees */
				zm_pages_trim_due(zp->pages);
				sched_yield();
				pthread_mutex_lock(&zp->compact_lock);
			}
			/* then the classes left with a few objects, and the
			 * records */
			if (!zmi_worker_stopping(&a->work)) {
				uint64_t t0 = zmi_os_now_ns();

				account(zp, zs_sweep(zp), t0);
				compact_meta(zp);
			}
			/* frees that come right after the episode the crossing
			 * started are finished too (once: steady churn after
			 * it must not keep it armed) */
			if (a->fresh) {
				a->armed_until = zmi_os_now_ns() + ZS_AUTO_GRACE_MS * 1000000ull;
				a->fresh = false;
			}
			episode = true;
		}
	}
	zm_pages_thread_prefault(pf);
	pthread_mutex_unlock(&zp->compact_lock);
	if (episode)
		give_back(zp);
	/* every period: what the pages layer keeps for demand goes back
	 * once the demand has passed (and counts only while this runs) */
	if (pol == ZM_COMPACT_RATIO)
		zm_pages_trim_due(zp->pages);
}

int zs_auto_start(struct zs_pool *zp, const struct zm_pool_config *cfg)
{
	struct zs_auto *a;
	enum zm_compact_policy pol = cfg->compact ? cfg->compact : ZS_DEF_POLICY;

	if (pol == ZM_COMPACT_OFF)
		return 0;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->want = calloc(zp->total, 1);
	a->watermark = cfg->compact_watermark ? cfg->compact_watermark : ZS_DEF_WATERMARK;
	a->ratio = cfg->compact_ratio ? cfg->compact_ratio : ZS_DEF_RATIO;
	a->target = cfg->compact_target ? cfg->compact_target : ZS_DEF_TARGET;
	if (a->target < a->ratio)
		a->target = a->ratio;
	a->budget = cfg->compact_budget ? cfg->compact_budget : ZS_DEF_BUDGET;
	if (!a->want || a->watermark > 100 || a->ratio > 100 || a->target > 100) {
		int rc = a->want ? -EINVAL : -ENOMEM;

		free(a->want);
		free(a);
		return rc;
	}
	pthread_mutex_init(&a->set_lock, NULL);
	a->zp = zp;
	a->work.fn = auto_run;
	a->work.arg = a;
	a->work.period_ms = ZS_AUTO_PERIOD_MS;
	/* the policy before the item, whose callback reads it; the free path
	 * may see it before autoc (zs_auto_note_free then does nothing) */
	__atomic_store_n(&zp->auto_pol, (uint8_t)pol, __ATOMIC_RELEASE);
	/* visible to the free path before the worker may call the item: a
	 * kick before then is seen on the item's first call */
	__atomic_store_n(&zp->autoc, a, __ATOMIC_RELEASE);
	if (zmi_worker_add(&a->work)) {
		__atomic_store_n(&zp->auto_pol, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&zp->autoc, NULL, __ATOMIC_RELEASE);
		pthread_mutex_destroy(&a->set_lock);
		free(a->want);
		free(a);
		return -ENOMEM;
	}
	return 0;
}

void zs_auto_stop(struct zs_pool *zp)
{
	struct zs_auto *a = zp->autoc;

	if (!a)
		return;
	__atomic_store_n(&zp->auto_pol, 0, __ATOMIC_RELEASE);
	/* waits for a running call of the item (never for a thread: a
	 * child after fork has none) */
	zmi_worker_del(&a->work);
	zp->autoc = NULL;
	pthread_mutex_destroy(&a->set_lock);
	free(a->want);
	free(a);
}

int zs_auto_set(struct zm_pool *pool, enum zm_compact_policy policy)
{
	struct zs_pool *zp = zs_of(pool);
	struct zm_pool_config cfg = { .compact = policy };

	struct zs_auto *a;
	int rc = 0;

	if (policy == ZM_COMPACT_DEFAULT)
		policy = cfg.compact = ZS_DEF_POLICY;
	/* serialised: two callers must not make two items */
	pthread_mutex_lock(&zp->compact_lock);
	a = zp->autoc;
	if (!a)
		rc = zs_auto_start(zp, &cfg);
	pthread_mutex_unlock(&zp->compact_lock);
	if (!a)
		return rc;
	/* OFF takes the pool's item off the worker (waiting for a running
	 * call, which takes compact_lock: not held here); another policy
	 * puts it back */
	pthread_mutex_lock(&a->set_lock);
	__atomic_store_n(&zp->auto_pol, (uint8_t)policy, __ATOMIC_RELEASE);
	if (policy == ZM_COMPACT_OFF)
		zmi_worker_del(&a->work);
	else
		rc = zmi_worker_add(&a->work);
	pthread_mutex_unlock(&a->set_lock);
	return rc;
}
