/*
 * Byte ranges on the store.  The store works in whole pages; NBD clients
 * send any offset and length (qemu and the kernel often 512 bytes).  A
 * request is cut at page boundaries: whole pages go straight to
 * zm_store_put/get/discard, the partial pages at its ends are read,
 * changed and written back under the page's stripe lock.  A read's whole
 * pages go to zm_store_get_range at once, so that those on the store's
 * backing file are read together.
 *
 * Whole-page writes take the stripe lock too: otherwise a read-modify-write
 * of one sector could write back, over a concurrent whole-page write, the
 * page's other sectors as they were before it.  Reads take no lock: the
 * store returns one complete page that some put stored.
 *
 * With units (the store's unit_pages > 1), a write's whole pages go to
 * zm_store_put_range a unit at a time (the run of them inside one aligned
 * unit), so that pages arriving together can be compressed together; the
 * stripes are then by unit, and one lock covers every page of the run.
 */
#include <errno.h>
#include <string.h>

#include "serve/nbd.h"
#include "serve/serve.h"

int disk_init(struct serve_disk *d, struct zm_store *store, uint64_t size, unsigned unit_pages)
{
	d->store = store;
	d->size = size;
	d->page_size = zm_store_page_size(store);
	d->page_shift = (unsigned)__builtin_ctzl(d->page_size);
	d->unit_shift = unit_pages > 1 ? (unsigned)__builtin_ctz(unit_pages) : 0;
	d->zero_run_pages = SERVE_ZERO_RUN_MIN >> d->page_shift;
	if (!d->zero_run_pages)
		d->zero_run_pages = 1;
	for (unsigned i = 0; i < DISK_STRIPES; i++)
		pthread_mutex_init(&d->stripe[i], NULL);
	return 0;
}

void disk_fini(struct serve_disk *d)
{
	for (unsigned i = 0; i < DISK_STRIPES; i++)
		pthread_mutex_destroy(&d->stripe[i]);
}

/* The page that byte off lies in, where in it, and how many of the len
 * bytes from off it holds. */
static inline size_t span(const struct serve_disk *d, uint64_t off, uint64_t len,
			  uint64_t *page, size_t *in)
{
	size_t n;

	*page = off >> d->page_shift;
	*in = off & (d->page_size - 1);
	n = d->page_size - *in;
	return n > len ? (size_t)len : n;
}

static pthread_mutex_t *stripe(struct serve_disk *d, uint64_t page)
{
	/* neighbouring units (pages, without units) on different stripes:
	 * sequential writers from several connections do not queue on one
	 * lock; the pages of one unit on one, which its put_range takes */
	return &d->stripe[(page >> d->unit_shift) % DISK_STRIPES];
}

/* Whole pages from page on, at most max, that lie in page's unit. */
static inline uint64_t unit_run(const struct serve_disk *d, uint64_t page, uint64_t max)
{
	uint64_t left = ((page >> d->unit_shift) + 1) << d->unit_shift;

	left -= page;
	return left < max ? left : max;
}

int disk_read(struct serve_disk *d, uint64_t off, uint32_t len, void *buf, void *scratch)
{
	uint8_t *out = buf;

	while (len) {
		uint64_t page;
		size_t in, n = span(d, off, len, &page, &in);
		int rc;

		if (n == d->page_size) {
			/* the request's whole pages at once: those on the
			 * backing file are read together */
			uint64_t run = len >> d->page_shift;

			n = (size_t)run << d->page_shift;
			rc = run == 1 ? zm_store_get(d->store, page, out)
				      : zm_store_get_range(d->store, page, run, out);
		} else {
			rc = zm_store_get(d->store, page, scratch);
			memcpy(out, (uint8_t *)scratch + in, n);
		}
		if (rc)
			return rc;
		out += n, off += n, len -= (uint32_t)n;
	}
	return 0;
}

int disk_write(struct serve_disk *d, uint64_t off, uint32_t len, const void *buf, void *scratch)
{
	const uint8_t *src = buf;

	while (len) {
		uint64_t page;
		size_t in, n = span(d, off, len, &page, &in);
		pthread_mutex_t *m = stripe(d, page);
		int rc;

		pthread_mutex_lock(m);
		if (n == d->page_size) {
			/* the whole pages of this request in page's unit: with
			 * units, compressed together if that pays */
			uint64_t run = unit_run(d, page, len >> d->page_shift);

			n = (size_t)run << d->page_shift;
			rc = run == 1 ? zm_store_put(d->store, page, src)
				      : zm_store_put_range(d->store, page, run, src);
		} else {
			rc = zm_store_get(d->store, page, scratch);
			if (!rc) {
				memcpy((uint8_t *)scratch + in, src, n);
				rc = zm_store_put(d->store, page, scratch);
			}
		}
		pthread_mutex_unlock(m);
		if (rc)
			return rc;
		src += n, off += n, len -= (uint32_t)n;
	}
	return 0;
}

/* The page's block status: a hole (never written, or discarded) reads as
 * zeros; a zero-filled page reads as zeros without being one. */
static uint32_t page_state(struct serve_disk *d, uint64_t page)
{
	unsigned kind;
	zm_handle_t word;

	if (zm_store_slot_info(d->store, page, &kind, &word, NULL))
		return 0;
	if (kind == ZM_STORE_SLOT_EMPTY)
		return NBD_STATE_HOLE | NBD_STATE_ZERO;
	if (kind == ZM_STORE_SLOT_SAME && word == 0)
		return NBD_STATE_ZERO;
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return !p[0] && !memcmp(p, p + 1, n - 1);
}

/* Zeroes [off, off + len).  A page all of whose bytes on the disk are
 * zeroed -- a whole page, or the disk's partial last page from its start
 * -- becomes a hole when may_hole allows, else a zero-filled page, so that
 * block status reports every page of a range zeroed alike; a page left
 * all zeros by a partial zeroing becomes a hole too when may_hole allows. */
int disk_zero(struct serve_disk *d, uint64_t off, uint64_t len, bool may_hole, void *scratch)
{
	bool zeroed = false;  /* scratch holds a page of zeros */

	while (len) {
		uint64_t page;
		size_t in, n = span(d, off, len, &page, &in);
		pthread_mutex_t *m = stripe(d, page);
		bool whole = n == d->page_size || (in == 0 && off + n == d->size);
		int rc = 0;

		pthread_mutex_lock(m);
		if (whole && may_hole) {
			rc = zm_store_discard(d->store, page, 1);
		} else if (whole) {
			if (!zeroed)
				memset(scratch, 0, d->page_size);
			zeroed = true;
			rc = zm_store_put(d->store, page, scratch); /* same-filled: no pool memory */
		} else if (!(page_state(d, page) & NBD_STATE_ZERO)) {
			zeroed = false;
			rc = zm_store_get(d->store, page, scratch);
			if (!rc) {
				memset((uint8_t *)scratch + in, 0, n);
				if (may_hole && all_zero(scratch, d->page_size))
					rc = zm_store_discard(d->store, page, 1);
				else
					rc = zm_store_put(d->store, page, scratch);
			}
		}
		pthread_mutex_unlock(m);
		if (rc)
			return rc;
		off += n, len -= n;
	}
	return 0;
}

/* ---- block status ------------------------------------------------------
 *
 * What a client does with block status is skip what reads as zeros and
 * copy the rest, one extent at a time (qemu-img map and convert ask
 * extent by extent).  Real data has zero pages scattered through it, and
 * reporting each as its own extent made qemu-img walk thousands of them,
 * slower than reading them.  So a run of pages that read as zeros --
 * written zeros, holes, or both -- shorter than SERVE_ZERO_RUN_MIN bytes
 * is reported as data; a longer one is reported as zeros, and within it a
 * run of holes (never written, or trimmed) that long as a hole.  Clearing
 * a status bit is always allowed (the NBD spec), so a client loses only
 * the chance to skip short runs, and a page's status depends on the disk
 * alone, never on where a request starts: a run's length is measured
 * both ways from the page asked about, at most the minimum each way.
 * Extents then number at most about 2 x size / SERVE_ZERO_RUN_MIN. */

static uint64_t disk_pages(const struct serve_disk *d)
{
	return (d->size + d->page_size - 1) >> d->page_shift;
}

/* The first page in [page, end) that is not a hole, or end; stretches
 * never written are skipped without a look (zm_store_next_used). */
static uint64_t hole_end(struct serve_disk *d, uint64_t page, uint64_t end)
{
	uint64_t used;

	if (zm_store_next_used(d->store, page, end, &used))
		return page;
	return used;
}

/* How many pages from page on (at most cap) read as zeros: holes, or
 * holes and zero-filled pages when !holes_only. */
static uint64_t zero_run_fwd(struct serve_disk *d, uint64_t page, uint64_t cap, bool holes_only)
{
	uint64_t end = disk_pages(d), q = page;

	end = cap < end - page ? page + cap : end;
	while (q < end) {
		uint32_t st = page_state(d, q);

		if (st & NBD_STATE_HOLE)
			q = hole_end(d, q, end);
		else if ((st & NBD_STATE_ZERO) && !holes_only)
			q++;
		else
			break;
	}
	return q - page;
}

/* The same, for the pages before page (at most cap). */
static uint64_t zero_run_back(struct serve_disk *d, uint64_t page, uint64_t cap, bool holes_only)
{
	uint64_t n = 0;

	while (n < cap && n < page) {
		uint32_t st = page_state(d, page - n - 1);

		if (!(st & (holes_only ? NBD_STATE_HOLE : NBD_STATE_ZERO)))
			break;
		n++;
	}
	return n;
}

/* The status block status reports for a page (see above). */
static uint32_t page_report(struct serve_disk *d, uint64_t page)
{
	const uint64_t min = d->zero_run_pages;
	uint32_t st = page_state(d, page);

	if (!(st & NBD_STATE_ZERO))
		return 0;
	if (zero_run_back(d, page, min, false) + zero_run_fwd(d, page, min, false) < min)
		return 0;
	if (!(st & NBD_STATE_HOLE))
		return NBD_STATE_ZERO;
	if (zero_run_back(d, page, min, true) + zero_run_fwd(d, page, min, true) < min)
		return NBD_STATE_ZERO;
	return NBD_STATE_ZERO | NBD_STATE_HOLE;
}

/* The first page from page (reported as rep) on, before lim, that is
 * reported otherwise; lim if none.  Runs skipped whole: a short zero run
 * inside data, a short hole run inside zeros. */
static uint64_t report_end(struct serve_disk *d, uint64_t page, uint64_t lim, uint32_t rep)
{
	const uint64_t min = d->zero_run_pages;
	uint64_t q = page;

	if (rep == (NBD_STATE_ZERO | NBD_STATE_HOLE))
		return hole_end(d, page, lim);
	while (q < lim) {
		uint32_t st = page_state(d, q);
		uint64_t n;

		if (rep == 0 && !(st & NBD_STATE_ZERO)) {
			q++;
		} else if (rep == 0) {
			/* a zero run starts at q (or page is in a short one) */
			n = zero_run_fwd(d, q, min, false);
			if (n >= min && q != page)
				break;
			q += n;
		} else if (!(st & NBD_STATE_ZERO)) {
			break;  /* zeros end at data */
		} else if (st & NBD_STATE_HOLE) {
			/* a hole run starts at q (or page is in a short one) */
			n = hole_end(d, q, disk_pages(d)) - q;
			if (n >= min && q != page)
				break;
			q += n;
		} else {
			q++;
		}
	}
	return q < lim ? q : lim;
}

unsigned disk_extents(struct serve_disk *d, uint64_t off, uint32_t len, uint32_t *ext,
		      unsigned max)
{
	const uint64_t end = off + len;
	const uint64_t lim = (end + d->page_size - 1) >> d->page_shift;
	unsigned n = 0;

	while (off < end) {
		uint64_t page = off >> d->page_shift;
		uint32_t st = page_report(d, page);
		uint64_t stop = report_end(d, page, lim, st) << d->page_shift;

		if (stop <= off)  /* the page changed under us: report it alone */
			stop = (page + 1) << d->page_shift;
		if (stop > end)
			stop = end;
		if (n && ext[2 * (n - 1) + 1] == st) {
			ext[2 * (n - 1)] += (uint32_t)(stop - off);
		} else if (n < max) {
			ext[2 * n] = (uint32_t)(stop - off);
			ext[2 * n + 1] = st;
			n++;
		} else {
			break;  /* a new status, and no room for it */
		}
		off = stop;
	}
	return n;
}
