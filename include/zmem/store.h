/*
 * zm_store: the compressed page store, the core of zram and zcache.
 *
 * A store is an array of slots indexed by page number (0 .. nr_pages - 1,
 * like the sectors of zram's disk).  zm_store_put() compresses a page and
 * keeps it in a pool (zm_pool, see pool.h); zm_store_get() gives it back
 * byte for byte.  What happens to a page on put:
 *
 *   - same-filled (every 8-byte word equal; zero pages are the common
 *     case): the word is kept in the slot itself and takes no pool memory.
 *     no_same_filled = true in the configuration turns this off, so that
 *     allocators can be compared on every page, as zcache's did (2011);
 *   - compressed to zsize bytes:
 *       zsize > max_zsize (if set)            rejected, -E2BIG
 *       zsize > max_mean_zsize (if set) and
 *       the mean zsize of the store is above
 *       max_mean_zsize already                rejected, -E2BIG
 *       zsize >= huge_size, or incompressible stored raw in a page-sized
 *                                             object ("huge", like zram)
 *       otherwise                             stored compressed
 *     (max_zsize and max_mean_zsize are zcache's zv_max_zsize and
 *     zv_max_mean_zsize; by default both are off and incompressible pages
 *     are stored raw, like zram.)
 *   - the memory limit: a put that would take the store beyond
 *     limit_bytes fails with -ENOSPC, unless the store has a backing
 *     file: then idle pages (any, if none is idle) are written back to make room, and -ENOSPC comes only when
 *     the file is full or the writeback limit is spent (zswap's way).
 *
 * A put that fails, for any reason, leaves the slot as it was: a get
 * returns the previous content (or zeros if there was none).  The new
 * object is allocated before the old one is freed, so overwriting a page
 * needs room for both for a moment.
 *
 * A slot that was never written, or was discarded, reads as zeros.
 *
 * Concurrency: any number of threads may put, get and discard at once, on
 * different slots or the same one.  Each slot has its own lock (one bit of
 * the slot), taken only to read or swap the slot's contents: compression
 * happens before it is taken, into a per-thread buffer, and the old object
 * is freed after it is dropped.  A get never sees a half-written page: it
 * returns one complete page that some put stored in that slot (or zeros).
 * zm_store_destroy() must not race with anything.
 *
 * Corruption: a compressed object that fails to decompress (the codec
 * reports it, see codec.h) makes zm_store_get() return -EIO; it is counted
 * in failed_reads, and the rest of the store is unaffected.  The codecs
 * never read or write outside their buffers on bad input.  There is no
 * checksum: a corruption the codec cannot see returns wrong data, as in
 * zram.  Pages stored raw (huge) cannot be checked at all.
 *
 * Statistics: zm_store_stats() fills one struct, whose first fields are
 * zram's mm_stat in its order; zm_store_print_mm_stat() prints them as
 * /sys/block/zram0/mm_stat does, so scripts written for zram read them.
 * docs/store.md explains each field.
 *
 * Errors follow zmem.h: 0 or a negative errno.
 */
#ifndef ZMEM_STORE_H
#define ZMEM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <zmem/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Buckets of the compressed-size histogram: bucket i counts the pages in
 * the pool whose object is (i * page_size / 64, (i + 1) * page_size / 64]
 * bytes long.  Huge pages (stored raw) are page_size long: the last
 * bucket. */
#define ZM_STORE_HIST_BUCKETS 64

/* Most pages a store may have: a slot is the pool's owner word of its
 * index, and the pool has 2^29 keys (2 TiB of 4 KiB pages, 32 TiB of
 * 64 KiB pages). */
#define ZM_STORE_MAX_PAGES ((uint64_t)1 << 29) /* the pool's keys (ZM_POOL_MAX_KEYS) */

struct zm_store_config {
	uint64_t nr_pages;        /* slots (zram's disksize / page_size); > 0 */
	size_t page_size;         /* a power of two, ZM_PAGE_SIZE_MIN ..
				     ZM_PAGE_SIZE_MAX; 0 = 4096 */
	const char *codec;        /* codec name (codec.h), may carry ":LEVEL";
				     NULL = "lz4" */
	int codec_level;          /* 0 = the codec's default */
	const char *allocator;    /* pool backend (pool.h); NULL = "zsmalloc" */
	size_t limit_bytes;       /* memory limit; 0 = none.  Bounds the
				     pool's pages (backends with pages) and
				     the sum of the objects' sizes (every
				     backend) */
	bool no_same_filled;      /* true: store same-filled pages through
				     the codec and pool like any other */
	size_t huge_size;         /* compressed pages of this size or more
				     are stored raw; 0 = the default,
				     page_size * 31 / 32 (see docs/store.md);
				     at most page_size */
	size_t max_zsize;         /* reject pages compressing to more than
				     this; 0 = off (store raw instead) */
	size_t max_mean_zsize;    /* reject a page compressing to more than
				     this while the mean compressed size of
				     the pages in the pool is above it;
				     0 = off */

	/* Cold data (docs/tiering.md): all off by default. */
	const char *recompress_codec; /* secondary codec (name[:LEVEL]) for
				     zm_store_recompress; NULL = none */
	int recompress_level;     /* 0 = the codec's default */
	const char *backing_path; /* backing file for zm_store_writeback,
				     created if missing, its old content
				     dropped (truncated) at create, and
				     truncated again by zm_store_destroy;
				     NULL = none (see backing_fd).  In a
				     forked child the store is detached
				     from it: its pages on file read as
				     -EIO, writeback answers -EOPNOTSUPP,
				     and discards, puts and destroy leave
				     the file and its lock to the parent */
	int backing_fd;           /* > 0: an open (O_RDWR) file to use instead
				     of backing_path; the store does not close
				     it.  0 = none */
	uint64_t writeback_limit; /* pages that may ever be written to the
				     backing file (zram's writeback_limit);
				     0 = no limit */
	unsigned idle_after_ms;   /* automatic tiering: pages not accessed for
				     this long are recompressed with
				     recompress_codec by the process's
				     worker; 0 = only when asked */
	unsigned recompress_rate; /* automatic recompression's bound, pages a
				     second; 0 = ZM_STORE_RECOMPRESS_RATE */
	bool backing_readback;    /* a get of a written-back page brings it
				     back into memory when the limit allows
				     (the file's copy is dropped) */

	/* Multi-page units (docs/store.md): 0 or 1 = every page compressed
	 * on its own; 2 .. ZM_STORE_UNIT_MAX (a power of two): adjacent
	 * pages stored together (zm_store_put_range) may be kept as one
	 * compressed object of up to this many pages, aligned to a multiple
	 * of it, when that pays; unit_pages * page_size at most
	 * ZM_STORE_UNIT_MAX_BYTES */
	unsigned unit_pages;
	unsigned unit_min_saving; /* percent a unit must save over its pages
				     compressed alone to be kept; 0 = the
				     default, ZM_STORE_UNIT_MIN_SAVING */

	/* Cold data on another machine (docs/tiering.md): the backing store
	 * an NBD export instead of a file, a libnbd URI
	 * ("nbd://host:port/name", "nbd+unix:///name?socket=PATH"); not
	 * with backing_path or backing_fd.  Laid out as the file; its size
	 * is the room (at least nr_pages + 2 pages: -ENOSPC below).  If the
	 * export goes away, its pages read as -EIO and writeback stops (a
	 * put at the limit fails with -ENOSPC) until a reconnection, tried
	 * at most once a second; an export back without them (restarted
	 * empty) has lost them: they stay -EIO, counted in bd_lost.
	 * -EOPNOTSUPP when zmem was built without libnbd.  NULL = none */
	const char *backing_uri;
	/* The packed backing file's automatic cleaner (docs/tiering.md):
	 * once its blocks in use pass 1.2x the live bytes on it, pages are
	 * moved out of its sparsest blocks, at most this many bytes a
	 * second, until it is at 1.15x; 0 = off (zm_store_compact_file
	 * only).  ZM_STORE_CLEAN_RATE is a good value.  Nothing without a
	 * backing file, or with pages larger than 4 KiB (not packed). */
	uint64_t file_clean_rate;

	bool writeback_sync;      /* true: a put at the memory limit writes
				     pages back itself, as many as make room
				     for the next puts too; false (the
				     default): the store's writer thread
				     (started on first need) writes back
				     ahead of the limit and a put waits only
				     until there is room for its own page
				     (docs/tiering.md) */
};

/* Units: at most this many pages, and bytes before compression. */
#define ZM_STORE_UNIT_MAX 16u
#define ZM_STORE_UNIT_MAX_BYTES ((size_t)256 << 10)
/* Default share a unit must save to be kept, percent (docs/store.md). */
#define ZM_STORE_UNIT_MIN_SAVING 4u

/* A rate for the automatic cleaner, bytes a second: `zmem serve`'s
 * default.  A run moves about a block's bytes for each block it frees. */
#define ZM_STORE_CLEAN_RATE ((uint64_t)8 << 20)

/* Default bound of automatic recompression: pages a second (with zstd:3
 * on 4 KiB pages, about a fifth of a core). */
#define ZM_STORE_RECOMPRESS_RATE 8192u

struct zm_store_stats {
	/* zram's mm_stat, in its order (bytes unless said otherwise) */
	uint64_t orig_data_size;  /* pages stored * page_size, same-filled
				     pages included */
	uint64_t compr_data_size; /* sum of the objects' lengths in the pool
				     (compressed length; page_size if huge) */
	uint64_t mem_used_total;  /* memory the pool holds for objects
				     (pool.h pool_bytes) */
	uint64_t mem_limit;       /* limit_bytes (0: none) */
	uint64_t mem_used_max;    /* high-water mark of mem_used_total, as
				     sampled every ZM_STORE_SAMPLE_PUTS
				     puts of a thread stripe and at each
				     zm_store_stats(), or the pool's own
				     high-water mark if it keeps one */
	uint64_t same_pages;      /* pages kept in their slot (count) */
	uint64_t pages_compacted; /* pages freed by compaction (count) */
	uint64_t huge_pages;      /* pages stored raw (count) */
	uint64_t huge_pages_since;/* pages ever stored raw (count) */

	/* zram's io_stat */
	uint64_t failed_reads;    /* gets that failed: corrupt data (-EIO),
				     no memory for a map */
	uint64_t failed_writes;   /* puts that failed for any reason below
				     or a codec/pool error */
	/* policy */
	uint64_t reject_zsize;    /* puts refused by max_zsize */
	uint64_t reject_mean;     /* puts refused by max_mean_zsize */
	uint64_t limit_fails;     /* puts refused by the memory limit */

	/* more */
	uint64_t pages_stored;    /* slots holding a page (count) */
	uint64_t puts, gets, discards; /* calls; discards count pages */
	uint64_t pool_meta_bytes; /* the pool's metadata (pool.h meta_bytes) */
	uint64_t store_meta_bytes;/* the store's own: the written pages of
				     the slot array (8 bytes a slot) and of
				     the same-filled words, and the store's
				     struct with its counters */
	uint64_t pool_objects;    /* objects in the pool */
	uint64_t nr_pages;
	size_t page_size;
	uint64_t hist[ZM_STORE_HIST_BUCKETS]; /* pages in the pool by size */

	/* cold data: recompression */
	uint64_t recompressed_pages; /* pages ever re-encoded smaller with the
					secondary codec (count) */
	uint64_t recompress_saved;   /* bytes those re-encodings saved */
	uint64_t recompress_tried;   /* pages ever tried (count) */
	uint64_t secondary_pages;    /* pages in the pool encoded with the
					secondary codec now (count) */
	uint64_t incompressible_pages; /* huge pages the secondary codec could
					not shrink either (count, now) */
	/* zram's bd_stat, in pages */
	uint64_t bd_count;           /* pages on the backing file now */
	uint64_t bd_reads;           /* pages ever read from it */
	uint64_t bd_writes;          /* pages ever written to it */
	/* more */
	uint64_t bd_bytes;           /* bytes the pages on file take there */
	uint64_t writeback_failures; /* pages a write error or a full file
					kept in memory (count) */
	uint64_t writeback_left;     /* pages writeback_limit still allows
					(UINT64_MAX: no limit; 0 without a
					backing file) */
	uint64_t idle_pages;         /* pages idle at the last mark: for as long
					as zm_store_mark_idle asked, or the
					automatic tiering's idle_after_ms
					(count) */
	uint64_t pool_errors;        /* pool calls on a page's key that failed
					(count): a pool corrupted or its
					objects freed behind the store; each
					made its call fail with -EIO */
	/* units (docs/store.md); their pages are in pages_stored, their
	   bytes in compr_data_size, or once written back (docs/tiering.md)
	   in bd_bytes, with their pages in bd_count */
	uint64_t units;              /* units now, in memory or on file
					(count) */
	uint64_t unit_pages;         /* pages held in them (count) */
	uint64_t unit_bytes;         /* their compressed bytes */
	uint64_t unit_saved;         /* bytes they save over their pages
					compressed alone (as measured or
					estimated when each formed) */
	uint64_t units_formed;       /* units ever kept (count) */
	uint64_t units_declined;     /* units that did not pay: their pages
					were stored alone (count) */
	uint64_t unit_splits;        /* units rewritten as single pages once
					most of their pages were replaced
					or discarded (count) */
	uint64_t backing_cache_mode; /* how pages written back leave the page
					cache: ZM_STORE_CACHE_* (NONE also
					without a backing file) */
	/* the packed backing file (4 KiB pages; 0 for other sizes):
	   zm_store_compact_file keeps the first near the second */
	uint64_t file_alloc_bytes;   /* bytes of the file's blocks in use
					(the block being filled included) */
	uint64_t file_live_bytes;    /* bytes of the pages and units on it */
	uint64_t bd_lost;            /* pages on an NBD backing store that a
					restart of the export lost (count,
					ever): they read as -EIO */
	uint64_t file_clean_runs;    /* cleaner runs that moved pages, by
					zm_store_compact_file or automatic
					(file_clean_rate) (count) */
	uint64_t file_clean_bytes;   /* bytes they moved */
	/* the writer (docs/tiering.md, "At the memory limit") */
	uint64_t writeback_waits;    /* puts at the limit that waited for room
					(count) */
	uint64_t writeback_wait_ns;  /* the time they waited, in all */
	uint64_t writer_wakeups;     /* the writer's rounds (count) */
	uint64_t reclaim_pool_full;  /* puts that found the pool's pages full
					under the limit and reclaimed for room
					(count) */
	uint64_t reclaim_sync;       /* reclaims a put ran itself, not the
					writer (count) */
};

/* backing_cache_mode */
#define ZM_STORE_CACHE_NONE   0 /* they stay until the kernel reclaims them */
#define ZM_STORE_CACHE_DROP   1 /* flushed and dropped after each writeback
				   (sync_file_range + POSIX_FADV_DONTNEED),
				   as are the blocks each read pulls in */
#define ZM_STORE_CACHE_DIRECT 2 /* O_DIRECT: never cached */

/* mem_used_max is sampled every this many puts (per thread stripe):
 * reading the pool's totals takes each size class's lock. */
#define ZM_STORE_SAMPLE_PUTS 1024

struct zm_store;

/* Create a store: its codec and its pool (with its own pages).  Returns 0
 * and sets *out, or -EINVAL (cfg or out NULL, nr_pages 0 or above
 * ZM_STORE_MAX_PAGES, bad page size, huge_size above page_size, unknown
 * codec or allocator), -EOPNOTSUPP (a codec this build lacks), -EBUSY
 * (another store holds the backing file: each takes an exclusive flock
 * on it), an errno from opening or sizing it, -E2BIG
 * (a config with fields this library does not know set), -ENOMEM.
 * *out is NULL on failure.
 *
 * Cost: reserves address space only: the slot array (8 bytes a page, 8
 * MiB for 2^20 pages) and the same-filled words, and its pool's arena
 * (what the store could hold raw, capped by the limit and the machine's
 * memory, plus a quarter: 5 GiB for 2^20 pages of 4 KiB on a machine with
 * 4 GiB or more) with its records.  An empty store of 2^20 pages is about
 * 22 KiB resident (at most 64 KiB; docs/results/2026-12-04-empty-tmem.md).  Threads: none of its own (its pool's
 * compaction runs on the process's one worker; pool.h). */
ZM_API int zm_store_create_sized(const struct zm_store_config *cfg, size_t cfg_size,
				 struct zm_store **out);
#define zm_store_create(cfg, out) \
	zm_store_create_sized((cfg), sizeof(struct zm_store_config), (out))

/* Free every page and the store, truncating its backing file to nothing
 * and releasing its lock (a caller's backing_fd stays open); a forked
 * child's store leaves the file alone (backing_path).  Accepts NULL.
 * Destroying a store twice, or anything that is not a live store, is
 * undefined behaviour; ZM_DEBUG builds name the call and the pointer in
 * a message and return without touching it. */
ZM_API void zm_store_destroy(struct zm_store *store);

/* Store one page (page_size bytes) at index, replacing what was there.
 * Returns 0, or:
 *   -EINVAL  store or page NULL, index >= nr_pages
 *   -E2BIG   refused by max_zsize or max_mean_zsize
 *   -ENOSPC  the memory limit would be exceeded
 *   -ENOMEM  memory ran out (without a limit), or a per-thread buffer
 *            could not be had
 *   -EIO     the codec failed, or the pool refused to free the old
 *            object or bind the new one (counted in pool_errors)
 * On failure the slot keeps its previous content, but for one case: the
 * pool freed the old object and then refused to bind the new one (-EIO,
 * the slot is then empty). */
ZM_API int zm_store_put(struct zm_store *store, uint64_t index, const void *page);

/* Store count adjacent pages (count * page_size bytes from pages) at
 * index .. index + count - 1, as zm_store_put() would one by one, but
 * with the store's unit_pages set, runs of adjacent pages within one
 * aligned unit are compressed together and kept as one object when that
 * pays (docs/store.md).  Same-filled pages stay in their slots.  Returns
 * 0, or the first error as zm_store_put(); on failure each page holds
 * either its new content or its previous one. */
ZM_API int zm_store_put_range(struct zm_store *store, uint64_t index, uint64_t count,
			      const void *pages);

/* Copy the page at index into buf (page_size bytes).  Returns 0 (zeros
 * for an empty slot), -EINVAL (NULL argument, index >= nr_pages), -EIO
 * (the compressed data is corrupt, or reading it from the backing file
 * failed; buf's contents are then unspecified), -ENOMEM. */
ZM_API int zm_store_get(struct zm_store *store, uint64_t index, void *buf);

/* Copy count adjacent pages from index on into pages (count * page_size
 * bytes), as zm_store_get() would one by one, but the pages on the
 * backing file (or export) are read together: in the order they lie
 * there, each run of nearby blocks with one read (docs/tiering.md).
 * Every page is read even when one fails.  Returns 0, -EINVAL (NULL
 * argument, the range beyond nr_pages: nothing read), or the error of
 * the failing page with the lowest index as zm_store_get() (the failing
 * pages' bytes are then unspecified, the others' are right). */
ZM_API int zm_store_get_range(struct zm_store *store, uint64_t index, uint64_t count,
			      void *pages);

/* Empty count slots from index on (zram's discard / trim); their memory
 * goes back to the pool.  Returns 0, -EINVAL if the range goes beyond
 * nr_pages (nothing is discarded then), or -EIO if the pool refused to
 * free a page's object (that page stays, counted in pool_errors; the
 * others are discarded). */
ZM_API int zm_store_discard(struct zm_store *store, uint64_t index, uint64_t count);

/* Compact the pool (pool.h zm_pool_compact).  Returns pages freed, or
 * -EOPNOTSUPP for a backend that cannot compact. */
ZM_API long zm_store_compact(struct zm_store *store);

/* Change the memory limit at run time, as zram's mem_limit: 0 removes
 * it.  Puts from then on are refused (-ENOSPC) while the objects stored
 * would pass it; pages stored already stay.  A store created with a limit
 * sized its arena by it and its pool's pages stay bounded by it, so it
 * may only be lowered, or raised back up to it, there.  0, or -EINVAL
 * (store NULL; with a limit at create, 0 or more than that). */
ZM_API int zm_store_set_limit(struct zm_store *store, size_t bytes);

/* Start mem_used_max over from the memory used now (zram's mem_used_max
 * reset).  0 or -EINVAL. */
ZM_API int zm_store_reset_max(struct zm_store *store);

/* Fill *st.  Counters are read without stopping writers: each is exact,
 * their sum over a moment of concurrent puts may be slightly off. */
ZM_API int zm_store_stats_sized(struct zm_store *store, struct zm_store_stats *st, size_t st_size);
#define zm_store_stats(store, st) \
	zm_store_stats_sized((store), (st), sizeof(struct zm_store_stats))

/* Print the stats as zram's mm_stat: one line of nine numbers, in zram's
 * order (orig_data_size compr_data_size mem_used_total mem_limit
 * mem_used_max same_pages pages_compacted huge_pages huge_pages_since). */
ZM_API void zm_store_print_mm_stat_sized(const struct zm_store_stats *st, size_t st_size, FILE *f);
#define zm_store_print_mm_stat(st, f) \
	zm_store_print_mm_stat_sized((st), sizeof(struct zm_store_stats), (f))

/* Print the stats as a readable table, with the histogram. */
ZM_API void zm_store_print_stats_sized(const struct zm_store_stats *st, size_t st_size, FILE *f);
#define zm_store_print_stats(st, f) \
	zm_store_print_stats_sized((st), sizeof(struct zm_store_stats), (f))

/* The store's pool (for its statistics and class table), codec, and
 * geometry.  The pool and codec belong to the store. */
ZM_API struct zm_pool *zm_store_pool(struct zm_store *store);
ZM_API struct zm_codec *zm_store_codec(struct zm_store *store);
ZM_API size_t zm_store_page_size(const struct zm_store *store);
ZM_API uint64_t zm_store_nr_pages(const struct zm_store *store);

/* ---- cold data (docs/tiering.md) ----
 *
 * Idle tracking, zram's: zm_store_mark_idle() marks pages idle and any
 * access (put, get) of a page clears its mark.  The mark is one bit of
 * the slot, so the hot paths pay nothing for it; the age of an idle page
 * is known to the resolution of the marks (each mark also records, in a
 * byte beside the slot, at which mark a page was first found idle).
 *
 * Which pages a recompression or writeback takes, ZM_STORE_PICK_* or'ed
 * together, all of which a page must match (0: every page in the pool);
 * zram's words: idle, huge, huge_idle, incompressible. */
#define ZM_STORE_PICK_IDLE           1u /* marked idle, not accessed since */
#define ZM_STORE_PICK_HUGE           2u /* stored raw */
#define ZM_STORE_PICK_INCOMPRESSIBLE 4u /* huge, and the secondary codec
					   could not shrink it */

/* Mark idle every page in the pool that was not accessed for at least
 * min_age_ms milliseconds, as far as the marks before this one tell;
 * 0 marks every page (zram's `echo all > idle`).  Pages a later access
 * clears are not idle.  Returns the number of pages idle now, or -EINVAL. */
ZM_API long zm_store_mark_idle(struct zm_store *store, unsigned min_age_ms);

/* Re-encode up to max_pages pages matching which (0: any) with the
 * secondary codec, keeping each result only if it is smaller; a huge page
 * that stays huge is marked incompressible and not tried again.  No slot
 * lock is held while compressing: a page accessed meanwhile keeps its
 * new content.  Returns the pages re-encoded, or -EINVAL, -EOPNOTSUPP (no
 * recompress_codec), -EIO (none re-encoded, and the pool refused a swap:
 * pool_errors).  A unit (unit_pages) is re-encoded whole: the last one
 * taken may bring the count past max_pages, by less than a unit. */
ZM_API long zm_store_recompress(struct zm_store *store, unsigned which, uint64_t max_pages);

/* zm_store_recompress that another thread may end early (a server that
 * must stop, a client that gave up): the run ends before its next page
 * once *stop reads nonzero (read atomically; stop NULL: never), and
 * returns the pages re-encoded until then.  Errors as above. */
ZM_API long zm_store_recompress_stoppable(struct zm_store *store, unsigned which,
					  uint64_t max_pages, const int *stop);

/* Write up to max_pages pages matching which (0: any) back to the backing
 * file, freeing their memory; a get reads them from there.  Pages go to
 * the file as they are in the pool (compressed): 4 KiB pages packed into
 * the file's blocks, larger ones at their index's offset (docs/tiering.md).
 * A page whose write fails stays in memory and is counted in
 * writeback_failures; an I/O error on one page skips it, a full file
 * (ENOSPC, EDQUOT, EFBIG: all -ENOSPC) stops the writeback.  Returns the
 * pages written, or -EINVAL, -EOPNOTSUPP (no backing file), -EDQUOT
 * (writeback_limit spent, nothing written), -ENOSPC (the file full,
 * nothing written), -EIO (every write tried failed, or the pool refused
 * to free a page's object: pool_errors).  A unit (unit_pages) is written
 * back whole: the last one taken may bring the count past max_pages, by
 * less than a unit. */
ZM_API long zm_store_writeback(struct zm_store *store, unsigned which, uint64_t max_pages);

/* Write back the page at index (zram's page_index=).  0, or -EINVAL,
 * -EOPNOTSUPP, -EDQUOT, -ENOSPC, -EIO as above, -ENOENT (the page is not
 * in the pool: empty, same-filled or on file already). */
ZM_API int zm_store_writeback_page(struct zm_store *store, uint64_t index);

/* Clean the packed backing file (4 KiB pages): the pages in its blocks
 * held mostly by dead space are moved, sparsest blocks first, to the
 * block being filled, and the blocks they leave are punched, until the
 * blocks in use (file_alloc_bytes) are about 1.15x the live bytes on
 * it (file_live_bytes); a churn leaves it at 1.4-1.5x.  At most
 * max_bytes of pages are moved (0: no bound), so that a caller bounds
 * the rate; the next call goes on from there.  Units written back are
 * moved as pages are (a unit being read is left for the next call).
 * Gets, puts and discards run meanwhile; writebacks wait between
 * batches.  file_clean_rate runs the same automatically.  Returns the
 * bytes of the file freed (file_alloc_bytes before less after, 0 when
 * writebacks filled as many meanwhile), or -EINVAL, -EOPNOTSUPP (no
 * backing file), or the file's error (-EIO, -ENOSPC) when a move failed
 * and nothing was freed. */
ZM_API long zm_store_compact_file(struct zm_store *store, uint64_t max_bytes);

/* What a slot holds, for tests and tools: flags ZM_STORE_SLOT_* and, for a
 * page in the pool, its handle and object length; for a same-filled page,
 * the 8-byte word it is filled with in *handle (0 for a zero page); *handle
 * is 0 for an empty slot.  A pool page's handle is its slot's key handle
 * (pool.h, owner words): it names whatever object the slot holds when it
 * is used, not the one it held when asked.
 * The answer may be stale as soon as it is returned.  0 or -EINVAL. */
#define ZM_STORE_SLOT_EMPTY 0u
#define ZM_STORE_SLOT_SAME  1u  /* same-filled; no pool object */
#define ZM_STORE_SLOT_POOL  2u  /* compressed object in the pool */
#define ZM_STORE_SLOT_HUGE  3u  /* raw page in the pool */
#define ZM_STORE_SLOT_FILE  4u  /* written back; *handle is 0, *len its
				   bytes on the file */
#define ZM_STORE_SLOT_UNIT  5u  /* one page of a unit; *handle is 0, *len
				   the unit's compressed bytes */
ZM_API int zm_store_slot_info(struct zm_store *store, uint64_t index, unsigned *kind,
		       zm_handle_t *handle, size_t *len);

/* Where pages are stored: *next gets the first index in [from, end)
 * whose slot holds a page (any kind but ZM_STORE_SLOT_EMPTY), or end if
 * none does; end is capped at nr_pages.  For reporting allocation (NBD
 * block status) and copying only what is stored.  Stretches never
 * written cost nothing to skip, so a sparse store of any size answers in
 * microseconds; written ones cost a load a slot.  Takes no lock; the
 * answer may be stale as soon as it is returned.  0 or -EINVAL (store or
 * next NULL). */
ZM_API int zm_store_next_used(struct zm_store *store, uint64_t from, uint64_t end,
			      uint64_t *next);

/* Whole-structure checker: walks every slot and checks it against the
 * counters (pages, same, huge, compressed bytes, histogram) and the pool
 * (zm_pool_check).  0, or -EUCLEAN after printing what is wrong.  Call it
 * while no other thread uses the store (the automatic tiering's work on
 * the process's worker waits while it runs). */
ZM_API int zm_store_check(struct zm_store *store);

#ifdef __cplusplus
}
#endif
#endif
