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
 * Which blocks: zmi_store_backing_clean_threshold, from the blocks' live bytes,
 * the sparsest first until moving them would bring the blocks in use to
 * CLEAN_TARGET_PCT of the live bytes.  A run then works by block, not by
 * page:
 *
 *   1. a walk over the slots (no wb_lock) collects every record on file
 *      in such a block: pages' records, and the chunks of units on file;
 *      sorted by offset, a block's records lie together;
 *   2. from clean_hand (an offset in the file) on, a batch at a time:
 *      the records within WINDOW bytes of file.  Under wb_lock:
 *      a. each checked again: a page's slot still FILE, not BUSY, with
 *         the same record; a unit taken (its moving flag keeps a
 *         readback off its offsets, a reference keeps it alive) with the
 *         chunk where it was;
 *      b. read: each span of them whose blocks lie at most SPAN_GAP
 *         apart with one read of its whole blocks (a read a span, not a
 *         record: the file's blocks are not in the page cache);
 *      c. given room in the block being filled (zmi_store_backing_alloc), the
 *         one that fits its room best first, and written, each run end
 *         to end in the file with one write;
 *      d. swapped: a page whose slot still holds the record read points
 *         at the copy and its old room is freed (the last record out of
 *         a block punches it), else the copy's room is freed; a unit no
 *         get is reading (readers: those copied the old offsets) takes
 *         its chunks' new offsets, else keeps the old.
 *
 * Step d's test is enough because wb_lock is held from a to d: only a
 * writeback makes a slot FILE, so a record equal to the one checked is
 * the same page, and the bytes read in b are still its own (its room
 * was not freed, or if it was, by a put, a discard or a readback, the
 * slot no longer holds that record).  A BUSY slot is being read by a
 * get, at the old place: it is left for the next pass.
 *
 * wb_lock is let go between batches, so that a put reclaiming at the
 * limit waits for one batch at most.
 *
 * Automatic cleaning (file_clean_rate bytes a second, 0 = off): a work
 * item on the process's worker (base/worker.h; no thread of its own)
 * looks at the file every CLEAN_TICK_MS.  Once its blocks in use pass
 * CLEAN_TRIGGER_PCT of the live bytes (and waste at least
 * CLEAN_MIN_WASTE), it cleans, each tick moving what the time since the
 * last one allows at the rate (a second's worth at most: no burst after
 * a pause), until a run finds the file at CLEAN_TARGET_PCT (nothing to
 * move); then it waits for the trigger again.  A run that moved records
 * but freed no block (records that pack no better than they lay) makes
 * it wait CLEAN_BACKOFF_TICKS.
 *
 * Locks: wb_lock -> slot lock (one at a time) -> unit lock -> the file
 * space's lock (backing.c).  The item's state is its callback's alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/worker.h"
#include "store/store_internal.h"

/* Where a run stops: blocks in use at most this share of the live bytes
 * (the goal is 120%: the rest is headroom for the churn to come).  Not
 * lower: the blocks a run empties would be fuller, and each byte freed
 * would cost more bytes moved (docs/tiering.md). */
#define CLEAN_TARGET_PCT 115
/* Automatic cleaning starts once the blocks in use pass this share of
 * the live bytes: the goal itself, so that the file stays within it as
 * long as the rate keeps up with the churn. */
#define CLEAN_TRIGGER_PCT 120
/* ...and waste at least this many bytes: a small file's few dead blocks
 * are not worth a run's writes. */
#define CLEAN_MIN_WASTE (256u << 10)
/* The automatic cleaner's period, ms: a tenth of a second's rate a tick. */
#define CLEAN_TICK_MS 100
/* Ticks the automatic cleaner waits after a run that moved records but
 * freed no block: a second. */
#define CLEAN_BACKOFF_TICKS 10
/* The packed layout's block (backing.c's). */
#define CLEAN_BLOCK 4096u
/* A batch's records lie within this many bytes of file from the first's
 * block: what one hold of wb_lock reads (a put at the limit waits for
 * one batch at most) and what wb_buf takes once they are packed. */
#define WINDOW (256u << 10)
_Static_assert(WINDOW <= ZMI_WB_BATCH_BYTES, "a batch's records fit wb_buf");
/* ...and number at most this many. */
#define BATCH_RECS 256
/* Records whose blocks are at most this many blocks apart are read with
 * one read (the blocks between with them): a read costs more than the
 * few kilobytes it could skip. */
#define SPAN_GAP 2
/* The records a run looks at, at most (24 bytes each). */
#define CAND_MAX ((size_t)1 << 20)

/* The unit on file that page index is the first live page of, taken
 * (moving set, a reference held); NULL if none. */
static struct zmi_store_unit *take_file_unit(struct zm_store *s, uint64_t index)
{
	uint32_t info = zmi_store_slot_lock(s, index);
	struct zmi_store_unit *u = NULL;

	if (slot_is_unit(info)) {
		u = zmi_store_slot_unit(s, index);
		zmi_store_unit_lock(u);
		/* one visit a unit: its first page still in it */
		if (u->file && !u->moving && u->live &&
		    index == u->base + (uint64_t)__builtin_ctz(u->live)) {
			u->moving = true;
			u->refs++;
		} else {
			zmi_store_unit_unlock(u);
			u = NULL;
		}
		if (u)
			zmi_store_unit_unlock(u);
	}
	zmi_store_slot_unlock(s, index, info, info);
	return u;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A record to move, as the walk found it: a page's (chunk NO_CHUNK, rec
 * its same_val[] word), or chunk `chunk` of the unit whose first live
 * page is index (rec: the chunk's offset << FILE_OFF_SHIFT | its
 * length). */
#define NO_CHUNK UINT32_MAX

struct cand {
	uint64_t rec;
	uint64_t index;
	uint32_t chunk;
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static uint64_t cand_off(const struct cand *c)
{
	return file_off(c->rec);
}

static uint32_t cand_len(const struct cand *c)
{
	return (uint32_t)(c->rec & FILE_LEN_MASK);
}

static int cand_add(struct cands *cs, uint64_t rec, uint64_t index, uint32_t chunk)
{
	if (cs->n == cs->cap) {
		size_t cap = cs->cap ? cs->cap * 2 : 1024;
		struct cand *v = realloc(cs->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		cs->v = v;
		cs->cap = cap;
	}
	cs->v[cs->n++] = (struct cand){ .rec = rec, .index = index, .chunk = chunk };
	return 0;
}

static int cand_cmp(const void *a, const void *b)
{
	uint64_t x = cand_off(a), y = cand_off(b);

	return x < y ? -1 : x > y;
}

/* The chunks in sparse blocks of the unit on file whose first live page
 * is index (a UNIT slot), as candidates. */
static int collect_unit(struct zm_store *s, uint64_t index, uint32_t max_live,
			struct cands *cs)
{
	uint64_t off[ZM_STORE_UNIT_MAX];
	uint32_t info = zmi_store_slot_lock(s, index), len = 0;
	unsigned nch = 0;
	int rc = 0;

	if (slot_is_unit(info)) {
		struct zmi_store_unit *u = zmi_store_slot_unit(s, index);

		zmi_store_unit_lock(u);
		if (u->file && !u->moving && u->live &&
		    index == u->base + (uint64_t)__builtin_ctz(u->live)) {
			len = u->len;
			nch = u->nchunks;
			for (unsigned c = 0; c < nch; c++)
				off[c] = u->chunk[c];
		}
		zmi_store_unit_unlock(u);
	}
	zmi_store_slot_unlock(s, index, info, info);
	for (unsigned c = 0; c < nch && !rc; c++) {
		uint32_t n = zmi_store_unit_chunk_len(len, nch, c);

		if (zmi_store_backing_sparse(s, off[c], n, max_live))
			rc = cand_add(cs, off[c] << FILE_OFF_SHIFT | n, index, c);
	}
	return rc;
}

/* Every record on file in a block with fewer than max_live live bytes (not
 * the block being filled), up to CAND_MAX, from the slots: a block's
 * records all, so that reading the block once moves them all.  Sorted by
 * offset.  0 or -ENOMEM. */
static int collect(struct zm_store *s, uint32_t max_live, struct cands *cs)
{
	int rc = 0;

	cs->n = 0;
	for (uint64_t i = zmi_store_slot_next_touched(s, 0, s->nr_pages);
	     i < s->nr_pages && !rc && cs->n < CAND_MAX;
	     i = zmi_store_slot_next_touched(s, i + 1, s->nr_pages)) {
		/* a peek: the record is read under the lock */
		uint32_t info = word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED));
		uint64_t rec = 0;

		if (slot_is_unit(info)) {
			rc = collect_unit(s, i, max_live, cs);
			continue;
		}
		if (slot_kind(info) != ZM_STORE_SLOT_FILE)
			continue;
		info = zmi_store_slot_lock(s, i);
		if (slot_kind(info) == ZM_STORE_SLOT_FILE && !slot_busy(info))
			rec = s->same_val[i];
		zmi_store_slot_unlock(s, i, info, info);
		if (rec &&
		    zmi_store_backing_sparse(s, file_off(rec), rec & FILE_LEN_MASK, max_live))
			rc = cand_add(cs, rec, i, NO_CHUNK);
	}
	if (cs->n)
		qsort(cs->v, cs->n, sizeof(*cs->v), cand_cmp);
	return rc;
}

/* A batch: candidates lying within WINDOW bytes of file from the first's
 * block (base), read with one pread a span of them, moved together. */
struct bent {
	struct cand c;
	uint64_t fidx;          /* the page index the seam hears of */
	uint64_t to;            /* its new place; UINT64_MAX: none */
	struct zmi_store_unit *u; /* a unit's chunk: the unit, taken */
	uint32_t pos;           /* its bytes' place in wb_buf */
	bool ok;                /* still the slot's (or unit's), to move */
};

struct batch {
	struct bent e[BATCH_RECS];
	unsigned n;
	uint64_t base;          /* block-aligned: rbuf's first byte's offset */
	char *rbuf;             /* WINDOW bytes, block-aligned */
	struct zmi_store_unit *taken[BATCH_RECS];
	uint64_t taken_at[BATCH_RECS];  /* the page each was taken by (its
					   live pages may all leave while it
					   is held: they say nothing then) */
	unsigned ntaken;
	uint32_t room;          /* left in the block being filled, as the
				   last record placed left it */
};

/* Is candidate e still what it was when collected?  A page: its slot
 * FILE, not BUSY, with the same record.  A unit's chunk: the unit taken
 * (once a batch) and the chunk where it was. */
static bool batch_check(struct zm_store *s, struct batch *b, struct bent *e)
{
	uint32_t info;
	bool ok;

	if (e->c.chunk == NO_CHUNK) {
		info = zmi_store_slot_lock(s, e->c.index);
		ok = slot_kind(info) == ZM_STORE_SLOT_FILE && !slot_busy(info) &&
		     s->same_val[e->c.index] == e->c.rec;
		zmi_store_slot_unlock(s, e->c.index, info, info);
		e->fidx = e->c.index;
		return ok;
	}
	for (unsigned k = 0; k < b->ntaken && !e->u; k++)
		if (b->taken_at[k] == e->c.index)
			e->u = b->taken[k];
	if (!e->u) {
		e->u = take_file_unit(s, e->c.index);
		if (!e->u)
			return false;
		b->taken_at[b->ntaken] = e->c.index;
		b->taken[b->ntaken++] = e->u;
	}
	/* the same chunk, not one of another unit that took its place: its
	 * length is what its room is freed by */
	zmi_store_unit_lock(e->u);
	ok = e->u->file && e->c.chunk < e->u->nchunks &&
	     e->u->chunk[e->c.chunk] == cand_off(&e->c) &&
	     zmi_store_unit_chunk_len(e->u->len, e->u->nchunks, e->c.chunk) == cand_len(&e->c);
	zmi_store_unit_unlock(e->u);
	e->fidx = e->u->base + e->c.chunk;
	return ok;
}

/* Read the batch's checked records into rbuf: each span of them whose
 * blocks are at most SPAN_GAP apart with one read of its whole blocks (on
 * an NBD export, blocks that share records only: a block between
 * may hold what a restart lost).  A span whose read failed is dropped;
 * its error in *err. */
static void batch_read(struct zm_store *s, struct batch *b, int *err)
{
	uint64_t idx[BATCH_RECS];
	unsigned gap = s->nbd ? 0 : SPAN_GAP;

	for (unsigned k = 0, e; k < b->n; k = e) {
		uint64_t lo, hi;
		unsigned ni = 0;
		int rc;

		if (!b->e[k].ok) {
			e = k + 1;
			continue;
		}
		lo = cand_off(&b->e[k].c) / CLEAN_BLOCK;
		hi = (cand_off(&b->e[k].c) + cand_len(&b->e[k].c) - 1) / CLEAN_BLOCK;
		idx[ni++] = b->e[k].fidx;
		for (e = k + 1; e < b->n; e++) {
			const struct bent *x = &b->e[e];

			if (!x->ok)
				continue;
			if (cand_off(&x->c) / CLEAN_BLOCK > hi + gap)
				break;
			hi = (cand_off(&x->c) + cand_len(&x->c) - 1) / CLEAN_BLOCK;
			idx[ni++] = x->fidx;
		}
		rc = zmi_store_backing_read_span(s, idx, ni, lo * CLEAN_BLOCK,
						 b->rbuf + (lo * CLEAN_BLOCK - b->base),
						 (hi - lo + 1) * CLEAN_BLOCK);
		if (rc) {
			*err = rc;
			for (unsigned j = k; j < e; j++)
				b->e[j].ok = false;
		}
	}
}

/* Give each read record room (the block being filled, packed end to end)
 * and write them, each run lying end to end with one write.  A record
 * without room or whose write failed is dropped (its room given back);
 * the error in *err. */
static void batch_write(struct zm_store *s, struct batch *b, int *err)
{
	struct bent *p[BATCH_RECS], *q[BATCH_RECS];
	unsigned np = 0, nq = 0;
	uint32_t used = 0, room = b->room;

	for (unsigned k = 0; k < b->n; k++) {
		b->e[k].to = UINT64_MAX;
		if (b->e[k].ok)
			q[nq++] = &b->e[k];
	}
	while (nq) {
		struct bent *e;
		uint32_t len;
		unsigned best = 0;
		int rc;

		/* the longest that fits the block being filled's room, else
		 * the longest (it runs on, or starts a block): records of
		 * half a block and more would otherwise get a block each */
		for (unsigned j = 1; j < nq; j++) {
			uint32_t lj = cand_len(&q[j]->c), lb = cand_len(&q[best]->c);

			if ((lj <= room && (lb > room || lj > lb)) || (lb > room && lj > lb))
				best = j;
		}
		e = q[best];
		q[best] = q[--nq];
		len = cand_len(&e->c);
		rc = *err == -ENOSPC ? -ENOSPC : zmi_store_backing_alloc(s, e->fidx, len, &e->to);
		if (!rc)
			rc = zmi_store_backing_write_fault(e->fidx);
		if (rc) {
			if (e->to != UINT64_MAX)
				zmi_store_backing_free(s, e->fidx, e->to, len);
			e->to = UINT64_MAX;
			e->ok = false;
			*err = rc;
			continue;
		}
		e->pos = used;
		memcpy(s->wb_buf + used, b->rbuf + (cand_off(&e->c) - b->base), len);
		used += len;
		p[np++] = e;
		room = CLEAN_BLOCK - 1 - (uint32_t)((e->to + len - 1) % CLEAN_BLOCK);
	}
	b->room = room;
	for (unsigned k = 0, e; k < np; k = e) {
		uint64_t end = p[k]->to + cand_len(&p[k]->c);
		int rc;

		/* wb_buf holds them end to end too */
		for (e = k + 1; e < np && p[e]->to == end; e++)
			end += cand_len(&p[e]->c);
		rc = zmi_store_backing_write_run(s, p[k]->to, s->wb_buf + p[k]->pos,
						 end - p[k]->to);
		if (!rc)
			continue;
		*err = rc;
		for (unsigned j = k; j < e; j++) {
			zmi_store_backing_free(s, p[j]->fidx, p[j]->to, cand_len(&p[j]->c));
			p[j]->to = UINT64_MAX;
			p[j]->ok = false;
		}
	}
}

/* Point each written page at its new place if its slot still holds the
 * record read (else its new place goes back): wb_lock, held since the
 * check, keeps any writeback from making a slot FILE meanwhile, so an
 * equal record is the page whose bytes were read.  The bytes moved. */
static uint64_t swap_pages(struct zm_store *s, struct batch *b)
{
	uint64_t moved = 0;

	/* last first: the blocks this empties go on the free list highest
	 * first, so that the next batch takes the lowest and runs on into
	 * the ones after it, packed across their ends */
	for (unsigned k = b->n; k-- > 0;) {
		struct bent *e = &b->e[k];
		uint64_t i = e->c.index, rec = e->c.rec;
		uint32_t len = cand_len(&e->c), now;

		if (!e->ok || e->c.chunk != NO_CHUNK)
			continue;
		now = zmi_store_slot_lock(s, i);
		if (slot_kind(now) != ZM_STORE_SLOT_FILE || slot_busy(now) || s->same_val[i] != rec) {
			/* put, discarded or read back meanwhile (or being
			 * read: left for the next pass) */
			zmi_store_slot_unlock(s, i, now, now);
			zmi_store_backing_free(s, i, e->to, len);
			continue;
		}
		s->same_val[i] = (rec & ((1ull << FILE_OFF_SHIFT) - 1)) | e->to << FILE_OFF_SHIFT;
		zmi_store_backing_free(s, i, file_off(rec), len);
		zmi_store_slot_unlock(s, i, now, now);
		moved += len;
	}
	return moved;
}

/* The same for the units' chunks: a unit that no get reads (readers: they
 * copied the old offsets) takes its chunks' new places, the old go back;
 * else the new go back and it waits for the next pass.  Each unit given
 * back.  The bytes moved. */
static uint64_t swap_units(struct zm_store *s, struct batch *b)
{
	uint64_t moved = 0;

	for (unsigned t = 0; t < b->ntaken; t++) {
		struct zmi_store_unit *u = b->taken[t];
		bool take;

		zmi_store_unit_lock(u);
		take = !u->readers;
		for (unsigned k = 0; k < b->n && take; k++)
			if (b->e[k].u == u && b->e[k].ok)
				u->chunk[b->e[k].c.chunk] = b->e[k].to;
		zmi_store_unit_unlock(u);
		/* a get from now on copies the new offsets */
		for (unsigned k = 0; k < b->n; k++) {
			struct bent *e = &b->e[k];
			uint32_t len = cand_len(&e->c);

			if (e->u != u || !e->ok)
				continue;
			zmi_store_backing_free(s, e->fidx, take ? cand_off(&e->c) : e->to, len);
			if (take)
				moved += len;
		}
		zmi_store_unit_give(s, u);
	}
	return moved;
}

/* Move the batch's records: checked, read, written anew, swapped.  The
 * bytes moved; the first error met in *err.  wb_lock held throughout. */
static uint64_t batch_move(struct zm_store *s, struct batch *b, int *err)
{
	uint64_t moved;

	b->ntaken = 0;
	for (unsigned k = 0; k < b->n; k++) {
		b->e[k].u = NULL;
		b->e[k].ok = batch_check(s, b, &b->e[k]);
	}
	batch_read(s, b, err);
	batch_write(s, b, err);
	moved = swap_pages(s, b) + swap_units(s, b);
	b->n = 0;
	return moved;
}

/* One run of the cleaner: up to max_bytes moved (0: no bound), each
 * record in a sparse block once at most, in file order from clean_hand
 * (an offset), a batch at a time with wb_lock held for each only; stops
 * early once w (if not NULL) is stopping.  Adds the bytes moved to
 * *moved; 0 or the first error when nothing moved. */
static long clean_run(struct zm_store *s, uint64_t max_bytes, const struct zmi_work *w,
		      uint64_t *moved_out, uint64_t *freed_out)
{
	struct cands cs = { 0 };
	struct batch *b = NULL;
	uint64_t moved = 0, freed = 0, held0, held1, live;
	uint32_t max_live;
	size_t k = 0, seen = 0;
	int err = 0;

	if (!max_bytes)
		max_bytes = UINT64_MAX;
	pthread_mutex_lock(&s->wb_lock);
	max_live = zmi_store_backing_clean_threshold(s, CLEAN_TARGET_PCT);
	pthread_mutex_unlock(&s->wb_lock);
	if (!max_live)
		return 0;
	/* the walk holds no wb_lock: each batch checks its records again */
	err = collect(s, max_live, &cs);
	b = calloc(1, sizeof(*b));
	if (b && posix_memalign((void **)&b->rbuf, CLEAN_BLOCK, WINDOW))
		b->rbuf = NULL;
	if (!b || !b->rbuf) {
		err = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&s->wb_lock);
	/* from the hand on, round the file once */
	while (k < cs.n && cand_off(&cs.v[k]) < s->clean_hand)
		k++;
	if (k == cs.n)
		k = 0;
	while (seen < cs.n && moved < max_bytes && !err) {
		uint64_t bytes = 0;

		b->base = cand_off(&cs.v[k]) / CLEAN_BLOCK * CLEAN_BLOCK;
		while (seen < cs.n && b->n < BATCH_RECS && moved + bytes < max_bytes) {
			const struct cand *c = &cs.v[k];

			if (cand_off(c) < b->base ||
			    cand_off(c) + cand_len(c) > b->base + WINDOW)
				break;   /* beyond the window, or wrapped round */
			b->e[b->n++].c = *c;
			bytes += cand_len(c);
			k = k + 1 < cs.n ? k + 1 : 0;
			seen++;
		}
		s->clean_hand = b->e[b->n - 1].c.rec >> FILE_OFF_SHIFT;
		s->clean_hand += b->e[b->n - 1].c.rec & FILE_LEN_MASK;
		zmi_store_backing_usage(s, &held0, &live);
		bytes = batch_move(s, b, &err);
		zmi_store_backing_usage(s, &held1, &live);
		if (held1 < held0)
			freed += held0 - held1;
		if (bytes) {
			/* counted as it goes: a long run shows its progress */
			zmi_store_count(zmi_store_thread_stripe(s), C_CLEAN_BYTES, (int64_t)bytes);
			moved += bytes;
		}
		/* a put at the limit waits for one batch at most */
		pthread_mutex_unlock(&s->wb_lock);
		if (w && zmi_worker_stopping(w)) {
			pthread_mutex_lock(&s->wb_lock);
			break;
		}
		pthread_mutex_lock(&s->wb_lock);
	}
	if (seen == cs.n)
		s->clean_hand = 0;   /* round the file: the next run starts over */
	/* the records moved leave the page cache: once a run (a writeback
	 * meanwhile flushes them with its own), not a batch, so that a
	 * batch's hold of wb_lock waits for no disk write */
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
out:
	if (b)
		free(b->rbuf);
	free(b);
	free(cs.v);
	if (moved)
		zmi_store_count(zmi_store_thread_stripe(s), C_CLEAN_RUNS, 1);
	*moved_out += moved;
	*freed_out += freed;
	return err && !moved ? err : 0;
}

long zm_store_compact_file(struct zm_store *s, uint64_t max_bytes)
{
	uint64_t held0, held1, live, moved = 0, freed = 0;
	long err;

	if (!s) {
		zmi_bad_input("zm_store_compact_file: no store");
		return -EINVAL;
	}
	if (!zmi_store_has_file(s))
		return -EOPNOTSUPP;
	if (!zmi_store_backing_packed(s))
		return 0;   /* pages at their index's offset: no dead space */
	zmi_store_backing_usage(s, &held0, &live);
	err = clean_run(s, max_bytes, NULL, &moved, &freed);
	zmi_store_backing_usage(s, &held1, &live);
	if (held1 < held0)
		return (long)(held0 - held1);
	return err;
}

/* ---- automatic cleaning ------------------------------------------------ */

struct zmi_store_cleaner {
	struct zmi_work work;
	struct zm_store *s;
	uint64_t rate;        /* bytes a second */
	uint64_t last_ns;
	int64_t credit;       /* bytes the rate allows now (a run may
				 overdraw it by a page) */
	bool active;          /* past the trigger, not yet at the target */
	unsigned backoff;     /* ticks to wait: the last run freed nothing */
};


/* Is the file past the trigger?  held and live as zmi_store_backing_usage. */
static bool over_trigger(uint64_t held, uint64_t live)
{
	return held > live + CLEAN_MIN_WASTE &&
	       held / CLEAN_TRIGGER_PCT > live / 100;
}

static void clean_tick(void *arg)
{
	struct zmi_store_cleaner *c = arg;
	struct zm_store *s = c->s;
	uint64_t now = now_ns(), held, live, moved = 0, freed = 0, dt;

	dt = now - c->last_ns;
	c->last_ns = now;
	if (dt > 1000000000ull)
		dt = 1000000000ull;
	c->credit += (int64_t)(dt * c->rate / 1000000000ull);
	if (c->credit > (int64_t)c->rate)
		c->credit = (int64_t)c->rate;   /* no burst beyond a second's */
	if (!zmi_store_has_file(s))
		return;   /* a forked child's store: the file is the parent's */
	if (c->backoff) {
		c->backoff--;
		c->credit = 0;
		return;
	}
	if (!c->active) {
		/* no credit saved up while there was nothing to do: the
		 * rate bounds a run from its first tick */
		c->credit = 0;
		zmi_store_backing_usage(s, &held, &live);
		if (!over_trigger(held, live))
			return;
		c->active = true;
		c->credit = (int64_t)(dt * c->rate / 1000000000ull);
	}
	if (c->credit <= 0 || zmi_worker_stopping(&c->work))
		return;
	(void)clean_run(s, (uint64_t)c->credit, &c->work, &moved, &freed);
	c->credit -= (int64_t)moved;
	/* nothing to move: at the target (or what is left is being read) */
	if (!moved)
		c->active = false;
	/* moves that free nothing (records that pack no better than they
	 * lie): waiting beats moving them round and round */
	if (moved && !freed) {
		c->active = false;
		c->backoff = CLEAN_BACKOFF_TICKS;
	}
}

int zmi_store_clean_start(struct zm_store *s, uint64_t rate)
{
	struct zmi_store_cleaner *c;
	int rc;

	if (!rate || !zmi_store_has_file(s) || !zmi_store_backing_packed(s))
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

void zmi_store_clean_stop(struct zm_store *s)
{
	if (!s->cleaner)
		return;
	zmi_worker_del(&s->cleaner->work);
	free(s->cleaner);
	s->cleaner = NULL;
}
