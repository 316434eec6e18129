/* zmem bench: what its files share (bench.c drives; bench_data.c makes the
 * data sets; bench_child.c is the spawned workload; bench_kernel.c drives
 * the kernel's zram; bench_svg.c draws the plot; bench_2011.c measures
 * xcfmalloc's 2011 table again). */
#ifndef ZM_BENCH_BENCH_H
#define ZM_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmem/store.h>

#define BENCH_MAX_DATA 16
#define BENCH_MAX_ROWS 64
#define BENCH_NAME 64

/* One data set: pages in memory. */
struct bench_data {
	char name[BENCH_NAME];     /* as given: "zero", "text:0.75", ... */
	uint8_t *buf;              /* malloc'ed, len bytes */
	size_t len;                /* a whole number of pages */
	char note[160];            /* how it was made, for the report */
};

/* One line of the table: a data set through one allocator (or the
 * kernel's zram). */
struct bench_row {
	char allocator[32];
	char codec[32];
	char data[BENCH_NAME];
	bool kernel;               /* the kernel's zram: meta_bytes unknown */
	bool verified;             /* every page read back equal */
	uint64_t pages, same_pages, huge_pages;
	uint64_t orig_bytes, compr_bytes, pool_bytes, pool_pages, meta_bytes;
	double fill_MBps;                   /* --threads threads: puts into the
					       empty store */
	double put_MBps, get_MBps;          /* puts over stored pages, gets */
	double codec_put_MBps, codec_get_MBps;
	/* the bare codec writing into memory never touched, packed: the
	 * fastest a fill can be on this machine (its page faults) */
	double codec_fresh_MBps;
	double fill1_MBps, put1_MBps, get1_MBps; /* one thread (threads > 1) */
	double codec_put1_MBps, codec_get1_MBps;
	/* medians of per-run ratios: store time / codec time - 1, and
	 * threads / one thread */
	double put_cost, get_cost, fill_cost;
	/* each slot given the page two after it, after a round with the
	 * next page (--threads threads): MB/s, and its time / the codec's
	 * - 1 */
	double reput_MBps, reput_cost;
	double fresh_cost;         /* the codec into fresh memory / the codec - 1 */
	double fill_vs_fresh;      /* fill / the codec into fresh memory - 1 */
	double put_scale, get_scale, fill_scale, codec_put_scale, codec_get_scale;
	uint64_t mm_stat[9];
	uint64_t hist[ZM_STORE_HIST_BUCKETS];
};

/* bench_data.c: fill d from a spec ("zero", "text:R", "random",
 * "file:PATH", "capture:PID", "memory"); 0 or -1 after a message. */
int bench_data_make(const char *spec, size_t size, size_t page_size,
		    const char *codec, struct bench_data *d);
void bench_data_free(struct bench_data *d);
/* Whether spec names a data set, before any is made: 0, or CLI_USAGE
 * after a one-line message (an unknown kind, a bad ratio or PID). */
int bench_data_check(const char *spec);

/* bench_child.c: the realistic workload.  bench_memory() spawns it,
 * captures its memory (size bytes at most) and stops it; the child side
 * runs as "zmem bench --memory-child SIZE". */
int bench_memory(size_t size, size_t page_size, struct bench_data *d);
int bench_memory_child(size_t size);

/* bench_kernel.c: run d through /dev/zram0 if that is safe; fills row and
 * returns 0, or returns -1 with the reason in why. */
int bench_kernel(const struct bench_data *d, size_t page_size, const char *codec,
		 struct bench_row *row, char *why, size_t why_len);
/* ... and the small file (a sysfs or cgroup attribute) at path into buf,
 * NUL-terminated: 0 or -errno. */
int bench_file_read(const char *path, char *buf, size_t cap);

/* bench_svg.c: write the plot; 0 or -errno. */
int bench_svg(const char *path, const struct bench_row *rows, size_t nrows,
	      const char *codec, size_t page_size);

/* bench_2011.c: zmem bench --compare-2011, size bytes of each data set
 * (BENCH_2011_SIZE unless given), codec NULL = lzo if built, else lz4;
 * wide: the table's columns past 80 too; the exit status. */
#define BENCH_2011_SIZE ((size_t)512 << 20)
int bench_2011_table(size_t size, const char *codec, const char *const *alloc,
		     size_t nalloc, int json, int wide);

/* bench_units.c: zmem bench --unit-pages, the store's multi-page units
 * side by side with pages alone. */
#define BENCH_MAX_UNITS 5
struct bench_units {
	const char *codec;
	size_t size, page_size, huge_size;
	int reps, no_same;
	int wide;                          /* every column of the table */
	const char *const *alloc;
	size_t nalloc;
	unsigned units[BENCH_MAX_UNITS];  /* unit_pages, as listed */
	size_t nunits;
};

/* One data set through one allocator at one unit size. */
struct bench_unit_row {
	char data[BENCH_NAME];
	char allocator[32];
	char codec[32];
	unsigned unit_pages;
	bool verified;
	uint64_t pages, same_pages, huge_pages;
	uint64_t orig_bytes, compr_bytes, mem_used, meta_bytes;
	uint64_t units, unit_pages_held, unit_bytes, unit_saved, units_formed, units_declined;
	double fill_MBps, put_MBps;           /* put_range: empty store, again;
						 per CPU second of the thread */
	double read_p50_ns, read_p99_ns;      /* one random page's get, wall */
	double read_MBps;                     /* over the random trace, CPU */
	double fill_wall_MBps, put_wall_MBps, read_wall_MBps;  /* wall clock */
};

/* Run d through a store per allocator and unit size (nalloc * nunits
 * rows, allocator-major); 0 or -1 after a message. */
int bench_units_one(const struct bench_units *u, const struct bench_data *d,
		    struct bench_unit_row *rows);
void bench_units_print(const struct bench_units *u, const struct bench_unit_row *rows, size_t n,
		       bool json);

#endif
