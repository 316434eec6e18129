/*
 * Automatic tiering: a store with idle_after_ms set has a work item on
 * the process's background worker (base/worker.h; no thread of its own)
 * that
 *
 *   - marks every page (idle.c) each idle_after / MARKS_PER_IDLE, so that
 *     ages are known to a quarter of idle_after; and
 *   - recompresses, with the secondary codec, pages not accessed for at
 *     least idle_after (recompress.c: no slot lock held while
 *     compressing), at most `rate` pages a second: each call re-encodes
 *     what the time since the last one allows, carrying on from where
 *     the last one stopped; when a full pool stopped it (no room even
 *     after compacting), it waits a mark's time before trying again.
 *
 * Writeback needs no item: a put at the memory limit writes back itself
 * (writeback.c), idle pages first; the marks made here are what tell it
 * which are.
 *
 * Locks: the item's state is the callback's alone (the worker never runs
 * one item's callback twice at once); it takes mark_lock and recomp_lock
 * through idle.c and recompress.c, never together.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "base/worker.h"
#include "store/store_internal.h"

/* Marks per idle_after: a page idle for idle_after is recompressed at
 * most a quarter of it late. */
#define MARKS_PER_IDLE 4
/* The callback's period bounds, ms: often enough for the rate to be
 * smooth, rarely enough to cost nothing when idle. */
#define TICK_MIN_MS 10
#define TICK_MAX_MS 1000
/* Slots one call looks at, at most (each is a lock and an unlock: a few
 * milliseconds' worth). */
#define VISIT_MAX (1u << 18)

struct zmi_store_tier {
	struct zmi_work work;
	struct zm_store *s;
	uint64_t idle_after_ns, mark_every_ns;
	unsigned rate;           /* pages a second */
	uint64_t last_mark_ns, last_run_ns;
	uint64_t cursor;         /* where recompression carries on */
	uint64_t full_until_ns;  /* the pool was full: no recompression before */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void tier_tick(void *arg)
{
	struct zmi_store_tier *t = arg;
	struct zm_store *s = t->s;
	uint64_t now = now_ns(), budget;
	bool full = false;

	if (now - t->last_mark_ns >= t->mark_every_ns) {
		/* idle_pages then counts what this item recompresses */
		zmi_store_idle_sweep(s, (unsigned)(t->idle_after_ns / 1000000ull), NULL);
		t->last_mark_ns = now;
	}
	if (!s->codec2 || zmi_worker_stopping(&t->work))
		return;
	/* the pages the time since the last call allows, at most a
	 * second's worth (after a pause, no burst beyond that) */
	budget = now - t->last_run_ns;
	if (budget > 1000000000ull)
		budget = 1000000000ull;
	budget = budget * t->rate / 1000000000ull;
	if (!budget)
		return;
	t->last_run_ns = now;
	if (now < t->idle_after_ns || now < t->full_until_ns)
		return;
	zmi_store_recompress_run(s, ZM_STORE_PICK_IDLE, now - t->idle_after_ns, budget, VISIT_MAX,
				 &t->cursor, &full, NULL);
	/* a full pool that compacting did not open: wait a mark's time
	 * rather than compact it again every tick */
	if (full)
		t->full_until_ns = now + t->mark_every_ns;
}

int zmi_store_tier_start(struct zm_store *s, unsigned idle_after_ms, unsigned rate)
{
	struct zmi_store_tier *t;
	unsigned tick;
	int rc;

	if (!idle_after_ms)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = s;
	t->idle_after_ns = (uint64_t)idle_after_ms * 1000000ull;
	t->mark_every_ns = t->idle_after_ns / MARKS_PER_IDLE;
	t->rate = rate ? rate : ZM_STORE_RECOMPRESS_RATE;
	t->last_mark_ns = t->last_run_ns = now_ns();
	tick = idle_after_ms / MARKS_PER_IDLE;
	tick = tick < TICK_MIN_MS ? TICK_MIN_MS : tick > TICK_MAX_MS ? TICK_MAX_MS : tick;
	t->work.fn = tier_tick;
	t->work.arg = t;
	t->work.period_ms = tick;
	rc = zmi_worker_add(&t->work);
	if (rc) {
		free(t);
		return rc;
	}
	s->tier = t;
	return 0;
}

void zmi_store_tier_stop(struct zm_store *s)
{
	if (!s->tier)
		return;
	zmi_worker_del(&s->tier->work);
	free(s->tier);
	s->tier = NULL;
}
