/*
 * Byte ranges on the store.  The store works in whole pages; NBD clients
 * send any offset and length (qemu and the kernel often 512 bytes).  A
 * request is cut at page boundaries: whole pages go straight to
 * zm_store_put/get/discard, the partial pages at its ends are read,
 * changed and written back under the page's stripe lock.
 *
 * Whole-page writes take the stripe lock too: otherwise a read-modify-write
 * of one sector could write back, over a concurrent whole-page write, the
 * page's other sectors as they were before it.  Reads take no lock: the
 * store returns one complete page that some put stored.
 */
#include <errno.h>
#include <string.h>

#include "serve/nbd.h"
#include "serve/serve.h"

int disk_init(struct zmi_disk *d, struct zm_store *store, uint64_t size)
{
	d->store = store;
	d->size = size;
	d->page_size = zm_store_page_size(store);
	d->page_shift = (unsigned)__builtin_ctzl(d->page_size);
	for (unsigned i = 0; i < DISK_STRIPES; i++)
		pthread_mutex_init(&d->stripe[i], NULL);
	return 0;
}

void disk_fini(struct zmi_disk *d)
{
	for (unsigned i = 0; i < DISK_STRIPES; i++)
		pthread_mutex_destroy(&d->stripe[i]);
}

/* The page that byte off lies in, where in it, and how many of the len
 * bytes from off it holds. */
static inline size_t span(const struct zmi_disk *d, uint64_t off, uint64_t len,
			  uint64_t *page, size_t *in)
{
	size_t n;

	*page = off >> d->page_shift;
	*in = off & (d->page_size - 1);
	n = d->page_size - *in;
	return n > len ? (size_t)len : n;
}

static pthread_mutex_t *stripe(struct zmi_disk *d, uint64_t page)
{
	/* neighbouring pages on different stripes: sequential writers from
	 * several connections do not queue on one lock */
	return &d->stripe[page % DISK_STRIPES];
}

int disk_read(struct zmi_disk *d, uint64_t off, uint32_t len, void *buf, void *scratch)
{
	uint8_t *out = buf;

	while (len) {
		uint64_t page;
		size_t in, n = span(d, off, len, &page, &in);
		int rc;

		if (n == d->page_size) {
			rc = zm_store_get(d->store, page, out);
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

int disk_write(struct zmi_disk *d, uint64_t off, uint32_t len, const void *buf, void *scratch)
{
	const uint8_t *src = buf;

	while (len) {
		uint64_t page;
		size_t in, n = span(d, off, len, &page, &in);
		pthread_mutex_t *m = stripe(d, page);
		int rc;

		pthread_mutex_lock(m);
		if (n == d->page_size) {
			rc = zm_store_put(d->store, page, src);
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
static uint32_t page_state(struct zmi_disk *d, uint64_t page)
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
int disk_zero(struct zmi_disk *d, uint64_t off, uint64_t len, bool may_hole, void *scratch)
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

/* Where the status of the page at off stops being what it is, at most
 * end: holes run to the next stored page (found without reading the
 * stretches never written, zm_store_next_used), a stored page is its own
 * extent and is merged with its neighbours by the caller. */
static uint64_t extent_end(struct zmi_disk *d, uint64_t off, uint64_t end, uint32_t st)
{
	uint64_t page = off >> d->page_shift, stop = (page + 1) << d->page_shift;

	if (st & NBD_STATE_HOLE) {
		uint64_t last = (end + d->page_size - 1) >> d->page_shift, used;

		if (!zm_store_next_used(d->store, page + 1, last, &used))
			stop = used << d->page_shift;
	}
	return stop < end ? stop : end;
}

unsigned disk_extents(struct zmi_disk *d, uint64_t off, uint32_t len, uint32_t *ext,
		      unsigned max)
{
	const uint64_t end = off + len;
	unsigned n = 0;

	while (off < end) {
		uint32_t st = page_state(d, off >> d->page_shift);
		uint64_t stop = extent_end(d, off, end, st);

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
