/*
 * Policy: where a compressed page goes, and the memory limit.
 *
 * Placement, from the compressed size z (z > cap when the codec could not
 * fit the page below the cap it was given, zmi_store_policy_cap()):
 *
 *   z > max_zsize                          reject (zcache's zv_max_zsize)
 *   z > max_mean_zsize and the mean object
 *   in the pool is above max_mean_zsize    reject (zv_max_mean_zsize)
 *   z >= huge_size                         raw page in the pool (zram's
 *                                          huge pages)
 *   otherwise                              compressed object in the pool
 *
 * The cap makes the codec stop early on a page that will not be stored
 * compressed anyway: just below huge_size, or max_zsize when that is set
 * (then the exact size matters up to max_zsize).
 *
 * The limit.  zram refuses a write once the pool's pages pass mem_limit.
 * Here the pool gets the limit itself (a backend that takes pages from a
 * zm_pages refuses pages beyond it, and the store turns its ENOMEM into
 * -ENOSPC), and the store also checks the objects' sizes against it
 * before allocating, which bounds the backends that have no pages (malloc)
 * and refuses a page early when the objects alone would not fit.  The
 * check reads the compressed-bytes counter, which a put raises once its
 * object is in: puts racing on other threads may pass it by a page each,
 * as zram's check (made after the allocation) may.  It can change at run
 * time (zm_store_set_limit), below the limit the store was created with,
 * which sized its arena and bounds its pool's pages.
 */
#include <errno.h>

#include "store/store_internal.h"

size_t zmi_store_policy_cap(const struct zm_store *s)
{
	if (s->max_zsize)
		return s->max_zsize;
	return s->huge_size - 1;
}

/* Mean object size in the pool, 0 when empty. */
static uint64_t mean_zsize(const struct zm_store *s)
{
	uint64_t n = zmi_store_counter_sum(s, C_OBJECTS);

	return n ? zmi_store_counter_sum(s, C_COMPR) / n : 0;
}

enum zmi_store_placement zmi_store_policy_place(struct zm_store *s, size_t zlen)
{
	size_t z = zlen ? zlen : s->page_size + 1;

	if (s->max_zsize && z > s->max_zsize)
		return ZM_PLACE_REJECT_ZSIZE;
	if (s->max_mean_zsize && z > s->max_mean_zsize &&
	    mean_zsize(s) > s->max_mean_zsize)
		return ZM_PLACE_REJECT_MEAN;
	if (z >= s->huge_size)
		return ZM_PLACE_HUGE;
	return ZM_PLACE_POOL;
}

int zmi_store_limit_check(struct zm_store *s, size_t size)
{
	uint64_t limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);

	int64_t used;

	if (!limit)
		return 0;
	/* the stripes are read one by one, not as a snapshot: an object
	 * counted out on one stripe before it is seen counted in on another
	 * can make the sum "negative" for a moment */
	used = (int64_t)zmi_store_counter_sum(s, C_COMPR);
	if (used < 0)
		used = 0;
	/* past the high watermark: the writer starts making room before
	 * the puts find none (writeback.c) */
	if (s->writer && (uint64_t)used + size > ZMI_WRITER_HIGH(limit))
		zmi_store_writer_kick(s);
	return (uint64_t)used + size > limit ? -ENOSPC : 0;
}
