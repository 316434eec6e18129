/*
 * Multi-page units: adjacent pages compressed together as one object.
 *
 * A 4 KiB page is a small window for a compressor: compressing several
 * neighbours at once finds repeats across them and pays the codec's
 * fixed costs (frame header, entropy tables) once.  With unit_pages > 1,
 * zm_store_put_range() cuts its range at multiples of unit_pages and, in
 * each such group, compresses the run from the first to the last page
 * that is not same-filled (the members; at least two) in one call.  The
 * unit is kept only when it pays (below); otherwise its pages are stored
 * one by one, as zm_store_put() would.
 *
 * Does it pay?  A unit is kept when its length is at most
 * (100 - unit_min_saving)% of what its members would take alone.  That
 * is measured (each member compressed alone, into a scratch buffer) for
 * a sample of units: the first UNIT_EST_WARM of each estimate bucket and
 * then one in UNIT_EST_EVERY; the rest are estimated from the sample,
 * by how well the unit itself compressed (UNIT_EST_BUCKETS buckets of
 * its length over the bytes it covers: heaps, text and code gain
 * differently).  The estimate never exceeds the members' raw bytes
 * (each page alone is at most stored raw), so a unit of incompressible
 * data never pays, and a unit the codec cannot shrink below its pages'
 * raw bytes less the saving is not even finished (the codec is given
 * that as its cap).  The sampled units cost their members' compression
 * once more, which is why they are few.
 * Units that do not pay cost their compression twice (the unit, then
 * its pages); after a few in a row the store backs off (UNIT_DECLINES).
 *
 * Where a unit lives: its bytes, cut into nchunks pieces of at most a
 * page (pool objects are at most a page), in pool objects with handles
 * of their own (not bound to a key: the keys are the pages'); its
 * record (struct zmi_store_unit, store_internal.h) is malloc'ed, and each of
 * its pages' slots says UNIT, with same_val[] pointing to the record.
 *
 * Reading one page: the page's slot is locked, then the unit's lock, the
 * chunks copied out into the thread's buffer, both unlocked, and the
 * unit decoded whole (lz4 and zstd decode whole blocks) into the
 * thread's cache, from which the page is copied.  The cache holds the
 * thread's last decoded unit, keyed by the unit's generation (unique in
 * the process), so the next pages of a sequential read cost a copy: it
 * costs each thread that reads units unit_pages * page_size bytes (64
 * KiB at 16 x 4 KiB), and as much again for the compressed copy.
 *
 * Writing or discarding one page of a unit: the page leaves the unit
 * (its bit in live goes, a reference with it), and the unit is freed
 * when its last page leaves.  So that a unit whose pages were mostly
 * rewritten does not keep their old bytes, once half or more of its
 * members have left (UNIT_SPLIT_SHARE), the thread that saw it asks for a split, run at the
 * end of its call (zmi_store_unit_flush, with no lock held; only puts and
 * discards ask, between zmi_store_unit_begin and zmi_store_unit_flush):
 * the unit decoded, each page still in it stored alone (only if it still is: a page
 * rewritten meanwhile keeps its new content), and the unit freed with
 * its last page.
 *
 * Statistics stay in pages (pages_stored counts each page of a unit);
 * a unit's bytes count in compr_data_size, its chunks in pool_objects,
 * and units, unit_pages, unit_bytes and unit_saved say what units hold
 * and save.  The compressed-size histogram counts single pages only.
 *
 * Locks: slot lock -> unit lock -> pool (store_internal.h).  A unit's
 * lock guards live, refs and splitting; its other fields never change
 * while it lives, and it lives while a page's slot points to it or a
 * split holds a reference.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/tbuf.h"
#include "store/store_internal.h"

/* The estimate's buckets: the unit's compressed length over the bytes
 * it covers, in sixteenths. */
#define UNIT_EST_BUCKETS 16
/* Units measured both ways: the first few of a bucket, then one in this
 * many of the thread's units. */
#define UNIT_EST_WARM 4
#define UNIT_EST_EVERY 32
/* Halve a bucket's sums past this many unit bytes, so that it follows
 * the data (about 64 MiB of units). */
#define UNIT_EST_DECAY ((uint64_t)1 << 26)
/* After this many units in a row did not pay, a store tries units on
 * fewer groups: it skips 1, 2, 4 .. UNIT_SKIP_MAX groups between tries
 * (a group it skips is stored page by page at once), until one pays.
 * A unit that does not pay costs its compression twice, and data that
 * does not gain (compressed files, code under lz4) should not pay that
 * on every group. */
#define UNIT_DECLINES 4
#define UNIT_SKIP_MAX 16
/* A unit is split once at most 1 / UNIT_SPLIT_SHARE of the pages it
 * was formed with are left in it.  A split recompresses what is left
 * page by page: at a half, a page for every page rewritten, and at
 * most half the unit's bytes kept dead until then. */
#define UNIT_SPLIT_SHARE 2
/* Splits a thread may have asked for in one call; more are not asked. */
#define PENDING_MAX 8

_Static_assert(ZM_STORE_UNIT_MAX <= 16, "live and refs are 16 bits");

static uint64_t unit_gen;   /* atomic: the last generation given */

/* ---- the thread's buffers ------------------------------------------- */

struct unit_tls {
	uint64_t gen;        /* the unit in dec, 0: none */
	char *z, *dec;       /* compressed copy; decoded unit / scratch */
	size_t zcap, deccap;
	struct zm_store *split_store; /* the store whose call may split
				 (zmi_store_unit_begin .. zmi_store_unit_flush) */
	unsigned npending;
	struct zm_store *pending_store[PENDING_MAX];
	struct zmi_store_unit *pending[PENDING_MAX];
};

static __thread struct unit_tls tls;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_exit(void *unused)
{
	(void)unused;
	free(tls.z);
	free(tls.dec);
	memset(&tls, 0, sizeof(tls));
}

static void tls_key_init(void)
{
	pthread_key_create(&tls_key, tls_exit);
}

/* Grow the thread's buffers to zcap and deccap bytes.  0 or -ENOMEM. */
static int tls_reserve(size_t zcap, size_t deccap)
{
	char *p;

	pthread_once(&tls_once, tls_key_init);
	if (tls.zcap < zcap) {
		p = realloc(tls.z, zcap);
		if (!p)
			return -ENOMEM;
		tls.z = p, tls.zcap = zcap;
	}
	if (tls.deccap < deccap) {
		tls.gen = 0;
		p = realloc(tls.dec, deccap);
		if (!p)
			return -ENOMEM;
		tls.dec = p, tls.deccap = deccap;
	}
	pthread_setspecific(tls_key, &tls); /* non-NULL: the destructor runs */
	return 0;
}

/* ---- records ---------------------------------------------------------- */

void zmi_store_unit_lock(struct zmi_store_unit *u)
{
	while (__atomic_exchange_n(&u->lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&u->lock, __ATOMIC_RELAXED))
			zmi_cpu_relax();
}

void zmi_store_unit_unlock(struct zmi_store_unit *u)
{
	__atomic_store_n(&u->lock, 0, __ATOMIC_RELEASE);
}

#define unit_lock zmi_store_unit_lock
#define unit_unlock zmi_store_unit_unlock

static size_t unit_rec_size(unsigned nchunks)
{
	return sizeof(struct zmi_store_unit) + nchunks * sizeof(zm_handle_t);
}

#define chunk_len zmi_store_unit_chunk_len

/* A unit entering (sign 1) or leaving (-1) the store's counts: its bytes
 * in memory (compr_data_size, pool objects) or on file (bd_bytes; its
 * pages count in bd_count while it is there: writeback.c). */
static void unit_account(struct zm_store *s, const struct zmi_store_unit *u, int sign)
{
	struct zmi_store_stripe *st = zmi_store_thread_stripe(s);

	zmi_store_count(st, C_UNITS, sign);
	zmi_store_count(st, C_UNIT_BYTES, (int64_t)sign * u->len);
	if (u->file) {
		zmi_store_count(st, C_FILE_BYTES, (int64_t)sign * u->len);
	} else {
		zmi_store_count(st, C_COMPR, (int64_t)sign * u->len);
		zmi_store_count(st, C_OBJECTS, (int64_t)sign * u->nchunks);
	}
	zmi_store_count(st, C_UNIT_SAVED, (int64_t)sign * u->saved);
	zmi_store_count(st, C_UNIT_META, (int64_t)sign * (int64_t)unit_rec_size(u->nalloc));
}

/* Free a unit no page and no split refers to any more. */
static void unit_free(struct zm_store *s, struct zmi_store_unit *u)
{
	unit_account(s, u, -1);
	if (u->file) {
		/* a forked child's store leaves the parent's file be, and
		 * destroy leaves its holes */
		if (!s->destroying && zmi_store_has_file(s))
			for (unsigned c = 0; c < u->nchunks; c++)
				zmi_store_backing_free(s, u->base + c, u->chunk[c],
						       chunk_len(u->len, u->nchunks, c));
	} else {
		for (unsigned c = 0; c < u->nchunks; c++)
			if (zmi_unlikely(zm_pool_free(s->pool, u->chunk[c])))
				zmi_store_count(zmi_store_thread_stripe(s), C_POOL_ERRORS, 1);
	}
	free(u);
}

#define unit_put_ref zmi_store_unit_put_ref

/* Drop a reference (a page's or a split's); frees the unit at the last. */
void zmi_store_unit_put_ref(struct zm_store *s, struct zmi_store_unit *u)
{
	unsigned left;

	unit_lock(u);
	left = --u->refs;
	unit_unlock(u);
	if (!left)
		unit_free(s, u);
}

int zmi_store_unit_leave(struct zm_store *s, uint64_t index)
{
	struct zmi_store_unit *u = zmi_store_slot_unit(s, index);
	unsigned k = (unsigned)(index - u->base), left, live;
	bool split = false;

	unit_lock(u);
	u->live &= (uint16_t)~(1u << k);
	left = --u->refs;
	live = (unsigned)__builtin_popcount(u->live);
	if (u->file)
		zmi_store_count(zmi_store_thread_stripe(s), C_FILE, -1); /* a page on file less */
	/* a unit on file is not split (that would bring cold pages back
	 * into memory): its file space goes with its last page */
	if (live && !u->splitting && !u->file && live * UNIT_SPLIT_SHARE <= u->members && tls.split_store == s &&
	    tls.npending < PENDING_MAX) {
		u->splitting = true;   /* once: the split takes what is left */
		u->refs++;
		left++;
		split = true;
	}
	unit_unlock(u);
	if (split) {
		tls.pending_store[tls.npending] = s;
		tls.pending[tls.npending++] = u;
	} else if (!left) {
		unit_free(s, u);
	}
	return 0;
}

int zmi_store_unit_fetch(struct zm_store *s, struct zmi_store_unit *u, char *buf, uint32_t *len,
			 bool *sec)
{
	uint64_t off[ZM_STORE_UNIT_MAX];
	unsigned nch;
	uint32_t at = 0;
	int rc = 0;

	unit_lock(u);
	*len = u->len;
	*sec = u->sec;
	nch = u->nchunks;
	if (u->file) {
		/* the offsets stay the unit's while it lives (the caller's
		 * reference) and a reader reads them (readback waits for no
		 * readers): read with no lock held */
		for (unsigned c = 0; c < nch; c++)
			off[c] = u->chunk[c];
		u->readers++;
		unit_unlock(u);
		rc = zmi_store_has_file(s) ? 0 : -EIO; /* a forked child: the parent's file */
		for (unsigned c = 0; c < nch && !rc; c++) {
			uint32_t n = chunk_len(*len, nch, c);

			rc = zmi_store_backing_read(s, u->base + c, off[c], buf + at, n) ? -EIO : 0;
			at += n;
		}
		unit_lock(u);
		u->readers--;
		unit_unlock(u);
		if (!rc)
			zmi_store_count(zmi_store_thread_stripe(s), C_BD_READS, 1);
		return rc;
	}
	for (unsigned c = 0; c < nch && !rc; c++) {
		uint32_t n = chunk_len(*len, nch, c);

		rc = zm_pool_read(s->pool, u->chunk[c], buf + at, n) ? -EIO : 0;
		at += n;
	}
	unit_unlock(u);
	return rc;
}

/* With readback: bring unit u (a reference held), whose len bytes a get
 * just read from the file into buf, back into the pool, if the limit
 * allows and the pool has room, and no other get is reading it from the
 * file (its file space is then freed).  Else it stays on file. */
static void unit_readback(struct zm_store *s, struct zmi_store_unit *u, const char *buf,
			  uint32_t len)
{
	struct zmi_store_stripe *st;
	size_t ps = s->page_size;
	unsigned nch = (unsigned)((len + ps - 1) / ps), pages;
	zm_handle_t h[ZM_STORE_UNIT_MAX];
	uint64_t off[ZM_STORE_UNIT_MAX];
	uint32_t at = 0;

	if (!s->readback || zmi_store_limit_check(s, len))
		return;
	for (unsigned c = 0; c < nch; c++) {
		uint32_t n = chunk_len(len, nch, c);

		h[c] = zm_pool_alloc(s->pool, n);
		if (!h[c] || zm_pool_write(s->pool, h[c], buf + at, n)) {
			for (unsigned d = 0; d <= c; d++)
				if (h[d])
					zm_pool_free(s->pool, h[d]);
			return;
		}
		at += n;
	}
	unit_lock(u);
	/* a unit most of whose pages have left would be split in memory:
	 * it stays on file, which its last page frees */
	if (!u->file || u->readers || u->moving || !u->live || u->len != len ||
	    u->nchunks != nch ||
	    (unsigned)__builtin_popcount(u->live) * UNIT_SPLIT_SHARE <= u->members) {
		unit_unlock(u);
		for (unsigned c = 0; c < nch; c++)
			zm_pool_free(s->pool, h[c]);
		return;
	}
	for (unsigned c = 0; c < nch; c++) {
		off[c] = u->chunk[c];
		u->chunk[c] = h[c];
	}
	__atomic_store_n(&u->file, false, __ATOMIC_RELAXED);   /* zmi_store_pick peeks */
	pages = (unsigned)__builtin_popcount(u->live);
	st = zmi_store_thread_stripe(s);
	zmi_store_count(st, C_FILE, -(int64_t)pages); /* under its lock, as leaves */
	unit_unlock(u);
	zmi_store_count(st, C_FILE_BYTES, -(int64_t)len);
	zmi_store_count(st, C_COMPR, len);
	zmi_store_count(st, C_OBJECTS, nch);
	/* no reader has the offsets: a new one finds the unit in memory */
	for (unsigned c = 0; c < nch; c++)
		zmi_store_backing_free(s, u->base + c, off[c], chunk_len(len, nch, c));
}

/* Decode len bytes (in tls.z) of a unit of span pages, encoded with the
 * secondary codec if sec, into tls.dec, which then caches it as gen.
 * Takes the unit's fields, not the unit: a get decodes after it let go
 * of its page, and the unit may be gone by then. */
static int unit_decode(struct zm_store *s, uint32_t len, unsigned span, bool sec, uint64_t gen)
{
	int rc;

	tls.gen = 0;
	rc = zm_codec_decompress(sec ? s->codec2 : s->codec, tls.z, len, tls.dec,
				 (size_t)span * s->page_size);
	if (zmi_unlikely(rc))
		return rc == -ENOMEM ? -ENOMEM : -EIO;
	tls.gen = gen;
	return 0;
}

int zmi_store_unit_get(struct zm_store *s, uint64_t index, uint32_t info, void *buf)
{
	struct zmi_store_unit *u = zmi_store_slot_unit(s, index);
	size_t ps = s->page_size, k = (size_t)(index - u->base);
	uint64_t gen = u->gen;
	unsigned span = u->span;
	uint32_t len;    /* copied with the bytes, under the unit's lock: a
			    recompression changes them (recompress.c) */
	bool sec, file;
	int rc;

	if (tls.gen == gen) {
		/* the thread's last unit: its bytes never change */
		memcpy(buf, tls.dec + k * ps, ps);
		zmi_store_slot_unlock(s, index, info, info & ~SLOT_IDLE);
		return 0;
	}
	/* span, not len: a recompression changes len under the unit's lock
	 * only, and a unit is never longer than its span's pages */
	if (zmi_unlikely(tls.zcap < (size_t)span * ps || tls.deccap < (size_t)span * ps)) {
		/* no allocation under a slot lock: grow, and the caller
		 * starts over (the unit may be gone by then) */
		zmi_store_slot_unlock(s, index, info, info);
		rc = tls_reserve((size_t)s->unit_pages * ps, (size_t)s->unit_pages * ps);
		return rc ? rc : -EAGAIN;
	}
	unit_lock(u);
	file = u->file;
	if (file)
		u->refs++;   /* pinned: its bytes on file stay while it is read */
	unit_unlock(u);
	if (file) {
		/* no lock held across the read: a put or discard of the page
		 * meanwhile makes it leave the unit, whose bytes stay until
		 * the pin goes; the page read is its content as of the lock */
		zmi_store_slot_unlock(s, index, info, info & ~SLOT_IDLE);
		rc = zmi_store_unit_fetch(s, u, tls.z, &len, &sec);
		if (!rc)
			unit_readback(s, u, tls.z, len);
	} else {
		rc = zmi_store_unit_fetch(s, u, tls.z, &len, &sec);
		zmi_store_slot_unlock(s, index, info, info & ~SLOT_IDLE);
	}
	/* the bytes copied are the page's content as of the lock; the
	 * unit's span and base never change */
	if (!rc)
		rc = unit_decode(s, len, span, sec, gen);
	if (file)
		unit_put_ref(s, u);
	if (zmi_unlikely(rc))
		return rc;
	memcpy(buf, tls.dec + k * ps, ps);
	return 0;
}

int zmi_store_unit_chunks(struct zm_store *s, uint64_t index, zm_handle_t *h, unsigned max)
{
	struct zmi_store_unit *u;
	uint32_t info;
	int n = -ENOENT;

	if (!s || index >= s->nr_pages)
		return -EINVAL;
	info = zmi_store_slot_lock(s, index);
	if (slot_kind(info) == ZM_STORE_SLOT_UNIT) {
		u = zmi_store_slot_unit(s, index);
		unit_lock(u);
		n = u->file ? 0 : u->nchunks;   /* on file: no chunks in the pool */
		for (int c = 0; c < n && c < (int)max; c++)
			h[c] = u->chunk[c];
		unit_unlock(u);
	}
	zmi_store_slot_unlock(s, index, info, info);
	return n;
}

/* ---- splits ------------------------------------------------------------ */

/* Store the pages still in unit u alone (a split holds a reference). */
static void unit_split(struct zm_store *s, struct zmi_store_unit *u)
{
	struct zmi_store_stripe *st = zmi_store_thread_stripe(s);
	size_t ps = s->page_size;
	uint16_t live;
	uint32_t len;
	bool sec;

	unit_lock(u);
	live = u->live;
	unit_unlock(u);
	if (live && !tls_reserve((size_t)s->unit_pages * ps, (size_t)s->unit_pages * ps) &&
	    !zmi_store_unit_fetch(s, u, tls.z, &len, &sec) && !unit_decode(s, len, u->span, sec, u->gen)) {
		/* tls.dec is not touched by a put: the pages are copied from
		 * it one by one */
		for (unsigned k = 0; k < u->span; k++)
			if (live >> k & 1)
				(void)zmi_store_put_page(s, st, u->base + k, tls.dec + k * ps, u);
		zmi_store_count(st, C_UNIT_SPLITS, 1);
	}
	unit_put_ref(s, u);
}

void zmi_store_unit_begin(struct zm_store *s)
{
	tls.split_store = s;
}

void zmi_store_unit_flush(struct zm_store *s)
{
	/* a split's puts make pages leave this unit only (it asks for
	 * no second split), so the list does not grow while it runs */
	while (tls.npending) {
		unsigned i = --tls.npending;

		unit_split(tls.pending_store[i], tls.pending[i]);
	}
	tls.split_store = NULL;
	(void)s;
}

/* ---- put_range --------------------------------------------------------- */

/* What the members (mask) of a unit starting at in take alone: each page
 * compressed into the scratch buffer, or its raw size if it would be
 * stored raw. */
static uint64_t alone_bytes(struct zm_store *s, const char *in, uint32_t mask)
{
	size_t ps = s->page_size, cap = zmi_store_policy_cap(s);
	uint64_t sum = 0;

	tls.gen = 0;   /* tls.dec is the scratch */
	for (unsigned k = 0; mask >> k; k++) {
		int n;

		if (!(mask >> k & 1))
			continue;
		n = zm_codec_compress(s->codec, in + k * ps, ps, tls.dec, cap);
		sum += n > 0 && (size_t)n < s->huge_size ? (uint64_t)n : ps;
	}
	return sum;
}

/* Does a unit of zlen bytes over span pages, members of them (mask,
 * starting at in), pay?  Sets *alone to what they would take alone. */
static bool unit_pays(struct zm_store *s, const char *in, uint32_t mask, unsigned span,
		      size_t zlen, uint64_t *alone)
{
	size_t ps = s->page_size;
	uint64_t raw = (uint64_t)__builtin_popcount(mask) * ps;
	unsigned b = (unsigned)(zlen * UNIT_EST_BUCKETS / ((size_t)span * ps));
	uint64_t *est = s->unit_est[b < UNIT_EST_BUCKETS ? b : UNIT_EST_BUCKETS - 1];
	uint64_t eu = __atomic_load_n(&est[0], __ATOMIC_RELAXED);
	uint64_t ea = __atomic_load_n(&est[1], __ATOMIC_RELAXED);

	if (eu < UNIT_EST_WARM * ps || __atomic_add_fetch(&s->unit_count, 1, __ATOMIC_RELAXED) % UNIT_EST_EVERY == 0) {
		*alone = alone_bytes(s, in, mask);
		if (__atomic_add_fetch(&est[0], zlen, __ATOMIC_RELAXED) > UNIT_EST_DECAY) {
			/* racy halving: the sums are an estimate */
			__atomic_store_n(&est[0], (eu + zlen) / 2, __ATOMIC_RELAXED);
			__atomic_store_n(&est[1], (ea + *alone) / 2, __ATOMIC_RELAXED);
		} else {
			__atomic_add_fetch(&est[1], *alone, __ATOMIC_RELAXED);
		}
	} else {
		*alone = (uint64_t)((double)zlen * (double)ea / (double)eu);
	}
	if (*alone > raw)
		*alone = raw;
	return (uint64_t)zlen * 100 <= *alone * (100 - s->unit_min_saving);
}

void (*zmi_store_unit_join_hook)(struct zm_store *s, uint64_t index);

struct zmi_store_unit *zmi_store_unit_make(struct zm_store *s, uint64_t base,
					   unsigned span, uint32_t mask, const char *buf,
					   size_t zlen, uint64_t saved, bool sec)
{
	size_t ps = s->page_size;
	unsigned nch = (unsigned)((zlen + ps - 1) / ps);
	struct zmi_store_unit *u;
	uint32_t off = 0;

	u = malloc(unit_rec_size(nch));
	if (!u)
		return NULL;
	for (unsigned c = 0; c < nch; c++) {
		uint32_t n = chunk_len((uint32_t)zlen, nch, c);

		u->chunk[c] = zm_pool_alloc(s->pool, n);
		if (!u->chunk[c] || zm_pool_write(s->pool, u->chunk[c], buf + off, n)) {
			for (unsigned d = 0; d <= c; d++)
				if (u->chunk[d])
					zm_pool_free(s->pool, u->chunk[d]);
			free(u);
			return NULL;
		}
		off += n;
	}
	u->gen = __atomic_add_fetch(&unit_gen, 1, __ATOMIC_RELAXED);
	u->base = base;
	u->lock = 0;
	u->len = (uint32_t)zlen;
	u->saved = (uint32_t)saved;
	u->live = (uint16_t)mask;
	u->refs = (uint16_t)(__builtin_popcount(mask) + 1);
	u->span = (uint8_t)span;
	u->members = (uint8_t)__builtin_popcount(mask);
	u->nchunks = (uint8_t)nch;
	u->nalloc = (uint8_t)nch;
	u->sec = sec;
	u->splitting = false;
	u->file = false;
	/* forming: its pages join one by one, and until they all have, it
	 * holds pages that are not in it (and may never be: rewritten
	 * meanwhile).  No writeback or recompression may take it before
	 * (zmi_store_unit_take): it would count those pages as its own.  The
	 * caller's zmi_store_unit_give ends it. */
	u->moving = true;
	u->readers = 0;
	unit_account(s, u, 1);
	zmi_store_count(zmi_store_thread_stripe(s), C_UNITS_FORMED, 1);
	return u;
}

/* Keep zlen bytes (in buf) as unit of span pages from base, whose members
 * are mask; their slots are swapped one by one.  0, -ENOSPC or -ENOMEM
 * (nothing stored: the caller stores the pages alone), or -EIO (a page
 * whose old object the pool would not free keeps it). */
static int unit_store(struct zm_store *s, struct zmi_store_stripe *st, uint64_t base,
		      unsigned span, uint32_t mask, const char *buf, size_t zlen, uint64_t alone)
{
	unsigned members = 0;
	struct zmi_store_unit *u;
	int rc = 0;

	if (zmi_store_limit_check(s, zlen))
		return -ENOSPC;
	/* u has a reference per member: each page either joins or drops
	 * its reference; and one more so that u outlives the loop */
	u = zmi_store_unit_make(s, base, span, mask, buf, zlen, alone - zlen, false);
	if (!u)
		return -ENOMEM;
	for (unsigned k = 0; k < span; k++) {
		uint64_t j = base + k;
		uint32_t old, old_len;

		if (!(mask >> k & 1))
			continue;
		zmi_lazy_mark(&s->slot_arr, j);
		zmi_lazy_mark(&s->same_arr, j);
		old = zmi_store_slot_lock_ready(s, j);
		old_len = zmi_store_slot_len(s, j, old);
		if (zmi_unlikely(zmi_store_slot_free_object(s, j, old))) {
			zmi_store_slot_unlock(s, j, old, old);
			unit_lock(u);
			u->live &= (uint16_t)~(1u << k);
			u->refs--;
			unit_unlock(u);
			rc = -EIO;
			continue;
		}
		s->same_val[j] = (uint64_t)(uintptr_t)u;
		zmi_store_slot_unlock(s, j, old, SLOT_INFO_UNIT);
		zmi_store_account(s, st, SLOT_INFO_UNIT, 0, 1);
		zmi_store_slot_release(s, old, old_len);
		members++;
		zmi_store_unit_joined(s, j);
	}
	zmi_store_unit_give(s, u); /* formed */
	zmi_store_count(st, C_PUTS, members);
	return rc;
}

/* Store n pages (one aligned group or part of one) from index a. */
static int put_group(struct zm_store *s, struct zmi_store_stripe *st, uint64_t a, unsigned n,
		     const char *src)
{
	size_t ps = s->page_size, cap, zlen;
	unsigned first, last, span, members;
	uint32_t mask = 0;
	uint64_t word, alone;
	char *zbuf;
	int rc, z;

	for (unsigned k = 0; k < n; k++)
		if (!s->same_filled || !zmi_store_page_same_filled(src + k * ps, ps, &word))
			mask |= 1u << k;
	members = (unsigned)__builtin_popcount(mask);
	if (members < 2)
		goto alone;
	for (unsigned v = __atomic_load_n(&s->unit_skip, __ATOMIC_RELAXED); v;)
		if (__atomic_compare_exchange_n(&s->unit_skip, &v, v - 1, true, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			goto alone;   /* backing off (never below 0) */
	first = (unsigned)__builtin_ctz(mask);
	last = 31u - (unsigned)__builtin_clz(mask);
	span = last - first + 1;
	/* longer than this, it cannot pay even against raw pages */
	cap = (size_t)members * ps * (100 - s->unit_min_saving) / 100;
	zbuf = zmi_thread_buf((size_t)span * ps);
	if (!zbuf || tls_reserve((size_t)s->unit_pages * ps, (size_t)s->unit_pages * ps))
		goto alone;
	z = zm_codec_compress(s->codec, src + first * ps, (size_t)span * ps, zbuf, cap);
	if (z <= 0 || !unit_pays(s, src + first * ps, mask >> first, span, (size_t)z, &alone)) {
		zmi_store_count(st, C_UNITS_DECLINED, 1);
		unsigned nd = __atomic_add_fetch(&s->unit_declines, 1, __ATOMIC_RELAXED);

		if (nd >= UNIT_DECLINES) {
			unsigned d = nd - UNIT_DECLINES;

			__atomic_store_n(&s->unit_skip, d < 5 ? 1u << d : UNIT_SKIP_MAX,
					 __ATOMIC_RELAXED);
		}
		goto alone;
	}
	if (__atomic_load_n(&s->unit_declines, __ATOMIC_RELAXED))
		__atomic_store_n(&s->unit_declines, 0, __ATOMIC_RELAXED);
	zlen = (size_t)z;
	rc = unit_store(s, st, a + first, span, mask >> first, zbuf, zlen, alone);
	if (rc == -ENOSPC || rc == -ENOMEM)
		goto alone;    /* the pages alone may still fit, or reclaim */
	/* the same-filled pages beside the members */
	for (unsigned k = 0; k < n; k++) {
		if (mask >> k & 1)
			continue;
		z = zmi_store_put_page(s, st, a + k, src + k * ps, NULL);
		if (z && !rc)
			rc = z;
	}
	return rc;
alone:
	for (unsigned k = 0; k < n; k++) {
		rc = zmi_store_put_page(s, st, a + k, src + k * ps, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int zm_store_put_range(struct zm_store *s, uint64_t index, uint64_t count, const void *pages)
{
	struct zmi_store_stripe *st;
	const char *p = pages;
	uint64_t i = index, end;
	int rc = 0;

	if (zmi_unlikely(!s || (!pages && count) || index > s->nr_pages ||
			 count > s->nr_pages - index)) {
		zmi_bad_input("zm_store_put_range: no store or pages, or range %llu+%llu beyond it",
			     (unsigned long long)index, (unsigned long long)count);
		return -EINVAL;
	}
	st = zmi_store_thread_stripe(s);
	end = index + count;
	/* units need the codec's length alone to decide: not with zcache's
	 * size policies, which judge each page */
	if (s->unit_pages == 1 || s->max_zsize || s->max_mean_zsize) {
		for (; i < end && !rc; i++)
			rc = zmi_store_put_page(s, st, i, p + (i - index) * s->page_size, NULL);
		return rc;
	}
	zmi_store_unit_begin(s);
	while (i < end && !rc) {
		uint64_t next = (i / s->unit_pages + 1) * s->unit_pages;

		if (next > end)
			next = end;
		rc = put_group(s, st, i, (unsigned)(next - i), p + (i - index) * s->page_size);
		i = next;
	}
	zmi_store_unit_flush(s);
	return rc;
}
