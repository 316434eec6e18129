/*
 * Recompression: pages re-encoded with the store's secondary codec (a
 * stronger one: zstd where the primary is lz4), kept only when that makes
 * them smaller, as zram's recompress does.
 *
 * One page, never holding its slot lock while compressing:
 *
 *   1. lock; if the page is one `which` takes, copy its object out;
 *      unlock (the slot unchanged);
 *   2. decompress the copy (a raw page needs none), compress it with the
 *      secondary codec into at most one byte less than it has now (or
 *      below huge_size, for a raw page); if it does not fit, the page
 *      stays as it is (a raw page is marked incompressible so that it is
 *      not tried again);
 *   3. allocate and write the new object;
 *   4. lock; if the slot still holds what was copied (the same info but
 *      for the idle bit, and the same bytes: a put of the same length in
 *      between is told apart by them), swap the new object in and free
 *      the old; else free the new one.  Unlock.
 *
 * The bytes compared are a few hundred to a few thousand, against the
 * tens of microseconds a zstd compression of a page takes.  A page keeps
 * its idle bit and age through a recompression: it was not accessed.
 * Gets decode a page with the codec its slot names (SLOT_SEC).
 *
 * A full pool (the memory limit) has no room for the new objects, which
 * go to other size classes than the old: a run then compacts once (and,
 * with a backing file, writes back a batch of the pages it picks) and
 * stops if there is still none.  Runs compact after themselves once what
 * they saved adds up to an eighth of the pool's bytes (and a megabyte).
 *
 * Locks: recomp_lock (one recompression at a time, for rc_buf) -> slot
 * locks, one at a time -> pool.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

/* Bytes worth compacting for: a run that saved this much compacts after
 * it, and a full pool is compacted by this much to make room (a few
 * zspages). */
#define RECOMP_ROOM ((size_t)1 << 20)

int zmi_recomp_init(struct zm_store *s, const char *codec, int level)
{
	int rc;

	if (!codec)
		return 0;
	rc = zm_codec_create(codec, level, &s->codec2);
	if (rc)
		return rc;
	s->rc_buf = malloc(3 * s->page_size);
	return s->rc_buf ? 0 : -ENOMEM;
}

void zmi_recomp_fini(struct zm_store *s)
{
	zm_codec_destroy(s->codec2);
	s->codec2 = NULL;
	free(s->rc_buf);
	s->rc_buf = NULL;
}

/* Recompress slot index if `which` takes it: the bytes it saved (> 0) if
 * re-encoded, 0 if not, -ENOSPC if the pool had no room for the new
 * object, -EIO if the pool refused the swap (the page stays, or is lost
 * if its old object was freed and the new one could not be bound). */
static int recompress_one(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			  unsigned which, uint64_t cutoff_ns)
{
	char *obj = s->rc_buf, *page = obj + s->page_size, *out = page + s->page_size;
	uint32_t info, now, len;
	size_t cap;
	bool huge;
	zm_handle_t h;
	int n, rc;

	info = zmi_slot_lock(s, index);
	if (slot_is_unit(info) || !zmi_pick(s, index, info, which, cutoff_ns) || (info & SLOT_SEC) ||
	    (!(info & SLOT_POOL) && (info & SLOT_FLAG))) {
		zmi_slot_unlock(s, index, info, info);
		return 0;
	}
	huge = !(info & SLOT_POOL);
	len = zmi_slot_len(s, index, info);
	rc = zm_pool_read(s->pool, zmi_slot_handle(s, index), obj, len);
	zmi_slot_unlock(s, index, info, info);
	if (rc)
		return 0;
	zmi_count(st, C_RECOMP_TRIED, 1);

	if (huge)
		page = obj;
	else if (zm_codec_decompress(s->codec, obj, len, page, s->page_size))
		return 0;  /* corrupt: a get will say so */
	cap = huge ? s->huge_size - 1 : len - 1;
	if (s->max_zsize && cap > s->max_zsize)
		cap = s->max_zsize;
	n = cap ? zm_codec_compress(s->codec2, page, s->page_size, out, cap) : -ENOSPC;
	if (n <= 0) {
		if (huge && n == -ENOSPC) {
			/* mark it, so that it is not tried again */
			now = zmi_slot_lock(s, index);
			if (zmi_slot_unchanged(s, index, now, info, obj, len) && !(now & SLOT_FLAG)) {
				zmi_slot_unlock(s, index, now, now | SLOT_FLAG);
				zmi_count(st, C_INCOMPRESSIBLE, 1);
			} else {
				zmi_slot_unlock(s, index, now, now);
			}
		}
		return 0;
	}
	h = zm_pool_alloc(s->pool, (size_t)n);
	if (!h)
		return -ENOSPC;  /* the pool is full: the caller makes room */
	if (zm_pool_write(s->pool, h, out, (size_t)n)) {
		zm_pool_free(s->pool, h);
		return 0;
	}
	now = zmi_slot_lock(s, index);
	if (!zmi_slot_unchanged(s, index, now, info, obj, len)) {
		zmi_slot_unlock(s, index, now, now);
		zm_pool_free(s->pool, h);
		return 0;
	}
	if (zmi_slot_swap(s, index, now, len, h)) {
		zm_pool_free(s->pool, h);
		return -EIO;
	}
	info = slot_info_pool((uint32_t)n, true) | (now & SLOT_IDLE);
	zmi_slot_unlock(s, index, now, info);
	zmi_account(s, st, now, len, -1);
	zmi_account(s, st, info, (uint32_t)n, 1);
	zmi_count(st, C_RECOMP, 1);
	zmi_count(st, C_RECOMP_SAVED, (int64_t)(len - (uint32_t)n));
	return (int)(len - (uint32_t)n);
}

/* Make room in a full pool for recompressed objects: compact; if that
 * frees nothing and the store has a backing file, write back a batch of
 * the pages the run picks (`which`, never 0 here: a writeback must not
 * spend the writeback limit on pages the run did not pick).  Without it
 * the automatic tiering of a pool packed to its limit would stop for
 * good: a re-encoded object needs room beside the old one.  0 if there
 * may be room now. */
#define RECOMP_WB_BATCH 32

static int make_room(struct zm_store *s, unsigned which, uint64_t cutoff_ns)
{
	if (zm_pool_shrink(s->pool, RECOMP_ROOM) > 0)
		return 0;
	return which && zmi_writeback_pick(s, which, cutoff_ns, RECOMP_WB_BATCH) > 0 ? 0 : -ENOSPC;
}

long zmi_recompress_run(struct zm_store *s, unsigned which, uint64_t cutoff_ns,
			uint64_t max_pages, uint64_t max_visit, uint64_t *cursor, bool *full,
			const int *stop)
{
	struct zmi_store_stripe *st = zmi_stripe(s);
	uint64_t visited = 0, saved = 0, i;
	bool made_room = false;
	long done = 0, done_at_room = 0, err = 0;

	pthread_mutex_lock(&s->recomp_lock);
	while ((uint64_t)done < max_pages && !(stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) &&
	       zmi_slot_walk(s, cursor, &visited, max_visit, &i)) {
		int rc = recompress_one(s, st, i, which, cutoff_ns);

		if (rc == -ENOSPC) {
			/* a full pool: make room and try this page again; if
			 * the room made last time took no page, or none can
			 * be made, stop rather than compress pages that
			 * cannot be kept */
			if ((made_room && done == done_at_room) || make_room(s, which, cutoff_ns)) {
				if (full)
					*full = true;
				*cursor = i;
				break;
			}
			made_room = true;
			done_at_room = done;
			*cursor = i;
			visited--;
			continue;
		}
		if (rc > 0) {
			done++;
			saved += (uint64_t)rc;
		}
		if (rc == -EIO)
			err = rc;  /* a pool error (counted): the run goes on */
	}
	/* the objects left behind are holes in their zspages: give the pages
	 * back rather than wait for the pool's own policy (its ratio of used
	 * to held bytes may settle anywhere above its threshold: the smaller
	 * objects went to other classes), once the holes add up to an eighth
	 * of what the pool holds, so that a stream of small runs compacts a
	 * few times over, not at every run (each compaction interrupts every
	 * thread of the process with a barrier) */
	s->recomp_holes += saved;
	saved = s->recomp_holes;
	if (saved >= RECOMP_ROOM && saved >= zmi_counter_sum(s, C_COMPR) / 8)
		s->recomp_holes = 0;
	else
		saved = 0;
	pthread_mutex_unlock(&s->recomp_lock);
	if (saved)
		zm_pool_shrink(s->pool, saved);
	return done ? done : err;
}

long zm_store_recompress_stoppable(struct zm_store *s, unsigned which, uint64_t max_pages,
				   const int *stop)
{
	uint64_t cursor = 0;

	if (!s || (which & ~(ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE |
			     ZM_STORE_PICK_INCOMPRESSIBLE))) {
		zmi_bad_input("zm_store_recompress: no store, or unknown bits in which %#x", which);
		return -EINVAL;
	}
	if (!s->codec2)
		return -EOPNOTSUPP;
	return zmi_recompress_run(s, which, __atomic_load_n(&s->idle_cutoff_ns, __ATOMIC_RELAXED),
				  max_pages, UINT64_MAX, &cursor, NULL, stop);
}

long zm_store_recompress(struct zm_store *s, unsigned which, uint64_t max_pages)
{
	return zm_store_recompress_stoppable(s, which, max_pages, NULL);
}
