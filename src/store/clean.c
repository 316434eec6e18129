/*
 * The packed backing file's cleaner (zm_store_compact_file).
 *
 * Pages written back are packed end to end into the file's blocks, and a
 * block stays until its last page leaves (backing.c).  After a churn, of
 * pages read back, rewritten and discarded, many blocks hold one or two
 * live pages among dead bytes, and the file's blocks in use grow to
 * 1.4-1.5x the live bytes on it.  The cleaner moves the pages out of the
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
 * Units on file (their chunks' offsets in the unit's record) are not
 * moved: the blocks they are in stay in use, counted as theirs.
 *
 * wb_lock is dropped between batches of CLEAN_BATCH pages so that a put
 * reclaiming at the limit waits for one batch at most.
 */
#include <errno.h>

#include "store/store_internal.h"

/* Where a run stops: blocks in use at most this share of the live bytes
 * (the goal is 120%: the rest is headroom for the churn to come). */
#define CLEAN_TARGET_PCT 110
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

long zm_store_compact_file(struct zm_store *s, uint64_t max_bytes)
{
	uint64_t held0, held1, live, moved = 0, i, end;
	uint32_t max_live;
	unsigned batch = 0;
	long rc, err = 0;
	bool wrapped = false;

	if (!s) {
		zmi_bad_input("zm_store_compact_file: no store");
		return -EINVAL;
	}
	if (!zmi_has_file(s))
		return -EOPNOTSUPP;
	if (!zmi_backing_packed(s))
		return 0;   /* pages at their index's offset: no dead space */
	if (!max_bytes)
		max_bytes = UINT64_MAX;
	zmi_backing_usage(s, &held0, &live);
	pthread_mutex_lock(&s->wb_lock);
	max_live = zmi_backing_clean_threshold(s, CLEAN_TARGET_PCT);
	/* one round of the slots from the hand, at most */
	i = s->clean_hand < s->nr_pages ? s->clean_hand : 0;
	end = i;
	while (max_live && moved < max_bytes) {
		uint64_t stop = wrapped ? end : s->nr_pages;

		i = zmi_slot_next_touched(s, i, stop);
		if (i >= stop) {
			if (wrapped || !end)
				break;
			wrapped = true;
			i = 0;
			continue;
		}
		rc = move_one(s, i, max_live);
		i++;
		if (rc > 0) {
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
			pthread_mutex_lock(&s->wb_lock);
			/* writebacks meanwhile may have changed the picture */
			max_live = zmi_backing_clean_threshold(s, CLEAN_TARGET_PCT);
		}
	}
	s->clean_hand = i < s->nr_pages ? i : 0;
	zmi_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	zmi_backing_usage(s, &held1, &live);
	if (held1 < held0)
		return (long)(held0 - held1);
	return err && !moved ? err : 0;
}
