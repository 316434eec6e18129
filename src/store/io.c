/*
 * Put and get: the store's two hot paths.
 *
 * put:  same-filled?  -> the word goes in the slot
 *       else compress into the thread's buffer (no lock held), place it
 *       (policy.c); then lock the slot, charge the limit and put the
 *       object in one pool call (zm_pool_put_key: allocate, write, free
 *       the key's old object, bind the new one), set the info, unlock;
 *       count.
 * get:  lock the slot; decompress straight from the pool object (mapped
 *       read-only for the decoding callback, zm_pool_get_key) into the
 *       caller's buffer with the codec that encoded
 *       it, or copy a raw page, or fill the same-filled word; unlock,
 *       clearing the idle bit.  A page on the backing file is read with
 *       the slot marked BUSY and unlocked (writeback.c): no spinning lock
 *       is held across the read, and gets, puts and discards of the page
 *       wait for it asleep.
 *
 * At the memory limit, a put on a store with a backing file writes other
 * pages back to make room (writeback.c) instead of failing.
 *
 * So a get holds the slot lock across its decompression and a put only
 * across its pool call (an allocation, a copy, a free and a bind): a put
 * on the same slot waits for
 * the get to finish before it can free the object the get is reading, and
 * a get sees either the old content or the new, never a mix.
 *
 * The per-thread buffer (base/tbuf.h) holds one compressed page between
 * compression and zm_pool_put_key.
 *
 * Lock order: slot lock -> pool (see store_internal.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/tbuf.h"
#include "store/store_internal.h"

/* ---- put ------------------------------------------------------------ */

/* Reclaims a put may ask for before it gives up: each writes back a
 * batch (writeback.c) and compacts; more than a few means other threads
 * take the room as fast as it is made. */
#define RECLAIM_TRIES 8

/* Compress page into the thread's buffer and place it (policy.c): sets
 * *src and *size to what goes into the pool and *info to the slot's info
 * for it, or returns a negative errno (counted here when it is a
 * policy's). */
static int compress_page(struct zm_store *s, struct zmi_store_stripe *st, const void *page,
			 const void **src, size_t *size, uint32_t *info)
{
	char *buf = zmi_thread_buf(s->page_size);
	size_t zlen = 0;
	int n;

	if (zmi_unlikely(!buf))
		return -ENOMEM;
	n = zm_codec_compress(s->codec, page, s->page_size, buf, zmi_store_policy_cap(s));
	if (n > 0)
		zlen = (size_t)n;
	else if (n != -ENOSPC)
		return n == -ENOMEM ? -ENOMEM : -EIO;
	switch (zmi_store_policy_place(s, zlen)) {
	case ZM_PLACE_REJECT_ZSIZE:
		zmi_store_count(st, C_REJECT_ZSIZE, 1);
		return -E2BIG;
	case ZM_PLACE_REJECT_MEAN:
		zmi_store_count(st, C_REJECT_MEAN, 1);
		return -E2BIG;
	case ZM_PLACE_HUGE:
		*src = page, *size = s->page_size;
		*info = slot_info_sub(SUB_HUGE, false);
		return 0;
	default:
		*src = buf, *size = zlen;
		*info = slot_info_pool((uint32_t)zlen, false);
		return 0;
	}
}

/* A put that stored nothing: counted, its error returned. */
static int put_failed(struct zmi_store_stripe *st, int rc)
{
	zmi_store_count(st, C_FAILED_WRITES, 1);
	zmi_store_count(st, C_PUTS, 1);
	return rc;
}

/* Lock slot index for a put: its info in *old, or false (the slot
 * unlocked) when `only` says the put is not to be made. */
static bool put_lock(struct zm_store *s, uint64_t index, const struct zmi_store_unit *only,
		     uint32_t *old)
{
	*old = zmi_store_slot_lock_ready(s, index);
	if (only &&
	    (slot_kind(*old) != ZM_STORE_SLOT_UNIT || zmi_store_slot_unit(s, index) != only)) {
		/* a split's page rewritten or discarded meanwhile: keep that */
		zmi_store_slot_unlock(s, index, *old, *old);
		return false;
	}
	return true;
}

int zmi_store_put_page(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
		       const void *page, const struct zmi_store_unit *only)
{
	uint32_t info, old, old_len;
	const void *src = NULL;
	uint64_t word = 0;
	size_t size = 0;
	int rc;

	if (s->same_filled && zmi_store_page_same_filled(page, s->page_size, &word)) {
		info = slot_info_sub(SUB_SAME, false);
	} else {
		/* the old object, if any, fetched while the page compresses:
		 * asked for under the slot lock, as every pool call on the
		 * key (a put or discard of it on another thread may free it),
		 * and not waited for when another thread holds the slot */
		uint32_t cur;

		if (slot_in_pool(word_info(__atomic_load_n(&s->slots[index], __ATOMIC_RELAXED))) &&
		    zmi_store_slot_trylock(s, index, &cur)) {
			if (slot_in_pool(cur))
				zm_pool_prefetch_key(s->pool, index);
			zmi_store_slot_unlock(s, index, cur, cur);
		}
		rc = compress_page(s, st, page, &src, &size, &info);
		if (rc)
			return put_failed(st, rc);
	}
	zmi_lazy_mark(&s->slot_arr, index);
	/* At the limit, a store with a backing file writes pages back to
	 * make room (writeback.c), with the slot unlocked, and tries again;
	 * the buffer is the thread's, which a reclaim does not touch. */
	for (int tries = 0;; tries++) {
		bool pool_full = false;

		if (!put_lock(s, index, only, &old))
			return 0;
		old_len = zmi_store_slot_len(s, index, old);
		if (!size) {
			/* same-filled: the old content goes, nothing comes */
			if (zmi_unlikely(zmi_store_slot_swap(s, index, old, old_len, 0)))
				return put_failed(st, -EIO);
			if (zmi_store_slot_set_same(s, index, word))
				info |= SLOT_FLAG;
			break;
		}
		if (!zmi_store_limit_check(s, size)) {
			rc = zmi_store_slot_put(s, index, old, old_len, src, size);
			if (zmi_likely(!rc))
				break;
			if (rc != -ENOMEM)
				return put_failed(st, rc);   /* it unlocked */
			pool_full = true;
		}
		zmi_store_slot_unlock(s, index, old, old);
		if (pool_full && !__atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED))
			return put_failed(st, -ENOMEM);
		if (tries == RECLAIM_TRIES || !zmi_store_has_file(s) ||
		    zmi_store_reclaim(s, size, pool_full)) {
			zmi_store_count(st, C_LIMIT_FAILS, 1);
			return put_failed(st, -ENOSPC);
		}
	}
	zmi_store_slot_unlock(s, index, old, info);

	zmi_store_account(s, st, info, zmi_store_slot_len(s, index, info), 1);
	zmi_store_slot_release(s, old, old_len);
	if (only)
		return 0;   /* a split's rewrite: not a put of the caller's */
	if (zmi_unlikely(__atomic_fetch_add(&st->c[C_PUTS], 1, __ATOMIC_RELAXED) %
			ZM_STORE_SAMPLE_PUTS == 0))
		zmi_store_sample_used(s);
	return 0;
}

int zm_store_put(struct zm_store *s, uint64_t index, const void *page)
{
	int rc;

	if (zmi_unlikely(!s || !page || index >= s->nr_pages)) {
		zmi_bad_input("zm_store_put: no store or page, or index %llu beyond it",
			     (unsigned long long)index);
		return -EINVAL;
	}
	if (s->unit_pages == 1)
		return zmi_store_put_page(s, zmi_store_thread_stripe(s), index, page, NULL);
	zmi_store_unit_begin(s);
	rc = zmi_store_put_page(s, zmi_store_thread_stripe(s), index, page, NULL);
	zmi_store_unit_flush(s);
	return rc;
}

/* ---- get ------------------------------------------------------------ */

/* A get's decoding, straight from the pool's object (zm_pool_get_key):
 * with the codec that encoded it, or a raw page copied (codec NULL). */
struct get_dec {
	struct zm_codec *codec;
	size_t len;           /* the compressed length (the slot's info) */
	void *buf;
	size_t page_size;
};

static int get_decode(void *arg, const void *obj, size_t len)
{
	struct get_dec *d = arg;

	if (!d->codec) {
		if (zmi_unlikely(len < d->page_size))
			return -EIO;
		memcpy(d->buf, obj, d->page_size);
		return 0;
	}
	return zm_codec_decompress(d->codec, obj, d->len, d->buf, d->page_size);
}

int zmi_store_get_locked(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			 uint32_t info, void *buf)
{
	struct get_dec dec = { .buf = buf, .page_size = s->page_size };
	uint32_t held = info;
	uint64_t h;
	int rc;

	switch (slot_kind(info)) {
	case ZM_STORE_SLOT_UNIT:
		/* decoded with the slot unlocked; it unlocks */
		rc = zmi_store_unit_get(s, index, info, buf);
		if (zmi_unlikely(rc && rc != -EAGAIN))
			zmi_store_count(st, C_FAILED_READS, 1);
		return rc;
	case ZM_STORE_SLOT_EMPTY:
		zmi_store_slot_unlock(s, index, info, info);
		memset(buf, 0, s->page_size);
		return 0;
	case ZM_STORE_SLOT_SAME:
		h = zmi_store_slot_same_word(s, index, info);
		zmi_store_slot_unlock(s, index, info, info);
		zmi_store_page_fill(buf, s->page_size, h);
		return 0;
	case ZM_STORE_SLOT_HUGE:
		dec.codec = NULL;
		rc = zm_pool_get_key(s->pool, index, get_decode, &dec) ? -EIO : 0;
		break;
	case ZM_STORE_SLOT_FILE:
		/* read with the slot BUSY, not locked; it unlocks */
		rc = zmi_store_file_get(s, st, index, info, buf);
		if (zmi_unlikely(rc))
			zmi_store_count(st, C_FAILED_READS, 1);
		return rc;
	default:
		dec.codec = zmi_store_slot_codec(s, info);
		dec.len = slot_pool_len(info);
		rc = zm_pool_get_key(s->pool, index, get_decode, &dec);
		if (rc && rc != -ENOMEM)
			rc = -EIO;
		break;
	}
	/* an access: the page is not idle any more */
	zmi_store_slot_unlock(s, index, held, info & ~SLOT_IDLE);
	if (zmi_unlikely(rc))
		zmi_store_count(st, C_FAILED_READS, 1);
	return rc;
}

int zm_store_get(struct zm_store *s, uint64_t index, void *buf)
{
	struct zmi_store_stripe *st;
	int rc;

	if (zmi_unlikely(!s || !buf || index >= s->nr_pages)) {
		zmi_bad_input("zm_store_get: no store or buffer, or index %llu beyond it",
			     (unsigned long long)index);
		return -EINVAL;
	}
	st = zmi_store_thread_stripe(s);
	zmi_store_count(st, C_GETS, 1);
	do
		rc = zmi_store_get_locked(s, st, index, zmi_store_slot_lock_ready(s, index), buf);
	while (rc == -EAGAIN);
	return rc;
}
