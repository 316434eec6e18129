/*
 * The packed backing file's cleaner: zm_store_compact_file, and the same
 * run automatically at a bounded rate (file_clean_rate).
 *
 * Pages written back are packed end to end into the file's blocks, and a
 * block stays until its last page leaves (backing.c).  After a churn, of
 * pages read back, rewritten and discarded, many blocks hold one or two
 * live pages among dead bytes, and the file's blocks in use grow to
 * 1.4-2x the live bytes on it.  The cleaner moves the pages out of the
 * sparsest blocks into the block being filled, so that the emptied
 * blocks are punched and reused.
 *
 * Which blocks: zmi_backing_clean_threshold, from the blocks' live bytes,
 * the sparsest first until moving them would bring the blocks in use to
 * CLEAN_TARGET_PCT of the live bytes.  Then a walk over the slots from
 * clean_hand moves each page on file whose record lies in such a block,
 * one at a time:
 *
 *   1. lock its slot; if FILE and not BUSY, copy the record; unlock;
 *   2. read its bytes from the file, allocate room (the block being
 *      filled), write them there;
 *   3. lock; if the slot is still FILE, not BUSY, with the same record,
 *      point the record at the new place and free the old (the last page
 *      out of a block punches it); else free the new place.
 *
 * Step 3's test is enough because the cleaner holds wb_lock across the
 * three steps: only a writeback makes a slot FILE, so a record equal to
 * the one copied is the same page (it cannot have been discarded and
 * written back to the same place meanwhile), and its bytes, read in step
 * 2, are still the page's: its space was not freed, or if it was (a put,
 * a discard, a readback), the slot no longer holds it and the copy is
 * dropped.  A BUSY slot is being read by a get, at the old place: it is
 * left for the next pass.
 *
 * A unit on file is moved at the visit of its first live page, chunk by
 * chunk (those in such blocks): taken (its moving flag, which keeps a
 * readback off its offsets, and a reference, which keeps it alive), its
 * chunks read, given room and written; then, under its lock, if no get
 * is reading it (readers: those copied the old offsets), its offsets are
 * swapped for the new and the old freed, else the new are freed and it
 * waits for the next pass.
 *
 * wb_lock is dropped between batches of CLEAN_BATCH pages so that a put
 * reclaiming at the limit waits for one batch at most.
 *
 * Automatic cleaning (file_clean_rate bytes a second, 0 = off): a work
 * item on the process's worker (base/worker.h; no thread of its own)
 * looks at the file every CLEAN_TICK_MS.  Once its blocks in use pass
 * CLEAN_TRIGGER_PCT of the live bytes (and waste at least
 * CLEAN_MIN_WASTE), it cleans, each tick moving what the time since the
 * last one allows at the rate (a second's worth at most: no burst after
 * a pause), until a run finds the file at CLEAN_TARGET_PCT (nothing to
 * move); then it waits for the trigger again.  The gap between the two
 * is what makes a run worth its writes: each moves at least a tenth of
 * the live bytes' worth of blocks' room.
 *
 * Locks: wb_lock -> slot lock (one at a time) -> unit lock -> the file
 * space's lock (backing.c).  The item's state is its callback's alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "base/worker.h"
#include "store/store_internal.h"

/* Where a run stops: blocks in use at most this share of the live bytes
 * (the goal is 120%: the rest is headroom for the churn to come). */
#define CLEAN_TARGET_PCT 110
/* Automatic cleaning starts once the blocks in use pass this share of
 * the live bytes: the goal itself, so that the file stays within it as
 * long as the rate keeps up with the churn. */
#define CLEAN_TRIGGER_PCT 120
/* ...and waste at least this many bytes: a small file's few dead blocks
 * are not worth a run's writes. */
#define CLEAN_MIN_WASTE (256u << 10)
/* The automatic cleaner's period, ms: a tenth of a second's rate a tick. */
#define CLEAN_TICK_MS 100
/* Pages moved between two releases of wb_lock. */
#define CLEAN_BATCH 64

/* Move page index out of a block with fewer than max_live live bytes, if
 * it is on file there.  Its bytes moved, 0 (not such a page, or it
 * changed meanwhile), or a negative errno (the read, the room or the
 * write failed).  wb_lock held. */
static long move_one(struct zm_store *s, uint64_t index, uint32_t max_live)
{
	uint32_t info = zmi_slot_lock(s, index), now;
	uint64_t rec = 0, off = UINT64_MAX;
	size_t len;
	int rc;

	if (slot_kind(info) == ZM_STORE_SLOT_FILE && !slot_busy(info))
		rec = s->same_val[index];
	zmi_slot_unlock(s, index, info, info);
	if (!rec)
		return 0;
	len = rec & FILE_LEN_MASK;
	if (!zmi_backing_sparse(s, file_off(rec), len, max_live))
		return 0;
	rc = zmi_backing_read(s, index, file_off(rec), s->wb_buf, len);
	if (!rc)
		rc = zmi_backing_alloc(s, index, len, &off);
	if (!rc)
		rc = zmi_backing_write(s, index, off, s->wb_buf, len);
	if (rc) {
		if (off != UINT64_MAX)
			zmi_backing_free(s, index, off, len);
		return rc;
	}
	now = zmi_slot_lock(s, index);
	if (slot_kind(now) != ZM_STORE_SLOT_FILE || slot_busy(now) || s->same_val[index] != rec) {
		zmi_slot_unlock(s, index, now, now);
		zmi_backing_free(s, index, off, len);
		return 0;
	}
	s->same_val[index] = (rec & ((1ull << FILE_OFF_SHIFT) - 1)) | off << FILE_OFF_SHIFT;
	zmi_backing_free(s, index, file_off(rec), len);
	zmi_slot_unlock(s, index, now, now);
	return (long)len;
}

/* The unit on file that page index is the first live page of, taken
 * (moving set, a reference held); NULL if none. */
static struct zmi_unit *take_file_unit(struct zm_store *s, uint64_t index)
{
	uint32_t info = zmi_slot_lock(s, index);
	struct zmi_unit *u = NULL;

	if (slot_is_unit(info)) {
		u = zmi_slot_unit(s, index);
		zmi_unit_lock(u);
		/* one visit a unit: its first page still in it */
		if (u->file && !u->moving && u->live &&
		    index == u->base + (uint64_t)__builtin_ctz(u->live)) {
			u->moving = true;
			u->refs++;
		} else {
			zmi_unit_unlock(u);
			u = NULL;
		}
		if (u)
			zmi_unit_unlock(u);
	}
	zmi_slot_unlock(s, index, info, info);
	return u;
}

/* Move the chunks of the unit on file that page index is the first live
 * page of, those in blocks with fewer than max_live live bytes.  The
 * bytes moved, 0, or a negative errno as move_one.  wb_lock held. */
static long move_unit(struct zm_store *s, uint64_t index, uint32_t max_live)
{
	uint64_t off[ZM_STORE_UNIT_MAX], to[ZM_STORE_UNIT_MAX];
	struct zmi_unit *u = take_file_unit(s, index);
	unsigned nch, c;
	uint32_t len;
	long moved = 0;
	int rc = 0;

	if (!u)
		return 0;
	/* moving: no readback or writeback changes its offsets, and its
	 * reference keeps them allocated */
	zmi_unit_lock(u);
	len = u->len;
	nch = u->nchunks;
	for (c = 0; c < nch; c++)
		off[c] = u->chunk[c];
	zmi_unit_unlock(u);
	for (c = 0; c < nch && !rc; c++) {
		uint32_t n = zmi_unit_chunk_len(len, nch, c);

		to[c] = UINT64_MAX;
		if (!zmi_backing_sparse(s, off[c], n, max_live))
			continue;
		rc = zmi_backing_read(s, u->base + c, off[c], s->wb_buf, n);
		if (!rc)
			rc = zmi_backing_alloc(s, u->base + c, n, &to[c]);
		if (!rc)
			rc = zmi_backing_write(s, u->base + c, to[c], s->wb_buf, n);
		if (!rc)
			moved += n;
	}
	zmi_unit_lock(u);
	if (rc || u->readers) {
		/* a get reads the old offsets (or a move failed): the new
		 * places go back, and the next pass tries again */
		zmi_unit_unlock(u);
		for (unsigned d = 0; d < c; d++)
			if (to[d] != UINT64_MAX)
				zmi_backing_free(s, u->base + d, to[d], zmi_unit_chunk_len(len, nch, d));
		zmi_unit_give(s, u);
		return rc ? rc : 0;
	}
	for (c = 0; c < nch; c++)
		if (to[c] != UINT64_MAX)
			u->chunk[c] = to[c];
	zmi_unit_unlock(u);
	/* a get from now on copies the new offsets */
	for (c = 0; c < nch; c++)
		if (to[c] != UINT64_MAX)
			zmi_backing_free(s, u->base + c, off[c], zmi_unit_chunk_len(len, nch, c));
	zmi_unit_give(s, u);
	return moved;
}

/* One run of the cleaner: up to max_bytes moved (0: no bound), one round
 * of the slots from clean_hand at most; stops early once w (if not NULL)
 * is stopping.  Adds the bytes moved to *moved; 0 or the first error
 * when nothing moved. */
static long clean_run(struct zm_store *s, uint64_t max_bytes, const struct zmi_work *w,
		      uint64_t *moved_out)
{
	uint64_t moved = 0, i, end;
	uint32_t max_live;
	unsigned batch = 0;
	long rc, err = 0;
	bool wrapped = false;

	if (!max_bytes)
		max_bytes = UINT64_MAX;
	pthread_mutex_lock(&s->wb_lock);
	max_live = zmi_backing_clean_threshold(s, CLEAN_TARGET_PCT);
	/* one round of the slots from the hand, at most */
	i = s->clean_hand < s->nr_pages ? s->clean_hand : 0;
	end = i;
	while (max_live && moved < max_bytes) {
		uint64_t stop = wrapped ? end : s->nr_pages;
		uint32_t info;

		i = zmi_slot_next_touched(s, i, stop);
		if (i >= stop) {
			if (wrapped || !end)
				break;
			wrapped = true;
			i = 0;
			continue;
		}
		/* a peek: each move looks again under the lock */
		info = word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED));
		rc = slot_is_unit(info) ? move_unit(s, i, max_live) : move_one(s, i, max_live);
		i++;
		if (rc > 0) {
			/* counted as it goes: a long run shows its progress */
			zmi_count(zmi_stripe(s), C_CLEAN_BYTES, rc);
			moved += (uint64_t)rc;
		} else if (rc < 0) {
			/* a full file or a failing one: the next call tries */
			err = rc;
			break;
		}
		if (rc > 0 && ++batch == CLEAN_BATCH) {
			batch = 0;
			s->clean_hand = i;
			zmi_backing_flush(s);   /* the pages moved leave the cache */
			pthread_mutex_unlock(&s->wb_lock);
			if (w && zmi_worker_stopping(w)) {
				pthread_mutex_lock(&s->wb_lock);
				break;
			}
			pthread_mutex_lock(&s->wb_lock);
			/* writebacks meanwhile may have changed the picture */
			max_live = zmi_backing_clean_threshold(s, CLEAN_TARGET_PCT);
		}
	}
	s->clean_hand = i < s->nr_pages ? i : 0;
	zmi_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	if (moved)
		zmi_count(zmi_stripe(s), C_CLEAN_RUNS, 1);
	*moved_out += moved;
	return err && !moved ? err : 0;
}

long zm_store_compact_file(struct zm_store *s, uint64_t max_bytes)
{
	uint64_t held0, held1, live, moved = 0;
	long err;

	if (!s) {
		zmi_bad_input("zm_store_compact_file: no store");
		return -EINVAL;
	}
	if (!zmi_has_file(s))
		return -EOPNOTSUPP;
	if (!zmi_backing_packed(s))
		return 0;   /* pages at their index's offset: no dead space */
	zmi_backing_usage(s, &held0, &live);
	err = clean_run(s, max_bytes, NULL, &moved);
	zmi_backing_usage(s, &held1, &live);
	if (held1 < held0)
		return (long)(held0 - held1);
	return err;
}

/* ---- automatic cleaning ------------------------------------------------ */

struct zmi_cleaner {
	struct zmi_work work;
	struct zm_store *s;
	uint64_t rate;        /* bytes a second */
	uint64_t last_ns;
	int64_t credit;       /* bytes the rate allows now (a run may
				 overdraw it by a page) */
	bool active;          /* past the trigger, not yet at the target */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Is the file past the trigger?  held and live as zmi_backing_usage. */
static bool over_trigger(uint64_t held, uint64_t live)
{
	return held > live + CLEAN_MIN_WASTE &&
	       held / CLEAN_TRIGGER_PCT > live / 100;
}

static void clean_tick(void *arg)
{
	struct zmi_cleaner *c = arg;
	struct zm_store *s = c->s;
	uint64_t now = now_ns(), held, live, moved = 0, dt;

	dt = now - c->last_ns;
	c->last_ns = now;
	if (dt > 1000000000ull)
		dt = 1000000000ull;
	c->credit += (int64_t)(dt * c->rate / 1000000000ull);
	if (c->credit > (int64_t)c->rate)
		c->credit = (int64_t)c->rate;   /* no burst beyond a second's */
	if (!zmi_has_file(s))
		return;   /* a forked child's store: the file is the parent's */
	if (!c->active) {
		/* no credit saved up while there was nothing to do: the
		 * rate bounds a run from its first tick */
		c->credit = 0;
		zmi_backing_usage(s, &held, &live);
		if (!over_trigger(held, live))
			return;
		c->active = true;
		c->credit = (int64_t)(dt * c->rate / 1000000000ull);
	}
	if (c->credit <= 0 || zmi_worker_stopping(&c->work))
		return;
	(void)clean_run(s, (uint64_t)c->credit, &c->work, &moved);
	c->credit -= (int64_t)moved;
	/* nothing to move: at the target (or what is left is being read) */
	if (!moved)
		c->active = false;
}

int zmi_clean_start(struct zm_store *s, uint64_t rate)
{
	struct zmi_cleaner *c;
	int rc;

	if (!rate || !zmi_has_file(s) || !zmi_backing_packed(s))
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->rate = rate;
	c->last_ns = now_ns();
	c->work.fn = clean_tick;
	c->work.arg = c;
	c->work.period_ms = CLEAN_TICK_MS;
	rc = zmi_worker_add(&c->work);
	if (rc) {
		free(c);
		return rc;
	}
	s->cleaner = c;
	return 0;
}

void zmi_clean_stop(struct zm_store *s)
{
	if (!s->cleaner)
		return;
	zmi_worker_del(&s->cleaner->work);
	free(s->cleaner);
	s->cleaner = NULL;
}
