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

int zmi_store_recomp_init(struct zm_store *s, const char *codec, int level)
{
	int rc;

	if (!codec)
		return 0;
	rc = zm_codec_create(codec, level, &s->codec2);
	if (rc)
		return rc;
	/* units: three units' room (objects, decoded, result) */
	s->rc_buf = malloc(3 * s->page_size * s->unit_pages);
	return s->rc_buf ? 0 : -ENOMEM;
}

void zmi_store_recomp_fini(struct zm_store *s)
{
	zm_codec_destroy(s->codec2);
	s->codec2 = NULL;
	free(s->rc_buf);
	s->rc_buf = NULL;
}

/* ---- units ------------------------------------------------------------ */

/* Re-encode the unit of page index, whole, with the secondary codec if
 * it was the primary's and `which` takes all its pages, and if that is
 * smaller: its chunks are replaced under its lock (the decoded bytes are
 * the same, so its generation and the threads' caches stay).  As
 * recompress_one; *pages: its pages re-encoded. */
static int recompress_unit(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			   unsigned which, uint64_t cutoff_ns, unsigned *pages)
{
	size_t ps = s->page_size, room = ps * s->unit_pages;
	char *obj = s->rc_buf, *dec = obj + room, *out = dec + room;
	zm_handle_t h[ZM_STORE_UNIT_MAX], old[ZM_STORE_UNIT_MAX];
	unsigned nch, onch;
	struct zmi_store_unit *u;
	uint32_t len, n, at = 0;
	bool sec;
	int z, rc = 0;

	u = zmi_store_unit_take(s, index);
	if (!u)
		return 0;
	if (u->sec || !zmi_store_unit_picked(s, u, which, cutoff_ns) ||
	    zmi_store_unit_fetch(s, u, obj, &len, &sec))
		goto out;
	zmi_store_unit_lock(u);
	zmi_store_count(st, C_RECOMP_TRIED, __builtin_popcount(u->live)); /* in pages */
	zmi_store_unit_unlock(u);
	if (zm_codec_decompress(s->codec, obj, len, dec, (size_t)u->span * ps))
		goto out;   /* corrupt: a get will say so */
	z = zm_codec_compress(s->codec2, dec, (size_t)u->span * ps, out, len - 1);
	if (z <= 0)
		goto out;
	n = (uint32_t)z;
	nch = (unsigned)((n + ps - 1) / ps);
	for (unsigned c = 0; c < nch; c++) {
		uint32_t cl = zmi_store_unit_chunk_len(n, nch, c);

		h[c] = zm_pool_alloc(s->pool, cl);
		if (h[c] && zm_pool_write(s->pool, h[c], out + at, cl)) {
			zm_pool_free(s->pool, h[c]);
			h[c] = 0;
		}
		at += cl;
		if (!h[c]) {
			for (unsigned d = 0; d < c; d++)
				zm_pool_free(s->pool, h[d]);
			rc = -ENOSPC;   /* the pool is full: the caller makes room */
			goto out;
		}
	}
	zmi_store_unit_lock(u);
	if (!u->live) {
		zmi_store_unit_unlock(u);
		for (unsigned c = 0; c < nch; c++)
			zm_pool_free(s->pool, h[c]);
		goto out;   /* its pages all left: it goes with the pin */
	}
	onch = u->nchunks;
	for (unsigned c = 0; c < onch; c++)
		old[c] = u->chunk[c];
	for (unsigned c = 0; c < nch; c++)   /* nch <= onch: n < len */
		u->chunk[c] = h[c];
	u->nchunks = (uint8_t)nch;
	u->len = n;
	u->sec = true;
	u->saved += len - n;
	*pages = (unsigned)__builtin_popcount(u->live);
	zmi_store_unit_unlock(u);
	for (unsigned c = 0; c < onch; c++)
		if (zmi_unlikely(zm_pool_free(s->pool, old[c])))
			zmi_store_count(st, C_POOL_ERRORS, 1);
	zmi_store_count(st, C_COMPR, -(int64_t)(len - n));
	zmi_store_count(st, C_UNIT_BYTES, -(int64_t)(len - n));
	zmi_store_count(st, C_OBJECTS, (int64_t)nch - (int64_t)onch);
	zmi_store_count(st, C_UNIT_SAVED, len - n);
	zmi_store_count(st, C_RECOMP, *pages);
	zmi_store_count(st, C_RECOMP_SAVED, len - n);
	rc = (int)(len - n);
out:
	zmi_store_unit_give(s, u);
	return rc;
}

/* Idle neighbours into a unit: the single pages of index's aligned
 * group that `which` takes (at least two, index the first of them, and
 * not of the secondary codec: a group that did not pay is tried once,
 * its first page then being re-encoded alone), decoded side by side and
 * encoded as one with the secondary codec; kept as a unit if that saves
 * unit_min_saving over what they take now.  Each page joins the unit
 * only if unchanged since it was copied (zmi_store_slot_unchanged), keeping
 * its idle bit and age.  As recompress_one; 0 when no unit formed (the
 * caller re-encodes the page alone). */
static int recompress_group(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			    unsigned which, uint64_t cutoff_ns, unsigned *pages)
{
	size_t ps = s->page_size, room = ps * s->unit_pages, at = 0, cap;
	char *obj = s->rc_buf, *dec = obj + room, *out = dec + room;
	uint64_t g = index / s->unit_pages * s->unit_pages, alone = 0, joined = 0;
	uint32_t info[ZM_STORE_UNIT_MAX], len[ZM_STORE_UNIT_MAX], mask = 0;
	size_t objoff[ZM_STORE_UNIT_MAX];
	unsigned first, last, span, members;
	struct zmi_store_unit *u;
	int z;

	if (s->unit_pages == 1 || s->max_zsize || s->max_mean_zsize ||
	    (which & (ZM_STORE_PICK_HUGE | ZM_STORE_PICK_INCOMPRESSIBLE)))
		return 0;
	for (unsigned k = 0; k < s->unit_pages && g + k < s->nr_pages; k++) {
		uint64_t j = g + k;
		uint32_t i;

		if (!slot_in_pool(word_info(__atomic_load_n(&s->slots[j], __ATOMIC_RELAXED))))
			continue;
		i = zmi_store_slot_lock(s, j);
		if (slot_in_pool(i) && zmi_store_pick(s, j, i, which, cutoff_ns) &&
		    ((i & SLOT_POOL) || !(i & SLOT_FLAG))) {
			len[k] = zmi_store_slot_len(s, j, i);
			if (!zm_pool_read(s->pool, zmi_store_slot_handle(s, j), obj + at, len[k])) {
				info[k] = i;
				objoff[k] = at;
				at += len[k];
				alone += len[k];
				mask |= 1u << k;
			}
		}
		zmi_store_slot_unlock(s, j, i, i);
		if (j == index && mask != 1u << k)
			return 0;   /* index is not the group's first */
	}
	members = (unsigned)__builtin_popcount(mask);
	if (members < 2 || !(mask & (1u << (index - g))) ||
	    (info[index - g] & SLOT_SEC))
		return 0;
	first = (unsigned)__builtin_ctz(mask);
	last = 31u - (unsigned)__builtin_clz(mask);
	span = last - first + 1;
	zmi_store_count(st, C_RECOMP_TRIED, members);
	for (unsigned k = first; k <= last; k++) {
		char *p = dec + (size_t)(k - first) * ps;

		if (!(mask >> k & 1))
			memset(p, 0, ps);   /* not a member: any bytes */
		else if (!(info[k] & SLOT_POOL))
			memcpy(p, obj + objoff[k], ps);
		else if (zm_codec_decompress(zmi_store_slot_codec(s, info[k]), obj + objoff[k],
					     len[k], p, ps))
			return 0;   /* corrupt: a get will say so */
	}
	cap = (size_t)(alone * (100 - s->unit_min_saving) / 100);
	z = cap ? zm_codec_compress(s->codec2, dec, (size_t)span * ps, out, cap) : -ENOSPC;
	if (z <= 0)
		return 0;   /* it does not pay */
	u = zmi_store_unit_make(s, g + first, span, mask >> first, out, (size_t)z,
				alone - (uint64_t)z, true);
	if (!u)
		return -ENOSPC;
	for (unsigned k = first; k <= last; k++) {
		uint64_t j = g + k;
		uint32_t now;

		if (!(mask >> k & 1))
			continue;
		zmi_lazy_mark(&s->same_arr, j);
		now = zmi_store_slot_lock(s, j);
		if (!zmi_store_slot_unchanged(s, j, now, info[k], obj + objoff[k], len[k]) ||
		    zmi_store_slot_free_object(s, j, now)) {
			/* rewritten meanwhile (or the pool kept it): not in it */
			zmi_store_slot_unlock(s, j, now, now);
			zmi_store_unit_lock(u);
			u->live &= (uint16_t)~(1u << (k - first));
			u->refs--;
			zmi_store_unit_unlock(u);
			continue;
		}
		s->same_val[j] = (uint64_t)(uintptr_t)u;
		zmi_store_slot_unlock(s, j, now, SLOT_INFO_UNIT | (now & SLOT_IDLE));
		zmi_store_account(s, st, now, len[k], -1);
		zmi_store_account(s, st, SLOT_INFO_UNIT, 0, 1);
		joined += len[k];
		(*pages)++;
		zmi_store_unit_joined(s, j);
	}
	zmi_store_unit_give(s, u); /* formed */
	if (!*pages)
		return 0;
	zmi_store_count(st, C_RECOMP, *pages);
	if (joined > (uint64_t)z)
		zmi_store_count(st, C_RECOMP_SAVED, (int64_t)(joined - (uint64_t)z));
	return joined > (uint64_t)z ? (int)(joined - (uint64_t)z) : 1;
}

/* ---- pages ------------------------------------------------------------- */

/* Recompress slot index if `which` takes it (or its unit, or its group
 * into a unit): the bytes it saved (> 0) if re-encoded, with the pages
 * that were in *pages, 0 if not, -ENOSPC if the pool had no room for
 * the new object, -EIO if the pool refused the swap (the page stays, or
 * is lost if its old object was freed and the new one could not be
 * bound). */
static int recompress_one(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			  unsigned which, uint64_t cutoff_ns, unsigned *pages)
{
	char *obj = s->rc_buf, *page = obj + s->page_size, *out = page + s->page_size;
	uint32_t info, now, len;
	size_t cap;
	bool huge;
	zm_handle_t h;
	int n, rc;

	*pages = 0;
	info = zmi_store_slot_lock(s, index);
	if (slot_is_unit(info)) {
		/* zmi_store_pick reads the unit: only under the slot lock */
		bool pick = zmi_store_pick(s, index, info, which, cutoff_ns);

		zmi_store_slot_unlock(s, index, info, info);
		return pick ? recompress_unit(s, st, index, which, cutoff_ns, pages) : 0;
	}
	if (s->unit_pages > 1 && zmi_store_pick(s, index, info, which, cutoff_ns) &&
	    !(info & SLOT_SEC)) {
		zmi_store_slot_unlock(s, index, info, info);
		rc = recompress_group(s, st, index, which, cutoff_ns, pages);
		if (rc)
			return rc;
		info = zmi_store_slot_lock(s, index);
	}
	if (!zmi_store_pick(s, index, info, which, cutoff_ns) || (info & SLOT_SEC) ||
	    (!(info & SLOT_POOL) && (info & SLOT_FLAG))) {
		zmi_store_slot_unlock(s, index, info, info);
		return 0;
	}
	huge = !(info & SLOT_POOL);
	len = zmi_store_slot_len(s, index, info);
	rc = zm_pool_read(s->pool, zmi_store_slot_handle(s, index), obj, len);
	zmi_store_slot_unlock(s, index, info, info);
	if (rc)
		return 0;
	zmi_store_count(st, C_RECOMP_TRIED, 1);

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
			now = zmi_store_slot_lock(s, index);
			if (zmi_store_slot_unchanged(s, index, now, info, obj, len) && !(now & SLOT_FLAG)) {
				zmi_store_slot_unlock(s, index, now, now | SLOT_FLAG);
				zmi_store_count(st, C_INCOMPRESSIBLE, 1);
			} else {
				zmi_store_slot_unlock(s, index, now, now);
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
	now = zmi_store_slot_lock(s, index);
	if (!zmi_store_slot_unchanged(s, index, now, info, obj, len)) {
		zmi_store_slot_unlock(s, index, now, now);
		zm_pool_free(s->pool, h);
		return 0;
	}
	if (zmi_store_slot_swap(s, index, now, len, h)) {
		zm_pool_free(s->pool, h);
		return -EIO;
	}
	info = slot_info_pool((uint32_t)n, true) | (now & SLOT_IDLE);
	zmi_store_slot_unlock(s, index, now, info);
	zmi_store_account(s, st, now, len, -1);
	zmi_store_account(s, st, info, (uint32_t)n, 1);
	zmi_store_count(st, C_RECOMP, 1);
	zmi_store_count(st, C_RECOMP_SAVED, (int64_t)(len - (uint32_t)n));
	*pages = 1;
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
	return which && zmi_store_writeback_pick(s, which, cutoff_ns,
						 RECOMP_WB_BATCH) > 0 ? 0 : -ENOSPC;
}

long zmi_store_recompress_run(struct zm_store *s, unsigned which, uint64_t cutoff_ns,
			      uint64_t max_pages, uint64_t max_visit, uint64_t *cursor, bool *full,
			      const int *stop)
{
	struct zmi_store_stripe *st = zmi_store_thread_stripe(s);
	uint64_t visited = 0, saved = 0, i;
	bool made_room = false;
	long done = 0, done_at_room = 0, err = 0;

	pthread_mutex_lock(&s->recomp_lock);
	while ((uint64_t)done < max_pages && !(stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) &&
	       zmi_store_slot_walk(s, cursor, &visited, max_visit, &i)) {
		unsigned pages;
		int rc = recompress_one(s, st, i, which, cutoff_ns, &pages);

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
			done += pages;
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
	if (saved >= RECOMP_ROOM && saved >= zmi_store_counter_sum(s, C_COMPR) / 8)
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
	return zmi_store_recompress_run(s, which,
					__atomic_load_n(&s->idle_cutoff_ns, __ATOMIC_RELAXED),
					max_pages, UINT64_MAX, &cursor, NULL, stop);
}

long zm_store_recompress(struct zm_store *s, unsigned which, uint64_t max_pages)
{
	return zm_store_recompress_stoppable(s, which, max_pages, NULL);
}
