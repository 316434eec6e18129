/*
 * workload: data to put in compressed memory, for tests and benchmarks.
 * Not part of libzmem: these calls live in libzmem-workload.a, a static
 * library of the build that the zmem command and the tests link beside
 * libzmem.a; nothing of it is installed (docs/api.md says why).
 *
 * Generated pages, reproducible from a seed:
 *
 *   zero     pages of zero bytes (zram's "same-filled" case).
 *   random   pages of random bytes followed by zeros, the random part sized
 *            so that each page compresses to about the requested ratio
 *            (ratio 1 = all random: incompressible).
 *   text     readable English-like text: words from a built-in vocabulary
 *            with a Zipf-like distribution, sentences, punctuation and
 *            paragraphs, tuned so that each page compresses to about the
 *            requested ratio with the given codec (xcfmalloc's 2011 "English
 *            text compressing to 75%" is ratio 0.75 with lzo).  The tuning knob
 *            mixes in repeated sentences (to compress better) or random
 *            "words" of letters and digits (to compress worse); each page
 *            is generated, compressed and regenerated with a corrected mix
 *            until it is within one percent of its target, and the
 *            targets are corrected by the error so far, so the mean ratio
 *            over many pages lands on the request.
 *
 * Ratios are compressed / original, per page, counting a page that does not
 * compress below its size as 1.  Reachable ranges depend on the codec: with
 * lz4 or lzo, text covers about 0.05 .. 1; with zstd (an entropy coder
 * squeezes even random letters) about 0.05 .. 0.78; random covers 0 .. 1.
 * A request outside the range gets the nearest reachable ratio (see the
 * ratio in struct workload_stats).
 *
 * Captured pages: the private writable memory of a live process (heap,
 * anonymous mappings, stack, the writable data of its libraries), read
 * through process_vm_readv() or /proc/PID/mem.  Reading another process
 * needs ptrace rights over it (the same user and a permissive
 * kernel.yama.ptrace_scope, or CAP_SYS_PTRACE).
 *
 * Errors follow zmem.h.  Generators are not thread-safe (use one per
 * thread); capture functions are.
 */
#ifndef ZM_WORKLOAD_H
#define ZM_WORKLOAD_H

#include <stddef.h>

#include <zmem/common.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct zm_codec;

enum workload_kind {
	WORKLOAD_ZERO,
	WORKLOAD_RANDOM,
	WORKLOAD_TEXT,
};

/* Page sizes a generator accepts: 256 B .. 1 MiB, any multiple of 64. */
#define WORKLOAD_MIN_PAGE 256
#define WORKLOAD_MAX_PAGE (1u << 20)

struct workload_config {
	enum workload_kind kind;
	double ratio;            /* target, in (0, 1]; 0 = default (text 0.75,
	                            random 1); ignored for zero */
	struct zm_codec *codec;  /* measures the ratio; NULL = an internal
	                            "lz4".  Not owned; must outlive the
	                            generator */
	uint64_t seed;           /* same seed, config and codec: same bytes */
	size_t page_size;        /* 0 = 4096 */
};

struct workload_stats {
	size_t pages;
	uint64_t orig_bytes;
	uint64_t compr_bytes;    /* sum over pages of the compressed length,
	                            page_size for a page that did not fit */
	size_t huge_pages;       /* pages that did not compress below page_size */
	double ratio;            /* compr_bytes / orig_bytes (0 if no pages) */
	uint64_t compress_calls; /* compressions spent on tuning and measuring */
};

struct workload;

/* Parse "zero", "random" or "text".  0, or -EINVAL. */
int workload_kind_parse(const char *name, enum workload_kind *kind);
/* The name of a kind, or NULL. */
const char *workload_kind_name(enum workload_kind kind);

/* Create a generator of an endless stream of pages.  Returns 0 and sets
 * *out, or -EINVAL (bad kind, ratio or page size, out == NULL), -ENOMEM,
 * or the error of creating the default codec. */
int workload_create_sized(const struct workload_config *cfg, size_t cfg_size,
			  struct workload **out);
#define workload_create(cfg, out) \
	workload_create_sized((cfg), sizeof(struct workload_config), (out))

/* Accepts NULL. */
void workload_destroy(struct workload *w);

/* Write the next len / page_size pages of the stream into buf.  The
 * stream does not depend on how it is cut into calls.  Returns 0, -EINVAL
 * (len not a multiple of the page size, buf NULL), or the codec's error. */
int workload_next(struct workload *w, void *buf, size_t len);

/* Totals over every page generated so far.  0, or -EINVAL (NULL w or st). */
int workload_stats_sized(const struct workload *w, struct workload_stats *st,
			 size_t st_size);
#define workload_stats(w, st) \
	workload_stats_sized((w), (st), sizeof(struct workload_stats))

/* One call: create a generator, fill buf (len a multiple of page_size),
 * report its stats into *st (may be NULL), destroy it.  codec may be NULL
 * (lz4).  Returns as workload_create() and workload_next(). */
int workload_fill_sized(enum workload_kind kind, double ratio,
			struct zm_codec *codec, uint64_t seed, void *buf, size_t len,
			size_t page_size, struct workload_stats *st, size_t st_size);
#define workload_fill(kind, ratio, codec, seed, buf, len, page_size, st) \
	workload_fill_sized((kind), (ratio), (codec), (seed), (buf), (len), (page_size), \
			    (st), sizeof(struct workload_stats))

/* ---- capture -------------------------------------------------------- */

/* Mappings larger than this are taken for address-space reservations
 * (sanitizer shadow memory, garbage-collected heaps' reserves) and skipped
 * whole: scanning 1 TiB of page tables would take minutes. */
#define WORKLOAD_CAPTURE_MAX_REGION ((uint64_t)256 << 30)

struct workload_capture_stats {
	size_t page_size;        /* the system's page size */
	size_t regions;          /* private writable mappings captured */
	size_t regions_skipped;  /* larger than WORKLOAD_CAPTURE_MAX_REGION */
	size_t pages;            /* pages handed to the callback */
	size_t unreadable;       /* present pages that could not be read */
	size_t unpopulated;      /* never-touched pages, not copied */
	int limited;             /* stopped at max_bytes */
};

/* Called with each captured page, in address order; a non-zero return
 * stops the capture and is returned by workload_capture(). */
typedef int (*workload_capture_fn)(void *arg, const void *page, size_t page_size);

/* Capture the private writable memory of process pid (getpid() works): for
 * each mapping of /proc/PID/maps that is private and writable (skipping
 * [vvar], [vsyscall] and shared mappings), each page that is resident or
 * swapped (from /proc/PID/pagemap; every page if pagemap is unreadable) is
 * copied and passed to fn.  Stops after max_bytes (0 = no limit).  Pages
 * that vanish or cannot be read are skipped and counted.  st may be NULL.
 * Returns 0, -ESRCH (no such process), -EPERM (no right to read its
 * memory), -EINVAL, -ENOMEM, another negative errno from reading /proc, or
 * fn's non-zero return. */
int workload_capture_sized(pid_t pid, size_t max_bytes, workload_capture_fn fn, void *arg,
			   struct workload_capture_stats *st, size_t st_size);
#define workload_capture(pid, max_bytes, fn, arg, st) \
	workload_capture_sized((pid), (max_bytes), (fn), (arg), (st), \
			       sizeof(struct workload_capture_stats))

/* The same into one malloc'ed buffer: *buf (caller frees with free()) gets
 * *len bytes, a whole number of pages.  On error *buf is NULL. */
int workload_capture_mem_sized(pid_t pid, size_t max_bytes, void **buf, size_t *len,
			       struct workload_capture_stats *st, size_t st_size);
#define workload_capture_mem(pid, max_bytes, buf, len, st) \
	workload_capture_mem_sized((pid), (max_bytes), (buf), (len), (st), \
				   sizeof(struct workload_capture_stats))

#ifdef __cplusplus
}
#endif
#endif
