/*
 * Writeback: pages leave the pool for the backing file (backing.c), by
 * request (zm_store_writeback, zram's writeback) or when a put finds the
 * memory limit reached (zmi_store_reclaim, zswap's way), and come back through
 * gets.
 *
 * A batch of pages at a time (up to BATCH_PAGES, ZMI_WB_BATCH_BYTES of
 * them), never holding a slot lock across the write:
 *
 *   1. for each page: lock; if it is one `which` takes, copy its object
 *      (as it is in the pool: compressed, or raw) into wb_buf after the
 *      batch's others; unlock; find it room in the file
 *      (zmi_store_backing_alloc: the packed layout gives pages taken one after
 *      another places end to end, mostly);
 *   2. write each run of the batch's pages lying end to end in the file
 *      with one system call (zram's batched writeback: the cost of a
 *      write is mostly the call's, not the bytes'); a page whose run
 *      failed (the file full, an I/O error) stays in the pool, counted
 *      in writeback_failures, and its range is punched back to a hole;
 *   3. for each page written: lock; if the slot still holds what was
 *      copied (zmi_store_slot_unchanged), free the object, record the page as
 *      on file (its length, codec, raw or not, in same_val[]), unlock;
 *      else unlock and punch the range (the page changed meanwhile: it
 *      stays, as it now is, in the pool).
 *
 * A unit's page ends the batch before it: the unit is written by itself,
 * a write a chunk (writeback_unit).
 *
 * Only a writeback makes a slot FILE, and one runs at a time (wb_lock), so
 * no two writes of one index's range ever race; a FILE slot's range is
 * punched under that slot's lock when it stops being FILE (put, discard,
 * readback), which a later writeback of the index waits for.
 *
 * The writer.  A store with a backing file has a writer thread (started
 * on first need, joined at destroy): once the objects pass
 * ZMI_WRITER_HIGH (limit - limit/16; zmi_store_limit_check kicks it) it writes
 * back, as reclaim below picks, until a page fits below ZMI_WRITER_LOW
 * (limit - limit/8), in chunks of WRITER_FLUSH_BATCHES batches under
 * wb_lock, each chunk dropped from the page cache before wb_lock goes.
 * A put that finds the objects at the limit waits on the writer's `room`
 * (reclaim_wait) only until its own object fits: the writer wakes the
 * waiters after each batch is settled, before the chunk's drop waits
 * for the disk.  A round that cannot make room (the file full, its
 * limit spent, nothing to write, or stopping) ends; the puts waiting
 * since before it began get -ENOSPC (a round begun earlier may have
 * failed on what has changed since: it answers no one).  destroy stops
 * the writer and waits for the waiters to leave.  fork: a hook (the
 * first of the library's, from a constructor) waits for each writer to
 * leave its chunk and holds its lock across fork; the child's writers
 * have no thread and never get one (the child's store has no file).
 * The pool's pages full while the objects are not (pool_full): the put
 * asks the writer for a batch of room (pool_want: what reclaim_sync
 * would free) and waits until a round has freed that many bytes since
 * it took the ask, or ended (all it could), and shrunk the pool
 * (compaction turns the freed room into whole pages; the pages the
 * writer's frees left in its thread's cache go back first,
 * zm_pool_shrink), answered before the chunk's drop waits for the disk;
 * it then gives back its own thread's cached pages and tries again.
 * Waiting only until the objects fit would not do: they already fit,
 * the put would try again at once, and fail.  Nor failing the ask of a
 * round that freed nothing since taking it: a put refused while the
 * round's earlier batches were under way asks once they have emptied
 * the pool (at a limit of a batch or two), and its room is in the pages
 * they freed.
 * A store made with writeback_sync, or one whose thread could not
 * start: the put reclaims itself (reclaim_sync).
 *
 * Reclaim by the put.  reclaim_sync writes back, from a clock
 * hand going round the slots:
 *
 *   a. idle pages (marked by zm_store_mark_idle or a mark of the
 *      automatic tiering, not accessed since);
 *   b. if a whole round found too few: a mark of every page (idle.c),
 *      then the pages that mark found idle; those accessed while it ran
 *      are spared;
 *   c. then any page;
 *
 * until the objects are RECLAIM_SLACK below the limit (a batch, so that
 * the next puts find room without reclaiming each), then compacts the
 * pool if its pages were what was full.  -ENOSPC only when the file is
 * full, its limit is spent, or nothing is left to write back.
 *
 * Reading a page on file (zmi_store_file_get): the slot is marked BUSY and
 * unlocked for the read and the decompression, so that no spinning lock
 * is held across a system call that can block; the gets, puts and
 * discards of that page wait asleep (zmi_store_slot_lock_ready).  With
 * readback, the object is made while BUSY and bound once locked again.
 *
 * Reading many pages on file (zm_store_get_range): the range's pages are
 * locked one at a time in index order; each on file is marked BUSY and
 * unlocked, its record kept (up to RANGE_PAGES of them), each other page
 * is read as a get reads it.  Then the records, sorted by offset, are
 * read a run of nearby blocks at a time (zmi_store_backing_read_run, no lock
 * held), each page decoded, settled as zmi_store_file_get's (readback, BUSY
 * cleared under its slot lock) and the waiters woken after each run.  A
 * thread holding BUSY slots waits only for slots after them (a range is
 * taken in index order, and every other holder of a BUSY slot waits for
 * no slot at all), never for wb_lock (an NBD read only tries it), and
 * never gets a unit's page (its get may wait for the unit's other
 * pages): the batch is read first.  So no cycle of waits forms.
 *
 * What a writeback wrote leaves the page cache before it lets go of
 * wb_lock (zmi_store_backing_flush): one drop a call, not one a page.
 *
 * Locks: wb_lock -> (mark_lock, in b) -> slot locks, one at a time ->
 * pool; wb_lock -> writer lock (its broadcasts), which is otherwise a
 * leaf: a put waits holding it alone, zmi_store_writer_kick takes it under no
 * slot lock; the fork hook takes wr_lock -> each writer lock, so a
 * writer is in the registry from init to stop and its thread starts
 * under its lock without wr_lock.  A put calls zmi_store_reclaim holding no
 * lock.  busy_lock is a leaf, taken with no
 * slot lock held.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/os.h"
#include "base/tbuf.h"
#include "base/worker.h"
#include "store/store_internal.h"

/* Reclaim frees this share of the limit beyond what the put needs: 1/32,
 * so that a stream of puts at the limit reclaims once in dozens. */
#define RECLAIM_SLACK(limit) ((limit) / 32)
/* Pages written back between two looks at the room made. */
#define RECLAIM_BATCH 64

/* ---- units ---------------------------------------------------------- */

/* Does `which` take every page still in unit u (pinned)?  Each is looked
 * at under its own slot lock, one at a time. */
bool zmi_store_unit_picked(struct zm_store *s, struct zmi_store_unit *u, unsigned which,
			   uint64_t cutoff_ns)
{
	uint16_t live;
	bool ok = true;

	zmi_store_unit_lock(u);
	live = u->live;
	zmi_store_unit_unlock(u);
	for (unsigned k = 0; k < u->span && ok; k++) {
		uint64_t j = u->base + k;
		uint32_t info;

		if (!(live >> k & 1))
			continue;
		info = zmi_store_slot_lock(s, j);
		/* a page that left meanwhile is not the unit's to judge */
		if (slot_is_unit(info) && zmi_store_slot_unit(s, j) == u)
			ok = zmi_store_pick(s, j, info, which, cutoff_ns);
		zmi_store_slot_unlock(s, j, info, info);
	}
	return ok && live;
}

struct zmi_store_unit *zmi_store_unit_take(struct zm_store *s, uint64_t index)
{
	uint32_t info = zmi_store_slot_lock(s, index);
	struct zmi_store_unit *u, *taken = NULL;

	if (slot_is_unit(info)) {
		u = zmi_store_slot_unit(s, index);
		zmi_store_unit_lock(u);
		if (!u->moving && !u->splitting && !u->file) {
			u->moving = true;
			u->refs++;
			taken = u;
		}
		zmi_store_unit_unlock(u);
	}
	zmi_store_slot_unlock(s, index, info, info);
	return taken;
}

void zmi_store_unit_give(struct zm_store *s, struct zmi_store_unit *u)
{
	zmi_store_unit_lock(u);
	u->moving = false;
	zmi_store_unit_unlock(u);
	zmi_store_unit_put_ref(s, u);
}

/* Write back the unit of page index, whole, if `which` takes all its
 * pages: each chunk (at most a page) goes to the file as a page's
 * object would (packed layout), the chunks' pool objects are freed and
 * the record keeps their offsets (the unit is "on file": its pages read
 * it from there, unit.c).  Returns the pages written back (its pages
 * still in it), 0, or a negative errno as writeback_one.  wb_lock held. */
static int writeback_unit(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			  unsigned which, uint64_t cutoff_ns)
{
	uint64_t off[ZM_STORE_UNIT_MAX], left;
	zm_handle_t h[ZM_STORE_UNIT_MAX];
	struct zmi_store_unit *u;
	unsigned nch = 0, c, pages;
	uint32_t len = 0;
	int rc = 0;

	if (!zmi_store_backing_packed(s))
		return 0;   /* a unit's chunks have no place of their own there */
	u = zmi_store_unit_take(s, index);
	if (!u)
		return 0;
	if (!zmi_store_unit_picked(s, u, which, cutoff_ns))
		goto out;
	/* moving: its chunks are this writeback's to read and free */
	len = u->len;
	nch = u->nchunks;
	left = __atomic_load_n(&s->wb_left, __ATOMIC_RELAXED);
	zmi_store_unit_lock(u);
	pages = (unsigned)__builtin_popcount(u->live);
	zmi_store_unit_unlock(u);
	if (left < pages) {
		rc = -EDQUOT;
		goto out;
	}
	for (c = 0; c < nch; c++) {
		uint32_t n = zmi_store_unit_chunk_len(len, nch, c);

		off[c] = UINT64_MAX;
		rc = zm_pool_read(s->pool, u->chunk[c], s->wb_buf, n) ? -EIO : 0;
		if (!rc)
			rc = zmi_store_backing_alloc(s, u->base + c, n, &off[c]);
		if (!rc)
			rc = zmi_store_backing_write(s, u->base + c, off[c], s->wb_buf, n);
		if (rc) {
			zmi_store_count(st, C_WB_FAILS, pages);
			if (off[c] != UINT64_MAX)
				c++;   /* its room goes back too */
			goto undo;
		}
	}
	/* its pages accessed while it was written stay in memory */
	if ((which & ZM_STORE_PICK_IDLE) && !zmi_store_unit_picked(s, u, which, cutoff_ns))
		goto undo;
	zmi_store_unit_lock(u);
	if (!u->live) {
		zmi_store_unit_unlock(u);
		goto undo;   /* its pages all left: it goes with the pin */
	}
	pages = (unsigned)__builtin_popcount(u->live);
	for (c = 0; c < nch; c++) {
		h[c] = u->chunk[c];
		u->chunk[c] = off[c];
	}
	__atomic_store_n(&u->file, true, __ATOMIC_RELAXED);   /* zmi_store_pick peeks */
	/* under its lock, as the pages leaving count themselves out */
	zmi_store_count(st, C_FILE, pages);
	zmi_store_unit_unlock(u);
	/* readers copy the chunks under the unit's lock: none reads these
	 * any more */
	for (c = 0; c < nch; c++)
		if (zmi_unlikely(zm_pool_free(s->pool, h[c])))
			zmi_store_count(st, C_POOL_ERRORS, 1);
	zmi_store_count(st, C_COMPR, -(int64_t)len);
	zmi_store_count(st, C_OBJECTS, -(int64_t)nch);
	zmi_store_count(st, C_FILE_BYTES, len);
	zmi_store_count(st, C_BD_WRITES, pages);
	if (left != UINT64_MAX)
		__atomic_store_n(&s->wb_left, left - pages, __ATOMIC_RELAXED);
	zmi_store_unit_give(s, u);
	return (int)pages;
undo:
	for (unsigned d = 0; d < c; d++)
		zmi_store_backing_free(s, u->base + d, off[d],
				       zmi_store_unit_chunk_len(len, nch, d));
out:
	zmi_store_unit_give(s, u);
	return rc;
}

/* A writeback's batch: pages copied out of the pool into wb_buf, one
 * after another, each with its room in the file, not yet written. */
#define BATCH_PAGES 64

struct wb_page {
	uint64_t index, off;
	uint32_t info, len;   /* the slot's info when copied, the bytes */
	uint32_t pos;         /* where in wb_buf */
	int rc;               /* its write's result */
};

struct wb_batch {
	struct wb_page p[BATCH_PAGES];
	unsigned n;
	uint32_t used;        /* bytes of wb_buf taken */
	uint64_t taken;       /* pages taken that wb_left counts */
};

/* Room in the batch for one more page? */
static bool batch_room(const struct zm_store *s, const struct wb_batch *b)
{
	uint32_t cap = s->page_size > ZMI_WB_BATCH_BYTES ? (uint32_t)s->page_size
							 : ZMI_WB_BATCH_BYTES;

	return b->n < BATCH_PAGES && b->used + s->page_size <= cap;
}

/* Take slot index into the batch if `which` takes it (cutoff_ns as
 * zmi_store_pick's): copy its object, find its room in the file.  1 taken, 0
 * not (or a unit's page: *unit set), or a negative errno: the room or the
 * seam's write refused (counted), or the limit spent (-EDQUOT).  wb_lock
 * held; the batch has room. */
static int batch_take(struct zm_store *s, struct zmi_store_stripe *st, struct wb_batch *b,
		      uint64_t index, unsigned which, uint64_t cutoff_ns, bool *unit)
{
	struct wb_page *p = &b->p[b->n];
	uint64_t left, off = UINT64_MAX;
	uint32_t info, len;
	int rc;

	*unit = false;
	info = zmi_store_slot_lock(s, index);
	if (slot_is_unit(info)) {
		/* zmi_store_pick reads the unit: only under the slot lock */
		*unit = zmi_store_pick(s, index, info, which, cutoff_ns);
		zmi_store_slot_unlock(s, index, info, info);
		return 0;
	}
	if (!zmi_store_pick(s, index, info, which, cutoff_ns)) {
		zmi_store_slot_unlock(s, index, info, info);
		return 0;
	}
	left = __atomic_load_n(&s->wb_left, __ATOMIC_RELAXED);
	if (left != UINT64_MAX && left <= b->taken) {
		zmi_store_slot_unlock(s, index, info, info);
		return -EDQUOT;
	}
	len = zmi_store_slot_len(s, index, info);
	rc = zm_pool_read(s->pool, zmi_store_slot_handle(s, index), s->wb_buf + b->used, len);
	zmi_store_slot_unlock(s, index, info, info);
	if (rc)
		return 0;

	rc = zmi_store_backing_alloc(s, index, len, &off);
	if (!rc)
		rc = zmi_store_backing_write_fault(index);
	if (rc) {
		zmi_store_count(st, C_WB_FAILS, 1);
		if (off != UINT64_MAX)  /* the write refused, not the room */
			zmi_store_backing_free(s, index, off, len);
		return rc;
	}
	*p = (struct wb_page){ .index = index, .off = off, .info = info, .len = len,
			       .pos = b->used };
	b->n++;
	b->used += len;
	b->taken++;
	return 1;
}

/* Page p of the batch, written: on file if its slot still holds what was
 * copied, else its room goes back.  1 or 0 pages written, -EIO (the pool
 * kept the object).  wb_lock held. */
static int batch_settle(struct zm_store *s, struct zmi_store_stripe *st, unsigned which,
			const struct wb_page *p)
{
	const char *buf = s->wb_buf + p->pos;
	uint64_t index = p->index, rec, left;
	uint32_t now, info;

	now = zmi_store_slot_lock(s, index);
	if (!zmi_store_slot_unchanged(s, index, now, p->info, buf, p->len) ||
	    ((which & ZM_STORE_PICK_IDLE) && !(now & SLOT_IDLE))) {
		zmi_store_slot_unlock(s, index, now, now);
		zmi_store_backing_free(s, index, p->off, p->len);
		return 0;
	}
	rec = p->len | p->off << FILE_OFF_SHIFT;
	if (!(now & SLOT_POOL))
		rec |= FILE_RAW;
	else if (now & SLOT_SEC)
		rec |= FILE_SEC;
	if (zmi_store_slot_free_object(s, index, now)) {
		/* the pool kept the object: the page stays in memory */
		zmi_store_slot_unlock(s, index, now, now);
		zmi_store_backing_free(s, index, p->off, p->len);
		return -EIO;
	}
	zmi_lazy_mark(&s->same_arr, index);
	s->same_val[index] = rec;
	info = slot_info_sub(SUB_FILE, false);
	zmi_store_slot_unlock(s, index, now, info);
	zmi_store_account(s, st, now, p->len, -1);
	zmi_store_account(s, st, info, p->len, 1);
	zmi_store_count(st, C_BD_WRITES, 1);
	left = __atomic_load_n(&s->wb_left, __ATOMIC_RELAXED);
	if (left != UINT64_MAX && left)
		__atomic_store_n(&s->wb_left, left - 1, __ATOMIC_RELAXED);
	return 1;
}

/* Write the batch: each run of its pages lying end to end in the file
 * (the packed layout allocates them so, mostly) with one write, then
 * settle each page; a page whose run failed stays in memory (counted)
 * and its room goes back.  Returns the pages written, or the first error
 * when none was; *full: a write found the file full (-ENOSPC).  Empties
 * the batch. */
static long batch_write(struct zm_store *s, struct zmi_store_stripe *st, unsigned which,
			struct wb_batch *b, bool *full)
{
	long done = 0;
	int err = 0;

	for (unsigned k = 0, e; k < b->n; k = e) {
		uint64_t end = b->p[k].off + b->p[k].len;
		int rc;

		/* wb_buf holds the batch's pages end to end too */
		for (e = k + 1; e < b->n && b->p[e].off == end; e++)
			end += b->p[e].len;
		rc = zmi_store_backing_write_run(s, b->p[k].off, s->wb_buf + b->p[k].pos,
						 end - b->p[k].off);
		for (unsigned j = k; j < e; j++)
			b->p[j].rc = rc;
	}
	for (unsigned k = 0; k < b->n; k++) {
		const struct wb_page *p = &b->p[k];
		int rc = p->rc;

		if (rc) {
			zmi_store_count(st, C_WB_FAILS, 1);
			zmi_store_backing_free(s, p->index, p->off, p->len);
		} else {
			rc = batch_settle(s, st, which, p);
		}
		if (rc > 0)
			done += rc;
		else if (rc < 0 && (!err || rc == -ENOSPC))
			err = rc;
	}
	*full = err == -ENOSPC;
	b->n = 0;
	b->used = 0;
	b->taken = 0;
	return done ? done : err;
}

/* Write back slot index if `which` takes it (cutoff_ns as zmi_store_pick's),
 * or its unit: a batch of one.  The pages written (a unit's: all its
 * pages), 0 not taken (or changed meanwhile), or a negative errno: the
 * write failed (counted) or the limit is spent (-EDQUOT).  wb_lock held. */
static int writeback_one(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			 unsigned which, uint64_t cutoff_ns)
{
	struct wb_batch b = { .n = 0 };
	bool unit, full;
	int rc = batch_take(s, st, &b, index, which, cutoff_ns, &unit);

	if (unit)
		return writeback_unit(s, st, index, which, cutoff_ns);
	return rc <= 0 ? rc : (int)batch_write(s, st, which, &b, &full);
}

/* Write back from *hand on, pages `which` takes, until max_pages are
 * written or a whole round was looked at: a batch at a time, a unit
 * (written by itself) after the batch before it.  Returns the pages
 * written, or the first error when none was; *hand moves on. */
static long writeback_round(struct zm_store *s, unsigned which, uint64_t cutoff_ns,
			    uint64_t max_pages, uint64_t *hand)
{
	struct zmi_store_stripe *st = zmi_store_thread_stripe(s);
	struct wb_batch b = { .n = 0 };
	uint64_t visited = 0, i = 0;
	bool stop = false, over = false;
	long done = 0, rc;
	int err = 0;

	for (;;) {
		bool unit = false, more, full = false;

		more = !stop && !over && (uint64_t)done + b.n < max_pages;
		if (more && !zmi_store_slot_walk(s, hand, &visited, UINT64_MAX, &i))
			more = false, over = true;
		rc = more ? batch_take(s, st, &b, i, which, cutoff_ns, &unit) : 0;
		/* the file full or the limit spent ends the round; a page
		 * whose write failed stays, and the next is tried (a bad
		 * block stops nothing but itself) */
		if (rc == -ENOSPC || rc == -EDQUOT)
			err = (int)rc, stop = true, more = false;
		else if (rc < 0 && !err)
			err = (int)rc;
		if (b.n && (!more || unit || !batch_room(s, &b))) {
			rc = batch_write(s, st, which, &b, &full);
			if (rc > 0)
				done += rc;
			else if (rc < 0 && (!err || full))
				err = (int)rc;
			if (full)
				stop = true, unit = false;
		}
		if (unit) {
			rc = writeback_unit(s, st, i, which, cutoff_ns);
			if (rc == -ENOSPC || rc == -EDQUOT)
				err = (int)rc, stop = true;
			else if (rc < 0 && !err)
				err = (int)rc;
			else if (rc > 0)
				done += rc;
		}
		/* a batch that did not all go (pages changed meanwhile) lets
		 * the walk go on for more, up to max_pages */
		if (!b.n && (stop || over || (uint64_t)done >= max_pages))
			break;
	}
	return done ? done : err;
}

static int check_wb(struct zm_store *s, const char *what)
{
	if (!s) {
		zmi_bad_input("%s: no store", what);
		return -EINVAL;
	}
	return zmi_store_has_file(s) ? 0 : -EOPNOTSUPP;
}

long zm_store_writeback(struct zm_store *s, unsigned which, uint64_t max_pages)
{
	uint64_t hand = 0;
	long rc = check_wb(s, "zm_store_writeback");

	if (rc)
		return rc;
	if (which & ~(ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE | ZM_STORE_PICK_INCOMPRESSIBLE)) {
		zmi_bad_input("zm_store_writeback: unknown bits in which %#x", which);
		return -EINVAL;
	}
	if (!__atomic_load_n(&s->wb_left, __ATOMIC_RELAXED))
		return -EDQUOT;
	pthread_mutex_lock(&s->wb_lock);
	rc = writeback_round(s, which, __atomic_load_n(&s->idle_cutoff_ns, __ATOMIC_RELAXED),
			     max_pages, &hand);
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	return rc;
}

int zm_store_writeback_page(struct zm_store *s, uint64_t index)
{
	int rc = check_wb(s, "zm_store_writeback_page");

	if (rc)
		return rc;
	if (index >= s->nr_pages) {
		zmi_bad_input("zm_store_writeback_page: index %llu beyond the store",
			      (unsigned long long)index);
		return -EINVAL;
	}
	if (!__atomic_load_n(&s->wb_left, __ATOMIC_RELAXED))
		return -EDQUOT;
	pthread_mutex_lock(&s->wb_lock);
	/* a put racing with the copy makes it miss; the new content is as
	 * good a page to write back */
	for (int tries = 0; tries < 3 && rc == 0; tries++) {
		if (!slot_cold(word_info(__atomic_load_n(&s->slots[index], __ATOMIC_RELAXED))))
			break;
		/* a page of a unit: its unit, whole */
		rc = writeback_one(s, zmi_store_thread_stripe(s), index, 0, 0);
	}
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	return rc >= 1 ? 0 : rc < 0 ? rc : -ENOENT;
}

/* ---- reclaim -------------------------------------------------------- */

/* Are the objects RECLAIM_SLACK below the limit with size bytes more? */
static bool has_room(struct zm_store *s, size_t size)
{
	uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);

	return !limit || !zmi_store_limit_check(s, size + RECLAIM_SLACK(limit));
}

/* Would size bytes more keep the objects at or below `mark`?  (No kick
 * of the writer, unlike zmi_store_limit_check.) */
static bool below(struct zm_store *s, size_t size, uint64_t mark)
{
	int64_t used = (int64_t)zmi_store_counter_sum(s, C_COMPR);

	return (uint64_t)(used > 0 ? used : 0) + size <= mark;
}

/* The pool's pages full while the objects are not: the bytes to free
 * whatever the counter says (a batch beyond the put's), before the pool
 * is shrunk. */
static size_t pool_want(uint64_t limit, size_t size)
{
	return size + RECLAIM_SLACK(limit) > limit ? size : size + RECLAIM_SLACK(limit);
}

/* The put's own reclaim (writeback_sync, or no writer thread): write
 * back until the objects are RECLAIM_SLACK below the limit. */
static int reclaim_sync(struct zm_store *s, size_t size, bool pool_full)
{
	uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);
	uint64_t before = zmi_store_counter_sum(s, C_COMPR);
	size_t want = size;
	long wrote = 0;

	zmi_store_count(zmi_store_thread_stripe(s), C_RECLAIM_SYNC, 1);
	/* the pool's pages were full while the objects were not: free a
	 * batch's worth of objects whatever the counter says, then compact */
	if (pool_full)
		want = pool_want(limit, size);
	pthread_mutex_lock(&s->wb_lock);
	if (!pool_full && has_room(s, size))
		goto out;  /* another put's reclaim made the room */
	for (int step = 0; step < 3; step++) {
		unsigned which = step < 2 ? ZM_STORE_PICK_IDLE : 0;
		long rc;

		if (step == 1)
			zmi_store_idle_sweep(s, 0, NULL);
		for (;;) {
			/* pool_full: count what this reclaim freed (other
			 * puts may have added meanwhile) */
			if (pool_full ? (int64_t)(before - zmi_store_counter_sum(s, C_COMPR)) >=
						(int64_t)want
				      : has_room(s, size))
				goto out;
			rc = writeback_round(s, which, UINT64_MAX, RECLAIM_BATCH, &s->wb_hand);
			if (rc == -ENOSPC || rc == -EDQUOT) {
				/* the file is full, or its limit spent */
				zmi_store_backing_flush(s);
				pthread_mutex_unlock(&s->wb_lock);
				return -ENOSPC;
			}
			if (rc <= 0)
				break;  /* a whole round wrote none: next step */
			wrote += rc;
		}
	}
	if (!wrote) {
		zmi_store_backing_flush(s);
		pthread_mutex_unlock(&s->wb_lock);
		return -ENOSPC;  /* nothing left in the pool to write back */
	}
out:
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	if (pool_full)
		zm_pool_shrink(s->pool, want);
	return 0;
}

/* ---- the writer ------------------------------------------------------ */

/* Batches the writer writes between two drops of what it wrote from the
 * page cache (zmi_store_backing_flush waits for the disk): 8 of up to 64
 * pages, so that the dirty bytes stay a few MiB while a drop's wait is
 * shared by many pages.  It lets go of wb_lock at each drop. */
#define WRITER_FLUSH_BATCHES 8

struct zmi_store_writer {
	struct zm_store *s;
	pthread_mutex_t lock;    /* the fields below; taken under wb_lock,
				    never the other way (puts wait holding it
				    alone) */
	pthread_cond_t wake;     /* the writer waits here for a kick */
	pthread_cond_t room;     /* puts wait here: broadcast after each
				    batch written and each round */
	pthread_cond_t paused;   /* fork's prepare waits here for the writer
				    to leave its chunk */
	pthread_t thread;
	pid_t pid;               /* the process whose thread it is */
	int kicked;              /* atomic: a round is asked for */
	bool started;            /* a thread runs (in pid) */
	bool nothread;           /* none could be started: puts reclaim */
	bool stop;               /* destroy: the thread ends, puts fail */
	bool forking;            /* fork's prepare: start no chunk */
	bool in_chunk;           /* it holds wb_lock and writes */
	unsigned waiters;        /* puts waiting on room */
	uint64_t rounds;         /* rounds started */
	uint64_t done;           /* rounds ended */
	uint64_t last_fail;      /* the last round that could not make room
				    (rounds are numbered from 1) */
	uint64_t pool_asked;     /* puts that found the pool's pages full
				    and asked for room (numbered from 1) */
	uint64_t pool_served;    /* the last of them a round answered: its
				    bytes freed and the pool shrunk */
	size_t pool_want;        /* bytes the asks not yet served want freed */
	struct zmi_store_writer *next, *prev; /* the registry (wr_lock) */
	bool registered;         /* in it (wr_lock): from init to stop, in
				    the process that made it */
};

/* Every writer, from init to stop, for the fork handlers.  wr_lock ->
 * a writer's lock, never the other way: the thread's start, under the
 * writer's lock, does not touch the registry. */
static pthread_mutex_t wr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zmi_store_writer *wr_head;

/* fork: each writer leaves its chunk (it then holds no lock of the
 * store or its pool) and waits; its lock is held across fork.  The
 * child has no writer threads: their state is made afresh, never to be
 * started (the child's store has no file, zmi_store_has_file). */
static void wr_fork_prepare(void)
{
	pthread_mutex_lock(&wr_lock);
	for (struct zmi_store_writer *w = wr_head; w; w = w->next) {
		pthread_mutex_lock(&w->lock);
		w->forking = true;
		while (w->in_chunk)
			pthread_cond_wait(&w->paused, &w->lock);
	}
}

static void wr_fork_parent(void)
{
	for (struct zmi_store_writer *w = wr_head; w; w = w->next) {
		w->forking = false;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_unlock(&wr_lock);
}

static void wr_fork_child(void)
{
	struct zmi_store_writer *w = wr_head;

	wr_head = NULL;
	while (w) {
		struct zmi_store_writer *n = w->next;

		w->started = w->forking = w->stop = false;
		w->nothread = true;
		w->waiters = 0;
		w->next = w->prev = NULL;
		w->registered = false;   /* the child's registry is empty */
		pthread_cond_init(&w->wake, NULL);
		pthread_cond_init(&w->room, NULL);
		pthread_cond_init(&w->paused, NULL);
		pthread_mutex_unlock(&w->lock);
		w = n;
	}
	pthread_mutex_unlock(&wr_lock);
}

/* First among the library's fork hooks (a constructor registers it
 * before any pool's): a writer mid-chunk may wait for the locks the
 * pool layer's hooks take. */
__attribute__((constructor)) static void wr_hook(void)
{
	zmi_fork_hook(wr_fork_prepare, wr_fork_parent, wr_fork_child);
}

static void wr_broadcast(struct zmi_store_writer *w)
{
	pthread_mutex_lock(&w->lock);
	pthread_cond_broadcast(&w->room);
	pthread_mutex_unlock(&w->lock);
}

/* Take wb_lock for a chunk, unless stopping; waits out a fork. */
static bool chunk_begin(struct zm_store *s, struct zmi_store_writer *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->forking && !w->stop)
		pthread_cond_wait(&w->wake, &w->lock);
	if (w->stop) {
		pthread_mutex_unlock(&w->lock);
		return false;
	}
	w->in_chunk = true;
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_lock(&s->wb_lock);
	return true;
}

static void chunk_end(struct zm_store *s, struct zmi_store_writer *w)
{
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	pthread_mutex_lock(&w->lock);
	w->in_chunk = false;
	pthread_cond_broadcast(&w->paused);
	pthread_mutex_unlock(&w->lock);
}

/* Has the round done its work: room for a page below the low watermark? */
static bool round_done(struct zm_store *s)
{
	uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);

	return !limit || below(s, s->page_size, ZMI_WRITER_LOW(limit));
}

/* The pool's pages full (reclaim_wait with want): what a round owes
 * the puts that asked, taken before each batch so that an ask made
 * mid-round is served by it.  Only the writer's thread touches one. */
struct pool_job {
	uint64_t asked;    /* the last ask taken */
	uint64_t served;   /* the last ask answered */
	uint64_t before;   /* the objects' bytes when the asks were taken */
	size_t want;       /* bytes to free from there, then shrink the pool */
};

static void pool_take(struct zm_store *s, struct zmi_store_writer *w, struct pool_job *j)
{
	pthread_mutex_lock(&w->lock);
	if (w->pool_asked != j->asked) {
		uint64_t now = zmi_store_counter_sum(s, C_COMPR);
		int64_t freed = j->asked != j->served ? (int64_t)(j->before - now) : 0;

		/* one batch of room answers every ask: the most any asked,
		 * or what is left of the job under way if that is more */
		if (freed < 0 || j->asked == j->served)
			freed = 0;
		j->want = (size_t)freed >= j->want ? 0 : j->want - (size_t)freed;
		if (j->want < w->pool_want)
			j->want = w->pool_want;
		j->asked = w->pool_asked;
		j->before = now;
	}
	pthread_mutex_unlock(&w->lock);
}

static bool pool_pending(const struct pool_job *j)
{
	return j->asked != j->served;
}

/* Has the job freed its bytes? */
static bool pool_freed(struct zm_store *s, const struct pool_job *j)
{
	return (int64_t)(j->before - zmi_store_counter_sum(s, C_COMPR)) >= (int64_t)j->want;
}

/* Shrink the pool by what was freed (its pages then go to the puts'
 * allocations: compaction turns the freed objects' room into whole free
 * pages) and wake the asks up to j->asked. */
static void pool_serve(struct zm_store *s, struct zmi_store_writer *w, struct pool_job *j)
{
	zm_pool_shrink(s->pool, j->want);
	j->served = j->asked;
	j->want = 0;
	pthread_mutex_lock(&w->lock);
	w->pool_served = j->served;
	/* kept until served: a round that fails leaves it to the next */
	if (w->pool_asked == j->served)
		w->pool_want = 0;
	pthread_cond_broadcast(&w->room);
	pthread_mutex_unlock(&w->lock);
}

/* One round: write back (idle pages, then a mark's, then any, as
 * reclaim_sync) until round_done and the pool's asks are served, in
 * chunks of WRITER_FLUSH_BATCHES batches under wb_lock, the waiting puts
 * woken after each batch.  0, or -ENOSPC: the file full, its limit
 * spent, nothing left to write, or stopped. */
static int writer_round(struct zm_store *s, struct zmi_store_writer *w)
{
	struct pool_job j = { .asked = w->pool_served, .served = w->pool_served };
	int step = 0, n = 0, err = 0;
	long rc;

	pool_take(s, w, &j);
	if (round_done(s) && !pool_pending(&j))
		return 0;
	if (!__atomic_load_n(&s->wb_left, __ATOMIC_RELAXED))
		return -ENOSPC;
	if (!chunk_begin(s, w))
		return -ENOSPC;
	while (step < 3) {
		pool_take(s, w, &j);
		if (pool_pending(&j) && pool_freed(s, &j))
			pool_serve(s, w, &j);
		if (round_done(s) && !pool_pending(&j))
			break;
		if (n == WRITER_FLUSH_BATCHES) {
			chunk_end(s, w);
			if (!chunk_begin(s, w))
				return -ENOSPC;
			n = 0;
		}
		rc = writeback_round(s, step < 2 ? ZM_STORE_PICK_IDLE : 0, UINT64_MAX,
				     RECLAIM_BATCH, &s->wb_hand);
		if (rc == -ENOSPC || rc == -EDQUOT) {
			err = -ENOSPC;   /* the file is full, or its limit spent */
			break;
		}
		if (rc <= 0) {
			/* a whole round wrote none: next step */
			if (++step == 1)
				zmi_store_idle_sweep(s, 0, NULL);
			continue;
		}
		n++;
		/* the pool's pages it freed go where the puts' allocations
		 * find them (not this thread's page cache) */
		zm_pool_shrink(s->pool, 0);
		wr_broadcast(w);   /* room made: before the disk has it */
	}
	/* the pool's asks: what could be freed is what there is.  Even
	 * none: an ask taken after this round's batches emptied the pool
	 * (a put refused while they were under way) has its room, in the
	 * pages they freed; the put tries again, RECLAIM_TRIES times */
	if (pool_pending(&j))
		pool_serve(s, w, &j);
	if (step == 3 && !round_done(s))
		err = -ENOSPC;     /* nothing left in the pool to write back */
	chunk_end(s, w);
	return err;
}

static void *writer_main(void *arg)
{
	struct zmi_store_writer *w = arg;
	struct zm_store *s = w->s;

	zmi_in_lib = 1; /* base/os.h: never given region memory */
	pthread_mutex_lock(&w->lock);
	for (;;) {
		int rc;

		while (!w->stop && (w->forking || !__atomic_load_n(&w->kicked, __ATOMIC_RELAXED)))
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->stop)
			break;
		/* kicks from here on ask for another round */
		__atomic_store_n(&w->kicked, 0, __ATOMIC_RELAXED);
		w->rounds++;
		pthread_mutex_unlock(&w->lock);
		zmi_store_count(zmi_store_thread_stripe(s), C_WB_WAKEUPS, 1);
		rc = writer_round(s, w);
		pthread_mutex_lock(&w->lock);
		w->done++;
		if (rc)
			w->last_fail = w->rounds;  /* one round at a time */
		pthread_cond_broadcast(&w->room);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int zmi_store_writer_init(struct zm_store *s, bool sync)
{
	struct zmi_store_writer *w;
	pthread_condattr_t at;

	if (sync || !zmi_store_backing_any(s))
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &at);
	pthread_cond_init(&w->room, &at);
	pthread_cond_init(&w->paused, &at);
	pthread_condattr_destroy(&at);
	pthread_mutex_lock(&wr_lock);
	w->next = wr_head;
	if (wr_head)
		wr_head->prev = w;
	wr_head = w;
	w->registered = true;
	pthread_mutex_unlock(&wr_lock);
	s->writer = w;
	return 0;
}

/* Start the thread (w->lock held).  false: none could be. */
static bool writer_start(struct zmi_store_writer *w)
{
	sigset_t all, old;
	int rc;

	if (w->started)
		return true;
	if (w->nothread || w->stop)
		return false;
	/* the thread takes no signal of the program's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->thread, NULL, writer_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		w->nothread = true;  /* from now on each put reclaims */
		return false;
	}
	w->started = true;
	w->pid = getpid();
	return true;
}

void zmi_store_writer_kick(struct zm_store *s)
{
	struct zmi_store_writer *w = s->writer;

	if (__atomic_load_n(&w->kicked, __ATOMIC_RELAXED) || !zmi_store_has_file(s))
		return;
	pthread_mutex_lock(&w->lock);
	if (writer_start(w)) {
		__atomic_store_n(&w->kicked, 1, __ATOMIC_RELAXED);
		pthread_cond_signal(&w->wake);
	}
	pthread_mutex_unlock(&w->lock);
}

void zmi_store_writer_stop(struct zm_store *s)
{
	struct zmi_store_writer *w = s->writer;
	bool join;

	if (!w)
		return;
	s->writer = NULL;
	if (w->started && w->pid != getpid()) {
		/* a child made by a clone() that ran no fork handler: the
		 * thread and the lock's holder may be the parent's */
		return;
	}
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	join = w->started;
	pthread_cond_broadcast(&w->wake);
	pthread_cond_broadcast(&w->room);
	while (w->waiters)  /* puts racing destroy: they leave with -ENOSPC */
		pthread_cond_wait(&w->room, &w->lock);
	pthread_mutex_unlock(&w->lock);
	if (join)
		pthread_join(w->thread, NULL);
	pthread_mutex_lock(&wr_lock);
	if (w->registered) {
		if (w->prev)
			w->prev->next = w->next;
		else
			wr_head = w->next;
		if (w->next)
			w->next->prev = w->prev;
	}
	pthread_mutex_unlock(&wr_lock);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->room);
	pthread_cond_destroy(&w->paused);
	free(w);
}

void zmi_store_writer_quiesce(struct zm_store *s)
{
	struct zmi_store_writer *w = s->writer;

	if (!w || !zmi_store_has_file(s))
		return;
	pthread_mutex_lock(&w->lock);
	while (w->started && !w->stop &&
	       (__atomic_load_n(&w->kicked, __ATOMIC_RELAXED) || w->done != w->rounds))
		pthread_cond_wait(&w->room, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* A put with no room for size bytes waits for the writer: until they
 * fit (want 0), or (want: the pool's pages were full) until a round has
 * freed want bytes since it asked and shrunk the pool; or a round begun
 * after it began waiting fails, or the store stops.  0 (try again),
 * -ENOSPC, or -EAGAIN: no writer thread (reclaim_sync instead). */
static int reclaim_wait(struct zm_store *s, size_t size, size_t want)
{
	struct zmi_store_writer *w = s->writer;
	uint64_t t0 = 0, ticket, ask = 0;
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	if (!writer_start(w)) {
		pthread_mutex_unlock(&w->lock);
		return w->stop ? -ENOSPC : -EAGAIN;
	}
	/* a round running now may have begun before the room it lacked
	 * could be made (a file that works again): only one begun after
	 * this put asked answers it */
	ticket = w->rounds;
	w->waiters++;
	if (want) {
		ask = ++w->pool_asked;
		if (w->pool_want < want)
			w->pool_want = want;
	}
	for (;;) {
		uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);

		/* an ask served by a round that failed: its room is there */
		if (want && w->pool_served >= ask)
			break;
		if (w->stop || w->last_fail > ticket) {
			rc = -ENOSPC;
			break;
		}
		if (!want && (!limit || below(s, size, limit)))
			break;
		if (!t0)
			t0 = zmi_os_now_ns();
		if (!__atomic_load_n(&w->kicked, __ATOMIC_RELAXED)) {
			__atomic_store_n(&w->kicked, 1, __ATOMIC_RELAXED);
			pthread_cond_signal(&w->wake);
		}
		pthread_cond_wait(&w->room, &w->lock);
	}
	if (!--w->waiters && w->stop)
		pthread_cond_broadcast(&w->room);   /* destroy waits for none left */
	pthread_mutex_unlock(&w->lock);
	if (t0) {
		struct zmi_store_stripe *st = zmi_store_thread_stripe(s);

		zmi_store_count(st, C_WB_WAITS, 1);
		zmi_store_count(st, C_WB_WAIT_NS, (int64_t)(zmi_os_now_ns() - t0));
	}
	/* the pages this thread's cache holds count against the pool's
	 * limit as the writer's did: back to where the retry finds them */
	if (want && !rc)
		zm_pool_shrink(s->pool, 0);
	return rc;
}

int zmi_store_reclaim(struct zm_store *s, size_t size, bool pool_full)
{
	uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);
	int rc;

	if (!limit || !zmi_store_has_file(s))
		return -ENOSPC;
	if (pool_full)
		zmi_store_count(zmi_store_thread_stripe(s), C_RECLAIM_POOL, 1);
	if (s->writer) {
		rc = reclaim_wait(s, size, pool_full ? pool_want(limit, size) : 0);
		if (rc != -EAGAIN)
			return rc;
	}
	return reclaim_sync(s, size, pool_full);
}

/* Write back up to n pages that `which` picks (not 0: a pick), idle
 * since cutoff_ns when it says idle, from reclaim's clock hand, and give
 * the pool's freed pages back.  For a recompression that found the pool
 * full: the pages it would have re-encoded go to the file, as a put at
 * the limit would send them, and the room they leave takes the others.
 * Returns the pages written, or -ENOSPC (no file, the file full, the
 * writeback limit spent, nothing to write). */
long zmi_store_writeback_pick(struct zm_store *s, unsigned which, uint64_t cutoff_ns, uint64_t n)
{
	uint64_t before = zmi_store_counter_sum(s, C_COMPR);
	long rc;

	if (!which || !zmi_store_has_file(s) || !__atomic_load_n(&s->wb_left, __ATOMIC_RELAXED))
		return -ENOSPC;
	pthread_mutex_lock(&s->wb_lock);
	rc = writeback_round(s, which, cutoff_ns, n, &s->wb_hand);
	zmi_store_backing_flush(s);
	pthread_mutex_unlock(&s->wb_lock);
	if (rc <= 0)
		return -ENOSPC;
	zm_pool_shrink(s->pool, before - zmi_store_counter_sum(s, C_COMPR));
	return rc;
}

/* ---- reading a page on file ----------------------------------------- */

/* Read the page of record rec into buf (src: where its bytes go first,
 * buf itself for a raw page).  0, -EIO, -ENOMEM. */
static int read_page(struct zm_store *s, uint64_t index, uint64_t rec, char *src, void *buf)
{
	uint32_t len = (uint32_t)(rec & FILE_LEN_MASK);
	int rc;

	if (zmi_store_backing_read(s, index, file_off(rec), src, len))
		return -EIO;
	if (rec & FILE_RAW)
		return 0;
	rc = zm_codec_decompress((rec & FILE_SEC) ? s->codec2 : s->codec, src, len, buf,
				 s->page_size);
	return !rc ? 0 : rc == -ENOMEM ? -ENOMEM : -EIO;
}

/* The page's bytes (src, len) in a new pool object, if the limit allows
 * and the pool has room; 0 if not. */
static zm_handle_t readback_object(struct zm_store *s, const char *src, uint32_t len)
{
	zm_handle_t h;

	if (!s->readback || zmi_store_limit_check(s, len))
		return 0;
	h = zm_pool_alloc(s->pool, len);
	if (h && zm_pool_write(s->pool, h, src, len)) {
		zm_pool_free(s->pool, h);
		h = 0;
	}
	return h;
}

/* The read of FILE slot index (BUSY, record rec, info `info` before it)
 * is over, with rc and, if 0, the record's bytes at src: bring it back
 * into the pool (readback) and clear BUSY.  The waiters are the
 * caller's to wake (zmi_store_slot_wake), once for as many pages as it
 * likes. */
static void file_settle(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			uint32_t info, uint64_t rec, const char *src, int rc)
{
	uint32_t len = (uint32_t)(rec & FILE_LEN_MASK), held, ninfo = info;
	zm_handle_t h = 0;

	if (!rc) {
		zmi_store_count(st, C_BD_READS, 1);
		h = readback_object(s, src, len);   /* back into the pool, as it was there */
	}
	held = zmi_store_slot_lock(s, index);
	ZM_ASSERT(held == (info | SLOT_BUSY));
	if (h && zmi_store_slot_bind(s, h, index)) {
		/* the page stays on file; buf has it all the same */
		zm_pool_free(s->pool, h);
	} else if (h) {
		zmi_store_backing_free(s, index, file_off(rec), len);
		ninfo = (rec & FILE_RAW) ? slot_info_sub(SUB_HUGE, false)
					 : slot_info_pool(len, rec & FILE_SEC);
		zmi_store_account(s, st, info, len, -1);
		zmi_store_account(s, st, ninfo, len, 1);
	}
	zmi_store_slot_unlock(s, index, held, ninfo);
}

int zmi_store_file_get(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
		       uint32_t info, void *buf)
{
	uint64_t rec = s->same_val[index];
	char *src = buf;
	int rc;

	if (!(rec & FILE_RAW))
		src = zmi_thread_buf(s->page_size);
	if (!zmi_store_has_file(s) || !src) {
		/* a forked child's store: the file is the parent's */
		zmi_store_slot_unlock(s, index, info, info);
		return src ? -EIO : -ENOMEM;
	}
	/* BUSY: the record and the file's bytes stay this page's (gets, puts
	 * and discards of it wait; nothing else changes a FILE slot) while
	 * the slot is unlocked for the read */
	zmi_store_slot_unlock(s, index, info, info | SLOT_BUSY);
	rc = read_page(s, index, rec, src, buf);
	file_settle(s, st, index, info, rec, src, rc);
	zmi_store_slot_wake(s);
	return rc;
}

/* ---- reading many pages on file at once ----------------------------- */

/* Pages on file a range's read holds BUSY at once, and reads together:
 * 64 of them (256 KiB of 4 KiB pages) are a request of zmem serve's. */
#define RANGE_PAGES 64
/* The most bytes of blocks one read fetches (its bounce buffer): 256
 * KiB, at least a larger page's blocks and the block it may start in. */
#define RANGE_SPAN_BYTES (256u << 10)
/* A read goes on over up to this many blocks between two records (other
 * pages' bytes, or holes): a few blocks more cost less than a call. */
#define RANGE_GAP 2
#define RANGE_BLOCK 4096u

_Static_assert(RANGE_SPAN_BYTES >= (64u << 10) + 2 * RANGE_BLOCK,
	       "a read of the largest page's blocks fits");

/* A page on file of a range's read: its slot BUSY since it was found. */
struct rd_page {
	uint64_t index, rec;
	uint32_t info;        /* the slot's before BUSY */
	void *buf;            /* where the page goes */
	int rc;
};

static uint64_t rd_lo(const struct rd_page *p)
{
	return file_off(p->rec) / RANGE_BLOCK;
}

static uint64_t rd_hi(const struct rd_page *p)
{
	return (file_off(p->rec) + (p->rec & FILE_LEN_MASK) - 1) / RANGE_BLOCK;
}

static int rd_cmp(const void *a, const void *b)
{
	uint64_t x = file_off(((const struct rd_page *)a)->rec);
	uint64_t y = file_off(((const struct rd_page *)b)->rec);

	return x < y ? -1 : x > y;
}

/* Decode the record of p from its bytes at src into p->buf. */
static int rd_decode(struct zm_store *s, const struct rd_page *p, const char *src)
{
	uint32_t len = (uint32_t)(p->rec & FILE_LEN_MASK);
	int rc;

	if (p->rec & FILE_RAW) {
		memcpy(p->buf, src, s->page_size);
		return 0;
	}
	rc = zm_codec_decompress((p->rec & FILE_SEC) ? s->codec2 : s->codec, src, len, p->buf,
				 s->page_size);
	return !rc ? 0 : rc == -ENOMEM ? -ENOMEM : -EIO;
}

/* Read the blocks [lo, hi] into sbuf, then decode and settle pages
 * p[0..n) (their records in those blocks); a read that failed is made
 * again a page at a time, so that only the pages whose own blocks fail
 * fail (an NBD export's block lost at a restart, a bad sector). */
static void rd_span(struct zm_store *s, struct zmi_store_stripe *st, struct rd_page *p,
		    unsigned n, uint64_t lo, uint64_t hi, char *sbuf)
{
	int rc = zmi_store_backing_read_run(s, lo * RANGE_BLOCK, sbuf, (hi - lo + 1) * RANGE_BLOCK);

	for (unsigned k = 0; k < n; k++) {
		uint64_t base = lo;

		if (rc && n > 1) {
			base = rd_lo(&p[k]);
			p[k].rc = zmi_store_backing_read_run(s, base * RANGE_BLOCK, sbuf,
							     (rd_hi(&p[k]) - base + 1) *
							     RANGE_BLOCK);
		} else {
			p[k].rc = rc;
		}
		if (!p[k].rc)
			p[k].rc = rd_decode(s, &p[k], sbuf + (file_off(p[k].rec) - base * RANGE_BLOCK));
		file_settle(s, st, p[k].index, p[k].info, p[k].rec,
			    sbuf + (file_off(p[k].rec) - base * RANGE_BLOCK), p[k].rc);
	}
	zmi_store_slot_wake(s);
}

/* Keep in *err, *bad the error of the page at the lowest index. */
static void rd_error(int rc, uint64_t index, int *err, uint64_t *bad)
{
	if (rc && index < *bad)
		*err = rc, *bad = index;
}

/* Read pages p[0..n), all BUSY: in the order of their records in the
 * file, each run of them whose blocks lie at most RANGE_GAP apart (none
 * on an NBD export: a block between may be one a restart lost) with one
 * read of at most RANGE_SPAN_BYTES.  Every slot settled (not BUSY) on
 * return; a page that failed counted, and kept in *err, *bad as
 * rd_error.  p is reordered. */
static void rd_batch(struct zm_store *s, struct zmi_store_stripe *st, struct rd_page *p,
		     unsigned n, char *sbuf, int *err, uint64_t *bad)
{
	const uint64_t gap = s->nbd ? 0 : RANGE_GAP;
	const uint64_t max = RANGE_SPAN_BYTES / RANGE_BLOCK;
	unsigned nq = 0;

	/* the seam's say first: a page it fails is not read */
	for (unsigned k = 0; k < n; k++) {
		int rc = zmi_store_backing_read_fault(p[k].index);

		if (rc) {
			file_settle(s, st, p[k].index, p[k].info, p[k].rec, NULL, rc);
			zmi_store_count(st, C_FAILED_READS, 1);
			rd_error(rc, p[k].index, err, bad);
		} else {
			p[nq++] = p[k];
		}
	}
	if (nq < n)
		zmi_store_slot_wake(s);
	qsort(p, nq, sizeof(*p), rd_cmp);
	for (unsigned k = 0, e; k < nq; k = e) {
		uint64_t lo = rd_lo(&p[k]), hi = rd_hi(&p[k]);

		for (e = k + 1; e < nq; e++) {
			uint64_t h = rd_hi(&p[e]);

			if (rd_lo(&p[e]) > hi + gap || (h > hi ? h : hi) - lo + 1 > max)
				break;
			hi = h > hi ? h : hi;
		}
		rd_span(s, st, p + k, e - k, lo, hi, sbuf);
		for (unsigned j = k; j < e; j++) {
			if (p[j].rc)
				zmi_store_count(st, C_FAILED_READS, 1);
			rd_error(p[j].rc, p[j].index, err, bad);
		}
	}
}

int zm_store_get_range(struct zm_store *s, uint64_t index, uint64_t count, void *pages)
{
	struct rd_page p[RANGE_PAGES];
	struct zmi_store_stripe *st;
	uint64_t i, end, bad = UINT64_MAX;
	char *sbuf = NULL;
	unsigned n = 0;
	int err = 0;

	if (zmi_unlikely(!s || (!pages && count) || index > s->nr_pages ||
			 count > s->nr_pages - index)) {
		zmi_bad_input("zm_store_get_range: no store or buffer, or range %llu+%llu beyond it",
			      (unsigned long long)index, (unsigned long long)count);
		return -EINVAL;
	}
	st = zmi_store_thread_stripe(s);
	end = index + count;
	zmi_store_count(st, C_GETS, (int64_t)count);
	for (i = index; i < end;) {
		char *buf = (char *)pages + (i - index) * s->page_size;
		uint32_t info = zmi_store_slot_lock_ready(s, i);
		int rc;

		if (slot_kind(info) == ZM_STORE_SLOT_FILE && zmi_store_has_file(s) &&
		    (sbuf || !posix_memalign((void **)&sbuf, RANGE_BLOCK, RANGE_SPAN_BYTES))) {
			/* BUSY, as zmi_store_file_get's, until its read is
			 * settled */
			p[n++] = (struct rd_page){ .index = i, .rec = s->same_val[i],
						   .info = info, .buf = buf };
			zmi_store_slot_unlock(s, i, info, info | SLOT_BUSY);
			if (n == RANGE_PAGES) {
				rd_batch(s, st, p, n, sbuf, &err, &bad);
				n = 0;
			}
			i++;
			continue;
		}
		if (slot_kind(info) == ZM_STORE_SLOT_UNIT && n) {
			/* a unit's get may wait on its other pages: none of
			 * this thread's BUSY ones (the lock rules above) */
			zmi_store_slot_unlock(s, i, info, info);
			rd_batch(s, st, p, n, sbuf, &err, &bad);
			n = 0;
			continue;
		}
		rc = zmi_store_get_locked(s, st, i, info, buf);
		if (rc == -EAGAIN)
			continue;   /* a unit's page that moved: again */
		rd_error(rc, i, &err, &bad);
		i++;
	}
	if (n)
		rd_batch(s, st, p, n, sbuf, &err, &bad);
	free(sbuf);
	return err;
}
