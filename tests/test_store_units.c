/*
 * Tests of the store's multi-page units (unit_pages, zm_store_put_range):
 *
 *   - a model test: random put_range, single puts and discards cutting
 *     through units, gets, compaction, against a reference copy of every
 *     page, for 4 and 16 pages a unit, lz4 and zstd, with and without a
 *     memory limit (under the limit a put may fail, and then every page
 *     holds its new content or its old one), and with the cold path
 *     (marks, recompression, writeback, readback) among its steps;
 *   - units form where they pay and save memory; a unit that does not pay
 *     (incompressible data, a high unit_min_saving) is stored as pages and
 *     never takes more memory than pages alone;
 *   - a corrupted unit gives -EIO for its own pages and no other, in
 *     memory and on the backing file;
 *   - pages leaving a unit: it is rewritten as single pages once half of
 *     it has left, its memory freed when the last one leaves;
 *   - threads on neighbouring pages of the same units, each page holding a
 *     cookie that names its writer, slot and version;
 *   - bad input; larger pages; stores shorter than a unit; idle marking,
 *     recompression and writeback of units, by hand, automatic and at
 *     the memory limit.
 *
 * After each phase the counters are checked against a walk of the slots
 * and of the units (zmi_store_unit_chunks), and zm_store_check() must pass.
 *
 *   test_store_units [--seed N] [--steps N]
 */
#include <errno.h>
#include <pthread.h>

#include "store/store_internal.h"  /* first: the advanced tier of the headers */
#include "storetest.h"
#include "testutil.h"
#include <zmem/codec.h>
#include "workload/workload.h"

#define PS 4096
#define ALL UINT64_MAX
#define MAX_CHUNKS 64   /* a unit of 16 pages in chunks of at most a page,
			   with room to spare */

static uint64_t g_seed;
static long g_steps = 3000;

#define CHECK(s) assert_int_equal(zm_store_check(s), 0)

/* The pool handles of the chunks of the unit page idx belongs to: how
 * many, or -ENOENT (not a unit's page); store_internal.h's seam. */
static long unit_chunks(struct zm_store *s, uint64_t idx, zm_handle_t *h, unsigned max)
{
	return zmi_store_unit_chunks(s, idx, h, max);
}

/* ---- pages -------------------------------------------------------------- */

/* Names of a heap's strings, 8 bytes each. */
static const char g_names[16][8] = {
	"malloc", "buffer", "struct", "node", "list", "entry", "key", "value",
	"string", "vector", "map", "tree", "alloc", "hash", "page", "cache",
};

/* A page like a process heap's: 32-byte records (a pointer into the heap,
 * a vtable, a small counter, a name) drawn from 1024 objects of a region
 * of 16 pages, so that neighbouring pages share much of their content:
 * with this data a unit of 4 pages is about 9% (lz4) and 19% (zstd)
 * smaller than its pages compressed alone. */
static void heap_page(uint8_t *p, uint64_t seed)
{
	uint64_t base = 0x00005555a0000000ull + (seed / 16) * 0x100000;
	struct rng r;

	rng_seed(&r, seed);
	for (size_t i = 0; i < PS / 32; i++) {
		uint64_t o = rng_below(&r, 1024), rec[4];

		rec[0] = base + mix64(o) % 8192 * 32;
		rec[1] = 0x00007f3a12345000ull + 16 * (mix64(o + 1) % 6);
		rec[2] = (mix64(o + 2) % 100) | (rng_below(&r, 4) << 32);
		memcpy(&rec[3], g_names[mix64(o + 3) % 16], 8);
		memcpy(p + i * 32, rec, 32);
	}
}

static uint8_t *heap_pages(size_t n, uint64_t seed)
{
	uint8_t *b = malloc(n * PS);

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		heap_page(b + i * PS, seed + i);
	return b;
}

/* n pages of text compressing to about ratio each (lz4) */
static uint8_t *text_pages(size_t n, double ratio, uint64_t seed)
{
	uint8_t *b = malloc(n * PS);

	assert_non_null(b);
	assert_int_equal(workload_fill(WORKLOAD_TEXT, ratio, NULL, seed, b, n * PS, PS,
				       NULL), 0);
	return b;
}

static void random_page(uint8_t *p, uint64_t seed)
{
	for (size_t i = 0; i < PS / 8; i++) {
		uint64_t w = mix64(seed * 0x10001 + i);

		memcpy(p + i * 8, &w, 8);
	}
}

static uint8_t *random_pages(size_t n, uint64_t seed)
{
	uint8_t *b = malloc(n * PS);

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		random_page(b + i * PS, seed + i);
	return b;
}

static void same_page(uint8_t *p, uint64_t w)
{
	for (size_t i = 0; i < PS / 8; i++)
		memcpy(p + i * 8, &w, 8);
}

/* ---- store helpers ------------------------------------------------------ */

static void expect_page(struct zm_store *s, uint64_t idx, const void *want)
{
	uint8_t out[PS];
	int rc = zm_store_get(s, idx, out);

	if (rc || memcmp(out, want, PS))
		fail_msg("page %llu: get %d, %s (slot kind %u)", (unsigned long long)idx, rc,
			 rc ? "failed" : "not its content", kind_of(s, idx));
}

static void expect_all(struct zm_store *s, const uint8_t *data, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		expect_page(s, i, data + i * PS);
}

static struct zm_store *mk(const char *codec, unsigned unit_pages, uint64_t n)
{
	struct zm_store_config c = { .codec = codec, .unit_pages = unit_pages };

	return test_store_mk(&c, n);
}

/* A fresh, empty file in TMPDIR for a backing file. */
static void tmp_file(char *path, size_t size)
{
	const char *d = getenv("TMPDIR");
	int fd;

	snprintf(path, size, "%s/zmem-units-XXXXXX", d && *d ? d : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
}

/* What a walk of the slots and of the units finds. */
struct walk {
	uint64_t empty, same, pool, huge, unit, file;  /* slots of each kind */
	uint64_t pool_bytes;    /* lengths of the POOL and HUGE slots */
	uint64_t file_bytes;    /* lengths of the FILE slots */
	uint64_t units;         /* distinct units, in memory or on file */
	uint64_t unit_bytes;    /* their compressed bytes (slot_info's len) */
	uint64_t chunks;        /* the chunks in the pool of those in memory */
	uint64_t file_units;    /* units on the backing file */
	uint64_t file_unit_pages, file_unit_bytes;  /* their pages and bytes */
	uint64_t small_units;   /* units of a single page */
};

/* Walk every slot of the store: every UNIT slot's unit (its record, as
 * the slot names it) must lie in one aligned group of unit_pages pages
 * and have one compressed length; one in memory (zmi_store_unit_chunks > 0)
 * holds that length in chunks of at most a page, one on file has none
 * in the pool. */
static struct walk walk(struct zm_store *s, unsigned unit_pages)
{
	uint64_t n = zm_store_nr_pages(s);
	struct walk w = { 0 };
	const void **rec = calloc(n, sizeof(*rec));
	uint64_t *group = calloc(n, sizeof(*group)), *members = calloc(n, sizeof(*members));
	size_t *lens = calloc(n, sizeof(*lens));
	bool *on_file = calloc(n, sizeof(*on_file));

	assert_true(rec && group && members && lens && on_file);
	for (uint64_t i = 0; i < n; i++) {
		zm_handle_t h[MAX_CHUNKS], sh = 1;
		const void *r;
		unsigned kind;
		size_t len;
		long nc;
		uint64_t u;

		assert_int_equal(zm_store_slot_info(s, i, &kind, &sh, &len), 0);
		switch (kind) {
		case ZM_STORE_SLOT_EMPTY: w.empty++; continue;
		case ZM_STORE_SLOT_SAME: w.same++; continue;
		case ZM_STORE_SLOT_POOL: w.pool++; w.pool_bytes += len; continue;
		case ZM_STORE_SLOT_HUGE: w.huge++; w.pool_bytes += len; continue;
		case ZM_STORE_SLOT_FILE: w.file++; w.file_bytes += len; continue;
		case ZM_STORE_SLOT_UNIT: w.unit++; assert_int_equal(sh, 0); break;
		default: fail_msg("slot %llu: kind %u", (unsigned long long)i, kind);
		}
		assert_true(unit_pages > 1);
		nc = unit_chunks(s, i, h, MAX_CHUNKS);
		if (nc < 0)
			fail_msg("slot %llu is a unit's page, zmi_store_unit_chunks: %ld",
				 (unsigned long long)i, nc);
		assert_true(nc <= MAX_CHUNKS);
		r = zmi_store_slot_unit(s, i); /* no one else uses the store */
		for (u = 0; u < w.units; u++)
			if (rec[u] == r)
				break;
		if (u == w.units) {     /* a unit seen for the first time */
			size_t room = 0;

			rec[u] = r;
			group[u] = i / unit_pages;
			lens[u] = len;
			on_file[u] = nc == 0;
			w.units++;
			w.unit_bytes += len;
			w.chunks += (uint64_t)nc;
			w.file_units += nc == 0;
			w.file_unit_bytes += nc == 0 ? len : 0;
			for (long k = 0; k < nc; k++) {
				size_t sz = zm_pool_obj_size(zm_store_pool(s), h[k]);

				assert_true(sz > 0 && sz <= zm_store_page_size(s));
				room += sz;
			}
			if (nc && room < len)
				fail_msg("unit of slot %llu: %zu bytes in %ld chunks of %zu bytes",
					 (unsigned long long)i, len, nc, room);
		}
		if (group[u] != i / unit_pages || lens[u] != len || on_file[u] != (nc == 0))
			fail_msg("slot %llu: its unit (%p) is in group %llu, %zu bytes%s; the "
				 "slot says group %llu, %zu bytes%s", (unsigned long long)i, r,
				 (unsigned long long)group[u], lens[u],
				 on_file[u] ? " on file" : "",
				 (unsigned long long)(i / unit_pages), len, nc ? "" : " on file");
		w.file_unit_pages += nc == 0;
		members[u]++;
	}
	for (uint64_t u = 0; u < w.units; u++)
		w.small_units += members[u] < 2;
	free(rec), free(group), free(members), free(lens), free(on_file);
	return w;
}

/* The checker, and the counters against a walk.  split_done: every unit
 * must have two pages or more (a unit is rewritten as pages once half
 * of it left, so one with a single page left is one whose rewrite
 * failed: under a memory limit, when the unit is corrupt, or on file,
 * where units are never split). */
static struct walk consistent(struct zm_store *s, unsigned unit_pages, bool split_done)
{
	struct zm_store_stats st;
	uint64_t hist = 0;
	struct walk w;

	CHECK(s);
	st = stats(s);
	w = walk(s, unit_pages);
	assert_int_equal(st.pages_stored, w.same + w.pool + w.huge + w.unit + w.file);
	assert_int_equal(st.orig_data_size, st.pages_stored * zm_store_page_size(s));
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++)
		hist += st.hist[b];
	assert_int_equal(hist, w.pool + w.huge);   /* single pages only */
	if (!st.units)
		assert_int_equal(st.unit_saved, 0);
	assert_int_equal(st.same_pages, w.same);
	assert_int_equal(st.huge_pages, w.huge);
	assert_int_equal(st.unit_pages, w.unit);
	assert_int_equal(st.units, w.units);
	assert_int_equal(st.unit_bytes, w.unit_bytes);
	assert_int_equal(st.compr_data_size, w.pool_bytes + w.unit_bytes - w.file_unit_bytes);
	assert_int_equal(st.pool_objects, w.pool + w.huge + w.chunks);
	assert_int_equal(st.bd_count, w.file + w.file_unit_pages);
	assert_int_equal(st.bd_bytes, w.file_bytes + w.file_unit_bytes);
	assert_true(st.units_formed >= st.units);
	assert_true(st.unit_pages >= 2 * st.units || !split_done || w.file_units);
	if (split_done && !w.file_units && w.small_units)
		fail_msg("%llu units of a single page", (unsigned long long)w.small_units);
	if (unit_pages <= 1)
		assert_int_equal(st.units_formed + st.units_declined + st.unit_splits, 0);
	return w;
}

/* ---- bad input ---------------------------------------------------------- */

static void test_bad_input(void **state)
{
	struct zm_store_config c = { .nr_pages = 64 };
	struct zm_store *s = (void *)1;
	uint8_t *text = text_pages(8, 0.5, 1);
	static const unsigned bad_units[] = { 3, 5, 12, 32, 64, 1u << 31 };

	for (size_t i = 0; i < sizeof(bad_units) / sizeof(bad_units[0]); i++) {
		c.unit_pages = bad_units[i];
		assert_int_equal(zm_store_create(&c, &s), -EINVAL);
		assert_null(s);
	}
	c.unit_pages = 4;
	c.unit_min_saving = 100;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.unit_min_saving = 1000;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.unit_min_saving = 99;
	assert_int_equal(zm_store_create(&c, &s), 0);
	zm_store_destroy(s);
	c.unit_min_saving = 0;
	/* 16 pages of 64 KiB are 1 MiB, above ZM_STORE_UNIT_MAX_BYTES;
	 * 4 of 64 KiB, 16 of 16 KiB are at it */
	c.page_size = 65536;
	c.unit_pages = 16;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.unit_pages = 8;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.unit_pages = 4;
	assert_int_equal(zm_store_create(&c, &s), 0);
	zm_store_destroy(s);
	c.page_size = 16384;
	c.unit_pages = 16;
	assert_int_equal(zm_store_create(&c, &s), 0);
	zm_store_destroy(s);
	c.page_size = 0;
	for (unsigned u = 0; u <= 16; u = u ? u * 2 : 1) {
		c.unit_pages = u;
		assert_int_equal(zm_store_create(&c, &s), 0);
		zm_store_destroy(s);
	}

	/* put_range's bad ranges change nothing */
	c.unit_pages = 4;
	s = test_store_mk(&c, 64);
	assert_int_equal(zm_store_put_range(s, 0, 8, text), 0);
	assert_int_equal(zm_store_put_range(s, 60, 5, text), -EINVAL);
	assert_int_equal(zm_store_put_range(s, 64, 1, text), -EINVAL);
	assert_int_equal(zm_store_put_range(s, 65, 0, text), -EINVAL);
	assert_int_equal(zm_store_put_range(s, 1, UINT64_MAX, text), -EINVAL);
	assert_int_equal(zm_store_put_range(s, UINT64_MAX, 2, text), -EINVAL);
	assert_int_equal(zm_store_put_range(s, 0, 1, NULL), -EINVAL);
	assert_int_equal(zm_store_put_range(NULL, 0, 1, text), -EINVAL);
	/* count 0: nothing to do, anywhere up to the end */
	assert_int_equal(zm_store_put_range(s, 0, 0, text), 0);
	assert_int_equal(zm_store_put_range(s, 64, 0, text), 0);
	assert_int_equal(zm_store_put_range(s, 3, 0, NULL), 0);
	expect_all(s, text, 8);
	assert_int_equal(stats(s).pages_stored, 8);
	assert_int_equal(stats(s).failed_writes, 0);
	consistent(s, 4, true);
	zm_store_destroy(s);
	free(text);
}

/* ---- units form and pay ------------------------------------------------- */

/* 256 pages: text, then heap records, every 8th page zero. */
enum { PAY_N = 256 };

static uint8_t *pay_data(void)
{
	uint8_t *b = malloc(PAY_N * PS), *t = text_pages(PAY_N / 2, 0.5, 3);
	uint8_t *h = heap_pages(PAY_N / 2, 1000);

	assert_non_null(b);
	memcpy(b, t, PAY_N / 2 * PS);
	memcpy(b + PAY_N / 2 * PS, h, PAY_N / 2 * PS);
	for (size_t i = 0; i < PAY_N; i += 8)
		memset(b + i * PS, 0, PS);
	free(t), free(h);
	return b;
}

static void test_units_pay(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	static const unsigned units[] = { 1, 4, 16 };
	uint8_t *data = pay_data();

	for (int c = 0; c < 2; c++) {
		uint64_t compr[3];

		for (int k = 0; k < 3; k++) {
			struct zm_store *s = mk(codecs[c], units[k], PAY_N + 16);
			struct zm_store_stats st;
			struct walk w;

			assert_int_equal(zm_store_put_range(s, 0, PAY_N, data), 0);
			expect_all(s, data, PAY_N);
			w = consistent(s, units[k], true);
			st = stats(s);
			compr[k] = st.compr_data_size;
			assert_int_equal(st.pages_stored, PAY_N);
			assert_int_equal(st.same_pages, PAY_N / 8);
			assert_int_equal(st.orig_data_size, (uint64_t)PAY_N * PS);
			assert_int_equal(st.failed_writes + st.failed_reads, 0);
			assert_int_equal(st.puts, PAY_N);   /* puts count pages */
			printf("%-4s unit_pages %2u: compr %7llu (%5.1f%%) pool %7llu, "
			       "%llu units of %llu pages, %llu bytes, saved %llu, "
			       "%llu declined\n", codecs[c], units[k],
			       (unsigned long long)st.compr_data_size,
			       100.0 * (double)st.compr_data_size / (PAY_N * PS),
			       (unsigned long long)st.mem_used_total,
			       (unsigned long long)st.units, (unsigned long long)st.unit_pages,
			       (unsigned long long)st.unit_bytes,
			       (unsigned long long)st.unit_saved,
			       (unsigned long long)st.units_declined);
			if (units[k] > 1) {
				assert_true(st.units > 0);
				assert_int_equal(st.units_formed, st.units);
				assert_true(st.unit_pages >= 2 * st.units);
				assert_true(st.unit_saved > 0);
				assert_true(st.unit_bytes < st.unit_pages * PS);
				/* zero pages stay in their slots */
				for (uint64_t i = 0; i < PAY_N; i += 8)
					assert_int_equal(kind_of(s, i), ZM_STORE_SLOT_SAME);
				assert_true(w.unit + w.same + w.pool + w.huge == PAY_N);
				assert_true(compr[k] < compr[0]);
			}
			/* everything discarded: nothing left anywhere */
			assert_int_equal(zm_store_discard(s, 0, PAY_N), 0);
			st = stats(s);
			assert_int_equal(st.units + st.unit_pages + st.unit_bytes, 0);
			assert_int_equal(st.compr_data_size + st.pool_objects + st.pages_stored, 0);
			consistent(s, units[k], true);
			zm_store_destroy(s);
		}
		/* the data's measured gains: 9-12% (lz4) and 19-27% (zstd) of
		 * its pages compressed alone, less what the store gives away */
		assert_true(compr[1] <= compr[0] * 95 / 100);
		assert_true(compr[2] <= compr[1]);
		if (!strcmp(codecs[c], "zstd"))
			assert_true(compr[2] <= compr[0] * 85 / 100);
	}
	free(data);
}

/* unit_min_saving decides: units of text saving 10-15% are kept at 1%
 * and declined at 50%. */
static void test_min_saving(void **state)
{
	enum { N = 64 };
	uint8_t *text = text_pages(N, 0.5, 4);
	struct zm_store_config c = { .unit_pages = 4, .unit_min_saving = 50 };
	struct zm_store *s = test_store_mk(&c, N);
	struct zm_store_stats st;

	assert_int_equal(zm_store_put_range(s, 0, N, text), 0);
	st = stats(s);
	assert_int_equal(st.units, 0);
	assert_int_equal(st.units_formed, 0);
	/* (after a few in a row, a thread tries fewer groups) */
	assert_true(st.units_declined > 0 && st.units_declined <= N / 4);
	expect_all(s, text, N);
	consistent(s, 4, true);
	zm_store_destroy(s);

	c.unit_min_saving = 1;
	s = test_store_mk(&c, N);
	assert_int_equal(zm_store_put_range(s, 0, N, text), 0);
	st = stats(s);
	assert_int_equal(st.units, N / 4);
	assert_int_equal(st.unit_pages, N);
	assert_int_equal(st.units_declined, 0);
	expect_all(s, text, N);
	consistent(s, 4, true);
	zm_store_destroy(s);
	free(text);
}

/* ---- units that do not pay ---------------------------------------------- */

static void test_no_pay_random(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	enum { N = 64 };
	uint8_t *rnd = random_pages(N, 5);

	for (int c = 0; c < 2; c++) {
		struct zm_store *s1 = mk(codecs[c], 1, N);
		struct zm_store_stats st1;

		assert_int_equal(zm_store_put_range(s1, 0, N, rnd), 0);
		st1 = stats(s1);
		for (unsigned u = 4; u <= 16; u *= 4) {
			struct zm_store *s;
			struct zm_store_stats st;

			s = mk(codecs[c], u, N);
			assert_int_equal(zm_store_put_range(s, 0, N, rnd), 0);
			st = stats(s);
			assert_int_equal(st.units, 0);
			assert_int_equal(st.units_formed, 0);
			assert_true(st.units_declined > 0 && st.units_declined <= N / u);
			assert_int_equal(st.huge_pages, N);
			assert_int_equal(st.compr_data_size, st1.compr_data_size);
			assert_true(st.mem_used_total <= st1.mem_used_total);
			for (uint64_t i = 0; i < N; i++)
				assert_int_equal(kind_of(s, i), ZM_STORE_SLOT_HUGE);
			expect_all(s, rnd, N);
			consistent(s, u, true);
			zm_store_destroy(s);
		}
		zm_store_destroy(s1);
	}
	free(rnd);
}

/* A range mixing incompressible pages with compressible ones, group by
 * group in different proportions: never more memory than pages alone,
 * and the groups of text alone still form units. */
static void test_no_pay_mix(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	/* per group of 4: R random, T text, H heap, Z zero */
	static const char *const groups[] = {
		"RRRR", "TTTT", "RRTT", "TRTR", "RRRT", "HHHH", "TZTZ", "RZZR",
		"HRHH", "TTTR", "ZZZZ", "RTRR", "HHTT", "RRRR", "TTTT", "HZRT",
	};
	enum { NG = sizeof(groups) / sizeof(groups[0]), N = NG * 4 };
	uint8_t *data = malloc(N * PS), *t = text_pages(N, 0.5, 6);
	uint8_t *h = heap_pages(N, 2000);

	assert_non_null(data);
	for (size_t g = 0; g < NG; g++)
		for (size_t k = 0; k < 4; k++) {
			size_t i = g * 4 + k;
			uint8_t *p = data + i * PS;

			switch (groups[g][k]) {
			case 'R': random_page(p, 7000 + i); break;
			case 'T': memcpy(p, t + i * PS, PS); break;
			case 'H': memcpy(p, h + i * PS, PS); break;
			default: memset(p, 0, PS);
			}
		}
	for (int c = 0; c < 2; c++)
		for (unsigned u = 4; u <= 16; u *= 4) {
			struct zm_store *s1 = mk(codecs[c], 1, N), *s = mk(codecs[c], u, N);
			struct zm_store_stats st1, st;

			assert_int_equal(zm_store_put_range(s1, 0, N, data), 0);
			assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
			st1 = stats(s1);
			st = stats(s);
			printf("%-4s unit_pages %2u: mix compr %llu (pages alone %llu), pool %llu "
			       "(%llu), %llu units, %llu declined\n", codecs[c], u,
			       (unsigned long long)st.compr_data_size,
			       (unsigned long long)st1.compr_data_size,
			       (unsigned long long)st.mem_used_total,
			       (unsigned long long)st1.mem_used_total,
			       (unsigned long long)st.units, (unsigned long long)st.units_declined);
			assert_true(st.compr_data_size <= st1.compr_data_size);
			/* the pool's pages: its classes may round a unit's
			 * chunks differently, by a page or two at most */
			assert_true(st.mem_used_total <= st1.mem_used_total + 2 * PS);
			/* groups of 16 with random pages in them do not pay here */
			assert_true(st.units > 0 || u == 16);
			assert_true(st.units_declined > 0);
			if (u == 4) {
				/* the all-text and all-heap groups pay, the
				 * all-random ones do not */
				assert_int_equal(kind_of(s, 1 * 4), ZM_STORE_SLOT_UNIT);
				assert_int_equal(kind_of(s, 5 * 4), ZM_STORE_SLOT_UNIT);
				assert_int_equal(kind_of(s, 0), ZM_STORE_SLOT_HUGE);
				assert_int_equal(kind_of(s, 13 * 4), ZM_STORE_SLOT_HUGE);
			}
			expect_all(s, data, N);
			consistent(s, u, true);
			zm_store_destroy(s1);
			zm_store_destroy(s);
		}
	free(data), free(t), free(h);
}

/* Whether a unit pays is the store's data's business: units declined in
 * one store (incompressible data) must not keep a thread from trying
 * units in another (text, where every unit pays). */
static void test_declines_per_store(void **state)
{
	enum { NR = 256, NT_ = 64 };
	uint8_t *rnd = random_pages(NR, 15), *text = text_pages(NT_, 0.5, 16);
	struct zm_store *a, *b;
	struct zm_store_stats st;

	a = mk("lz4", 4, NR);
	b = mk("lz4", 4, NT_);
	assert_int_equal(zm_store_put_range(a, 0, NR, rnd), 0);
	assert_true(stats(a).units_declined > 0);
	assert_int_equal(zm_store_put_range(b, 0, NT_, text), 0);
	st = stats(b);
	printf("after %llu units declined in another store: %llu of %d groups in units\n",
	       (unsigned long long)stats(a).units_declined, (unsigned long long)st.units,
	       NT_ / 4);
	assert_int_equal(st.units, NT_ / 4);
	expect_all(b, text, NT_);
	zm_store_destroy(a);
	zm_store_destroy(b);
	free(rnd), free(text);
}

/* Units of larger pages, up to ZM_STORE_UNIT_MAX_BYTES: 16 pages of
 * 16 KiB, 4 of 64 KiB; chunks of at most a page. */
static void test_large_pages(void **state)
{
	static const struct { size_t ps; unsigned u; } geo[] = { { 16384, 16 }, { 65536, 4 } };
	enum { N = 32 };

	for (int g = 0; g < 2; g++)
		for (int c = 0; c < 2; c++) {
			size_t ps = geo[g].ps;
			struct zm_store_config cfg = { .page_size = ps, .unit_pages = geo[g].u,
						       .codec = c ? "zstd" : "lz4" };
			struct zm_store *s = test_store_mk(&cfg, N);
			uint8_t *data = malloc(N * ps), *out = malloc(ps);
			struct zm_store_stats st;

			assert_true(data && out);
			assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.4, NULL, 17, data,
						       N * ps, ps, NULL), 0);
			memset(data + 3 * ps, 0, ps);
			assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
			st = stats(s);
			printf("%zu KiB pages, unit_pages %u, %s: %llu units, %llu declined\n",
			       ps >> 10, geo[g].u, cfg.codec, (unsigned long long)st.units,
			       (unsigned long long)st.units_declined);
			/* zstd gains little more on 64 KiB pages: declined */
			assert_true(st.units > 0 || (ps == 65536 && c));
			assert_true(st.units > 0 || st.units_declined > 0);
			consistent(s, geo[g].u, true);
			for (uint64_t i = 0; i < N; i++) {
				assert_int_equal(zm_store_get(s, (N - 1 - i + 5) % N, out), 0);
				assert_memory_equal(out, data + (N - 1 - i + 5) % N * ps, ps);
			}
			/* rewritten and discarded */
			assert_int_equal(zm_store_put(s, 1, data + 9 * ps), 0);
			memcpy(data + ps, data + 9 * ps, ps);
			assert_int_equal(zm_store_discard(s, 4, geo[g].u), 0);
			memset(data + 4 * ps, 0, geo[g].u * ps);
			for (uint64_t i = 0; i < N; i++) {
				assert_int_equal(zm_store_get(s, i, out), 0);
				assert_memory_equal(out, data + i * ps, ps);
			}
			consistent(s, geo[g].u, true);
			assert_int_equal(zm_store_discard(s, 0, N), 0);
			st = stats(s);
			assert_int_equal(st.compr_data_size + st.pool_objects + st.units, 0);
			zm_store_destroy(s);
			free(data), free(out);
		}
}

/* ---- corruption --------------------------------------------------------- */

/* Damage the unit that page idx belongs to: its chunk `which` (-1: the
 * last) overwritten with 0xFF (how 0), or a few bytes of it flipped. */
static void corrupt_unit(struct zm_store *s, uint64_t idx, int which, int how, struct rng *r)
{
	zm_handle_t h[MAX_CHUNKS];
	long n = unit_chunks(s, idx, h, MAX_CHUNKS);
	struct zm_pool *pool = zm_store_pool(s);
	uint8_t buf[PS];
	size_t len;

	assert_true(n > 0);
	if (which < 0 || which >= n)
		which = (int)n - 1;
	len = zm_pool_obj_size(pool, h[which]);
	assert_true(len > 0 && len <= PS);
	if (how == 0) {
		memset(buf, 0xFF, len);
	} else {
		assert_int_equal(zm_pool_read(pool, h[which], buf, len), 0);
		for (int k = 0; k < 8; k++)
			buf[rng_below(r, len)] ^= (uint8_t)(1 + rng_below(r, 255));
	}
	assert_int_equal(zm_pool_write(pool, h[which], buf, len), 0);
}

/* The pages that share page idx's unit (kind UNIT, the same first chunk). */
static uint64_t unit_members(struct zm_store *s, uint64_t idx, bool *member)
{
	zm_handle_t h0[MAX_CHUNKS], h[MAX_CHUNKS];
	uint64_t n = 0;

	assert_true(unit_chunks(s, idx, h0, MAX_CHUNKS) > 0);
	for (uint64_t i = 0; i < zm_store_nr_pages(s); i++) {
		member[i] = kind_of(s, i) == ZM_STORE_SLOT_UNIT &&
			    unit_chunks(s, i, h, MAX_CHUNKS) > 0 && h[0] == h0[0];
		n += member[i];
	}
	return n;
}

static void test_corrupt(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	enum { N = 64, AT = 18 };  /* the unit of page 18 is damaged */
	uint8_t *data = text_pages(N, 0.4, 8), out[PS];
	struct rng r;

	rng_seed(&r, g_seed ^ 0xC0);
	/* same-filled pages inside the damaged unit's group */
	memset(data + 17 * PS, 0, PS);
	same_page(data + 22 * PS, 0x5a5a5a5a00000001ull);
	for (int c = 0; c < 2; c++)
		for (unsigned u = 4; u <= 16; u *= 4)
			for (int which = 0; which < 2; which++) {
				struct zm_store *s = mk(codecs[c], u, N);
				bool member[N];
				uint64_t m, eio = 0;

				assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
				assert_int_equal(kind_of(s, AT), ZM_STORE_SLOT_UNIT);
				m = unit_members(s, AT, member);
				assert_true(m >= 2);
				/* read everything once: the per-thread cache then
				 * holds some other unit */
				expect_all(s, data, N);
				expect_page(s, 0, data);
				corrupt_unit(s, AT, which ? -1 : 0, 0, &r);
				/* forwards, backwards and its own pages twice */
				for (int pass = 0; pass < 3; pass++)
					for (uint64_t k = 0; k < N; k++) {
						uint64_t i = pass == 1 ? N - 1 - k : k;

						if (pass == 2 && !member[i])
							continue;
						if (member[i]) {
							assert_int_equal(zm_store_get(s, i, out),
									 -EIO);
							eio++;
						} else {
							expect_page(s, i, data + i * PS);
						}
					}
				assert_int_equal(stats(s).failed_reads, eio);
				/* the checker looks at slots, counters and the
				 * pool, not at what the objects decode to */
				consistent(s, u, true);

				/* pages put over the damaged unit's leave it and read
				 * right; once half of it left its rewrite cannot read
				 * the rest, which stay lost (-EIO) and counted */
				for (uint64_t i = 0, k = 0; i < N && k < m / 2; i++)
					if (member[i]) {
						assert_int_equal(zm_store_put(s, i, data + i * PS),
								 0);
						expect_page(s, i, data + i * PS);
						member[i] = false;
						k++;
					}
				for (uint64_t i = 0; i < N; i++) {
					int rc = zm_store_get(s, i, out);

					if (member[i])
						assert_int_equal(rc, -EIO);
					else
						expect_page(s, i, data + i * PS);
				}
				consistent(s, u, false);
				/* a new range heals it, its memory is freed */
				assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
				expect_all(s, data, N);
				consistent(s, u, true);
				assert_int_equal(zm_store_discard(s, 0, N), 0);
				assert_int_equal(stats(s).compr_data_size, 0);
				assert_int_equal(stats(s).units, 0);
				consistent(s, u, true);
				zm_store_destroy(s);
			}
	free(data);
}

/* Flipped bytes anywhere in any chunk: an error or wrong data for the
 * unit's pages (there is no checksum), never a crash or a bad access,
 * and the other units untouched. */
static void test_corrupt_flips(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	enum { N = 64 };
	uint8_t *data = heap_pages(N, 3000), out[PS];
	struct rng r;

	rng_seed(&r, g_seed ^ 0xF1);
	for (int c = 0; c < 2; c++)
		for (int round = 0; round < 16; round++) {
			unsigned u = round % 2 ? 16 : 4;
			struct zm_store *s = mk(codecs[c], u, N);
			uint64_t at = rng_below(&r, N);
			bool member[N];
			long nc;
			zm_handle_t h[MAX_CHUNKS];

			assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
			assert_int_equal(kind_of(s, at), ZM_STORE_SLOT_UNIT);
			unit_members(s, at, member);
			nc = unit_chunks(s, at, h, MAX_CHUNKS);
			corrupt_unit(s, at, (int)rng_below(&r, (uint64_t)nc), 1, &r);
			for (uint64_t i = 0; i < N; i++) {
				int rc = zm_store_get(s, i, out);

				if (member[i])
					assert_true(rc == 0 || rc == -EIO);
				else
					expect_page(s, i, data + i * PS);
			}
			consistent(s, u, true);
			zm_store_destroy(s);
		}
	free(data);
}

/* ---- pages leaving units ------------------------------------------------ */

static void test_split(void **state)
{
	static const char *const codecs[] = { "lz4", "zstd" };
	enum { N = 64 };
	uint8_t *data = text_pages(N, 0.4, 9), *newer = heap_pages(N, 4000);
	uint8_t *cur = malloc(N * PS);

	assert_non_null(cur);
	for (int c = 0; c < 2; c++)
		for (unsigned u = 4; u <= 16; u *= 4) {
			struct zm_store *s = mk(codecs[c], u, N);
			struct zm_store_stats st;
			uint64_t base = u;   /* the second aligned group */

			/* single puts over a unit: it keeps its pages until half
			 * have left, then the rest are rewritten as pages */
			memcpy(cur, data, N * PS);
			assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
			st = stats(s);
			assert_int_equal(st.units, N / u);
			assert_int_equal(st.unit_pages, N);
			for (unsigned k = 0; k < u / 2; k++) {
				uint64_t i = base + (k * 3) % u;   /* in some order */

				memcpy(cur + i * PS, newer + i * PS, PS);
				assert_int_equal(zm_store_put(s, i, cur + i * PS), 0);
				assert_int_equal(kind_of(s, i), ZM_STORE_SLOT_POOL);
				st = stats(s);
				if (k + 1 < u / 2) {
					assert_int_equal(st.units, N / u);
					assert_int_equal(st.unit_pages, N - k - 1);
					assert_int_equal(st.unit_splits, 0);
				}
				expect_all(s, cur, N);
				consistent(s, u, true);
			}
			st = stats(s);
			assert_int_equal(st.unit_splits, 1);
			assert_int_equal(st.units, N / u - 1);
			assert_int_equal(st.unit_pages, N - u);
			for (uint64_t i = base; i < base + u; i++)
				assert_int_equal(kind_of(s, i), ZM_STORE_SLOT_POOL);

			/* discards cutting units: one of the first group's pages,
			 * then a range over the end of the third and the start of
			 * the fourth */
			assert_int_equal(zm_store_discard(s, 1, 1), 0);
			memset(cur + PS, 0, PS);
			assert_int_equal(kind_of(s, 0), ZM_STORE_SLOT_UNIT);
			assert_int_equal(zm_store_discard(s, 3 * u - 1, u / 2 + 1), 0);
			memset(cur + (3 * u - 1) * PS, 0, (u / 2 + 1) * PS);
			expect_all(s, cur, N);
			st = stats(s);
			assert_int_equal(st.unit_splits, 2);  /* the fourth group's */
			consistent(s, u, true);

			/* a unit's last pages leave: its memory goes with them */
			assert_int_equal(zm_store_discard(s, 0, u), 0);
			memset(cur, 0, u * PS);
			expect_all(s, cur, N);
			consistent(s, u, true);
			assert_int_equal(zm_store_discard(s, 0, N), 0);
			st = stats(s);
			assert_int_equal(st.units + st.unit_pages + st.unit_bytes, 0);
			assert_int_equal(st.compr_data_size, 0);
			assert_int_equal(st.pool_objects, 0);
			assert_int_equal(st.pages_stored, 0);
			consistent(s, u, true);

			/* a unit put over by a range, and by a unit of other pages */
			assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
			assert_int_equal(zm_store_put_range(s, 0, N, newer), 0);
			st = stats(s);
			assert_int_equal(st.units, N / u);
			assert_int_equal(st.units_formed, 3 * N / u);
			expect_all(s, newer, N);
			/* a range over part of a unit: a new unit of its own
			 * pages, the old one losing them */
			assert_int_equal(zm_store_put_range(s, 1, u / 2, data + PS), 0);
			memcpy(cur, newer, N * PS);
			memcpy(cur + PS, data + PS, u / 2 * PS);
			expect_all(s, cur, N);
			consistent(s, u, true);
			/* one by one, every page of the store */
			for (uint64_t i = 0; i < N; i++) {
				assert_int_equal(zm_store_discard(s, (i * 7) % N, 1), 0);
				memset(cur + (i * 7) % N * PS, 0, PS);
				if (i % 5 == 0) {
					expect_all(s, cur, N);
					consistent(s, u, true);
				}
			}
			st = stats(s);
			assert_int_equal(st.compr_data_size + st.units + st.pool_objects, 0);
			printf("%-4s unit_pages %2u: %llu formed, %llu splits\n", codecs[c], u,
			       (unsigned long long)st.units_formed,
			       (unsigned long long)st.unit_splits);
			zm_store_destroy(s);
		}
	free(data), free(newer), free(cur);
}

/* ---- the model ---------------------------------------------------------- */

struct model_cfg {
	const char *name;
	const char *codec;
	unsigned unit_pages;
	size_t limit_pages;   /* 0: none */
	bool no_same_filled;  /* same-filled pages in units too */
	int tier;             /* 1: a backing file and a secondary codec, and
				 marks, recompressions and writebacks among the
				 steps; 2: with backing_readback */
};

static const struct model_cfg model_cfgs[] = {
	{ "u4_lz4", "lz4", 4, 0, false, 0 },
	{ "u16_lz4", "lz4", 16, 0, false, 0 },
	{ "u4_zstd", "zstd", 4, 0, false, 0 },
	{ "u16_zstd", "zstd", 16, 0, false, 0 },
	{ "u4_lz4_limit", "lz4", 4, 56, false, 0 },
	{ "u16_zstd_limit", "zstd", 16, 40, false, 0 },
	{ "u16_lz4_nosame", "lz4", 16, 0, true, 0 },
	{ "u4_lz4_tier", "lz4", 4, 0, false, 1 },
	{ "u16_lz4_tier_readback", "lz4", 16, 0, false, 2 },
	{ "u4_zstd_tier_limit", "zstd", 4, 48, false, 1 },
	{ "u16_lz4_tier_readback_limit", "lz4", 16, 40, false, 2 },
};

#define MODEL_PAGES 192
#define MODEL_SRC 64

enum src_kind { SK_TEXT, SK_HEAP, SK_RANDOM, SK_NR };

struct model {
	struct zm_store *s;
	const struct model_cfg *mc;
	uint8_t *src[SK_NR];           /* MODEL_SRC pages of each */
	uint8_t *data;                 /* the last content of every page */
	bool written[MODEL_PAGES];     /* put since its last discard */
	bool ranged[MODEL_PAGES];      /* last written by a put_range */
	long step;
};

/* Page i of a range's content: mostly a run of neighbouring pages of one
 * kind (so that units pay), some same-filled and random ones, some with
 * the step written into them (so that a page differs from its last). */
static void model_fill(struct model *m, struct rng *r, uint8_t *p, enum src_kind k,
		       uint64_t from, uint64_t i)
{
	unsigned roll = (unsigned)rng_below(r, 100);

	if (roll < 8) {
		memset(p, 0, PS);
	} else if (roll < 12) {
		same_page(p, mix64(m->step + i) | 1);
	} else if (roll < 18) {
		memcpy(p, m->src[SK_RANDOM] + rng_below(r, MODEL_SRC) * PS, PS);
	} else {
		memcpy(p, m->src[k] + (from + i) % MODEL_SRC * PS, PS);
		if (rng_below(r, 2))
			memcpy(p + 8 * rng_below(r, PS / 8), &m->step, sizeof(m->step));
	}
}

static void model_verify(struct model *m, uint64_t i)
{
	uint8_t out[PS];
	int rc = zm_store_get(m->s, i, out);

	if (rc || memcmp(out, m->data + i * PS, PS))
		fail_msg("step %ld: page %llu: get %d, %s (slot kind %u, %s)", m->step,
			 (unsigned long long)i, rc, rc ? "failed" : "not its last content",
			 kind_of(m->s, i),
			 m->written[i] ? "written" : "never written or discarded");
}

/* The slots against what the model knows of them, and the counters. */
static void model_check(struct model *m)
{
	bool limit = m->mc->limit_pages != 0;

	consistent(m->s, m->mc->unit_pages, !limit);
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		unsigned kind = kind_of(m->s, i);

		if ((kind == ZM_STORE_SLOT_EMPTY) == m->written[i])
			fail_msg("step %ld: page %llu: kind %u, %s", m->step,
				 (unsigned long long)i, kind,
				 m->written[i] ? "written" : "not written");
		/* (recompression forms units of idle single pages) */
		if (kind == ZM_STORE_SLOT_UNIT && !m->ranged[i] && !m->mc->tier)
			fail_msg("step %ld: page %llu is in a unit, but its last put was "
				 "a single page's", m->step, (unsigned long long)i);
		if (kind == ZM_STORE_SLOT_SAME && m->mc->no_same_filled)
			fail_msg("step %ld: page %llu same-filled with no_same_filled",
				 m->step, (unsigned long long)i);
	}
	/* where pages are stored: units' pages too */
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		uint64_t next, want = i;

		while (want < MODEL_PAGES && !m->written[want])
			want++;
		assert_int_equal(zm_store_next_used(m->s, i, MODEL_PAGES, &next), 0);
		if (next != want)
			fail_msg("step %ld: next_used from %llu: %llu, want %llu", m->step,
				 (unsigned long long)i, (unsigned long long)next,
				 (unsigned long long)want);
	}
}

static void model_run(const struct model_cfg *mc)
{
	struct zm_store_config c = { .codec = mc->codec, .unit_pages = mc->unit_pages,
				     .limit_bytes = mc->limit_pages * PS,
				     .no_same_filled = mc->no_same_filled,
				     .recompress_codec = mc->tier ? "zstd" : NULL,
				     .backing_readback = mc->tier == 2 };
	unsigned u = mc->unit_pages;
	uint64_t maxlen = 2 * u + 3;
	uint8_t *buf = malloc(maxlen * PS), *old = malloc(maxlen * PS);
	struct model m = { .mc = mc };
	long nospc = 0, ranges = 0, partial = 0;
	long cold[4] = { 0 };   /* marked, recompressed, written back, by hand */
	struct zm_store_stats st;
	char path[256] = "";
	struct rng r;

	assert_true(buf && old);
	rng_seed(&r, g_seed ^ mix64(u * 131 + mc->limit_pages + (mc->codec[0] == 'z') +
				    1000 * (uint64_t)mc->tier));
	if (mc->tier) {
		tmp_file(path, sizeof(path));
		c.backing_path = path;
	}
	m.src[SK_TEXT] = text_pages(MODEL_SRC, 0.5, 11);
	m.src[SK_HEAP] = heap_pages(MODEL_SRC, 5000);
	m.src[SK_RANDOM] = random_pages(MODEL_SRC, 12);
	m.s = test_store_mk(&c, MODEL_PAGES);
	m.data = calloc(MODEL_PAGES, PS);
	assert_non_null(m.data);
	for (m.step = 0; m.step < g_steps; m.step++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t i = rng_below(&r, MODEL_PAGES);
		int rc;

		if (op < 28) {                          /* put_range */
			enum src_kind k = (enum src_kind)rng_below(&r, 2);
			uint64_t from = rng_below(&r, MODEL_SRC), n;

			if (rng_below(&r, 2))
				i -= i % u;             /* aligned */
			n = rng_below(&r, 3) ? 1 + rng_below(&r, maxlen) : u;
			n = i + n > MODEL_PAGES ? MODEL_PAGES - i : n;
			for (uint64_t j = 0; j < n; j++)
				model_fill(&m, &r, buf + j * PS, k, from, j);
			memcpy(old, m.data + i * PS, n * PS);
			rc = zm_store_put_range(m.s, i, n, buf);
			ranges++;
			if (rc == 0) {
				memcpy(m.data + i * PS, buf, n * PS);
				memset(m.written + i, 1, n);
				memset(m.ranged + i, 1, n);
				continue;
			}
			/* refused by the limit: each page new or old */
			if (rc != -ENOSPC || !mc->limit_pages)
				fail_msg("step %ld: put_range %llu+%llu: %d", m.step,
					 (unsigned long long)i, (unsigned long long)n, rc);
			nospc++;
			for (uint64_t j = 0; j < n; j++) {
				uint8_t out[PS];

				assert_int_equal(zm_store_get(m.s, i + j, out), 0);
				if (!memcmp(buf + j * PS, old + j * PS, PS)) {
					/* the same either way: the slot tells */
					m.written[i + j] =
						kind_of(m.s, i + j) != ZM_STORE_SLOT_EMPTY;
					m.ranged[i + j] |= m.written[i + j];
					if (memcmp(out, old + j * PS, PS))
						fail_msg("step %ld: page %llu changed by a refused "
							 "put_range", m.step,
							 (unsigned long long)(i + j));
				} else if (!memcmp(out, buf + j * PS, PS)) {
					memcpy(m.data + (i + j) * PS, out, PS);
					m.written[i + j] = m.ranged[i + j] = true;
					partial++;
				} else if (memcmp(out, old + j * PS, PS)) {
					fail_msg("step %ld: put_range %llu+%llu refused: page %llu "
						 "holds neither its new content nor its old",
						 m.step, (unsigned long long)i,
						 (unsigned long long)n,
						 (unsigned long long)(i + j));
				}
			}
		} else if (op < 43) {                   /* put */
			model_fill(&m, &r, buf, (enum src_kind)rng_below(&r, 2),
				   rng_below(&r, MODEL_SRC), 0);
			rc = zm_store_put(m.s, i, buf);
			if (rc == 0) {
				memcpy(m.data + i * PS, buf, PS);
				m.written[i] = true;
				m.ranged[i] = false;
			} else {
				if (rc != -ENOSPC || !mc->limit_pages)
					fail_msg("step %ld: put %llu: %d", m.step,
						 (unsigned long long)i, rc);
				nospc++;
				model_verify(&m, i);    /* the old content */
			}
		} else if (op < 51) {                   /* discard */
			uint64_t n = 1 + rng_below(&r, u + u / 2);

			n = i + n > MODEL_PAGES ? MODEL_PAGES - i : n;
			assert_int_equal(zm_store_discard(m.s, i, n), 0);
			memset(m.data + i * PS, 0, n * PS);
			memset(m.written + i, 0, n);
			memset(m.ranged + i, 0, n);
		} else if (op < 80 && mc->tier) {       /* the cold path */
			static const unsigned picks[] = { 0, ZM_STORE_PICK_IDLE };
			unsigned which = picks[rng_below(&r, 2)];
			uint64_t max = rng_below(&r, 3) ? 1 + rng_below(&r, 24) : ALL;
			long got;

			switch (rng_below(&r, 4)) {
			case 0:
				got = zm_store_mark_idle(m.s, (unsigned)rng_below(&r, 2));
				assert_true(got >= 0);
				cold[0] += got;
				break;
			case 1:
				got = zm_store_recompress(m.s, which, max);
				assert_true(got >= 0);
				cold[1] += got;
				break;
			case 2:
				got = zm_store_writeback(m.s, which, max);
				assert_true(got >= 0);
				cold[2] += got;
				break;
			default:
				rc = zm_store_writeback_page(m.s, i);
				if (rc && rc != -ENOENT)
					fail_msg("step %ld: writeback_page %llu (kind %u): %d",
						 m.step, (unsigned long long)i, kind_of(m.s, i),
						 rc);
				cold[3] += rc == 0;
			}
		} else if (op < 90) {                   /* get */
			model_verify(&m, i);
		} else if (op < 96) {                   /* a group's pages in a row */
			i -= i % u;
			for (uint64_t j = 0; j < u; j++)
				model_verify(&m, i + j);
		} else if (op < 98) {
			assert_true(zm_store_compact(m.s) >= 0);
		} else if (mc->limit_pages) {           /* the limit moves */
			size_t l = mc->limit_pages * PS;

			assert_int_equal(zm_store_set_limit(m.s, l / 2 + rng_below(&r, l / 2 + 1)),
					 0);
		}
		if (m.step % 250 == 249)
			model_check(&m);
		if (m.step % 1000 == 999)
			for (uint64_t k = 0; k < MODEL_PAGES; k++)
				model_verify(&m, k);
	}
	model_check(&m);
	for (uint64_t k = 0; k < MODEL_PAGES; k++)
		model_verify(&m, k);
	st = stats(m.s);
	printf("%-15s %ld steps: %ld ranges, %ld refused (%ld pages of them stored); "
	       "%llu units now of %llu pages, %llu formed, %llu declined, %llu splits\n",
	       mc->name, g_steps, ranges, nospc, partial, (unsigned long long)st.units,
	       (unsigned long long)st.unit_pages, (unsigned long long)st.units_formed,
	       (unsigned long long)st.units_declined, (unsigned long long)st.unit_splits);
	if (mc->tier)
		printf("%-15s %ld marked, %ld recompressed, %ld written back, %ld by hand; "
		       "%llu on file, %llu read from it\n", "", cold[0], cold[1], cold[2],
		       cold[3], (unsigned long long)st.bd_count,
		       (unsigned long long)st.bd_reads);
	/* the run did what it is for */
	assert_true(st.units_formed > 0);
	if (mc->tier)
		assert_true(cold[1] > 0 && cold[2] > 0);
	assert_true(st.unit_splits > 0 || g_steps < 1000);
	if (mc->limit_pages && !mc->tier)
		assert_true(nospc > 0 || g_steps < 1000);
	if (mc->tier)   /* the limit makes room on the file instead */
		assert_int_equal(nospc, 0);
	/* everything discarded: nothing left, once the writer's round (a
	 * unit it holds is freed when it lets go) is over */
	assert_int_equal(zm_store_discard(m.s, 0, MODEL_PAGES), 0);
	zmi_store_writer_quiesce(m.s);
	st = stats(m.s);
	if (st.units + st.unit_pages + st.unit_bytes + st.compr_data_size + st.pool_objects +
	    st.pages_stored)
		printf("left after discarding all: %llu units of %llu pages (%llu bytes), %llu "
		       "bytes in %llu objects, %llu pages, %llu on file\n",
		       (unsigned long long)st.units, (unsigned long long)st.unit_pages,
		       (unsigned long long)st.unit_bytes, (unsigned long long)st.compr_data_size,
		       (unsigned long long)st.pool_objects, (unsigned long long)st.pages_stored,
		       (unsigned long long)st.bd_count);
	assert_int_equal(st.units + st.unit_pages + st.unit_bytes, 0);
	assert_int_equal(st.compr_data_size + st.pool_objects + st.pages_stored, 0);
	CHECK(m.s);
	zm_store_destroy(m.s);
	if (*path)
		unlink(path);
	for (int k = 0; k < SK_NR; k++)
		free(m.src[k]);
	free(m.data), free(buf), free(old);
}

static void test_model(void **state)
{
	model_run(*state);
}

/* ---- threads ------------------------------------------------------------ */

/*
 * Cookie pages: word 0 a cookie (writer, slot, version, kind), every
 * other word derived from it.  Kinds: 0 and 1 text (one of TX_N text pages
 * chosen by the cookie, every 64th word the cookie's own: neighbours
 * compress well together), 2 same-filled, 3 random.
 */
#define TX_N 16
#define WORDS (PS / 8)
#define NT 4

static uint64_t *g_text;           /* TX_N text pages */

static uint64_t ck_make(unsigned tid, uint64_t idx, uint64_t version, unsigned kind)
{
	return ((uint64_t)(tid + 1) << 56) | (idx << 32) | ((version & 0x3FFFFFFF) << 2) | kind;
}

static uint64_t ck_word(uint64_t c, size_t i)
{
	if (i == 0)
		return c;
	switch (c & 3) {
	case 2: return c;
	case 3: return mix64(c + i);
	default:
		return i % 64 == 32 ? mix64(c ^ i) : g_text[(mix64(c) % TX_N) * WORDS + i];
	}
}

static void ck_page(uint64_t *w, uint64_t c)
{
	for (size_t i = 0; i < WORDS; i++)
		w[i] = ck_word(c, i);
}

static unsigned ck_kind(struct rng *r)
{
	unsigned k = (unsigned)rng_below(r, 20);

	return k < 14 ? k % 2 : k < 17 ? 2 : 3;
}

/* 0: w is zeros, or a whole page of a cookie naming slot idx and a writer
 * below NT; else what is wrong. */
static int ck_check(const uint64_t *w, uint64_t idx)
{
	uint64_t c = w[0];

	if (c == 0) {
		for (size_t i = 0; i < WORDS; i++)
			if (w[i])
				return -1;
		return 0;
	}
	if ((c >> 56) == 0 || (c >> 56) > NT || ((c >> 32) & 0xFFFFFF) != idx)
		return -2;
	for (size_t i = 1; i < WORDS; i++)
		if (w[i] != ck_word(c, i))
			return -3;
	return 0;
}

struct th_cfg {
	const char *name;
	const char *codec;
	unsigned unit_pages;
	unsigned run;      /* owned: each thread owns runs of this many pages
			      (index / run % NT); 0: every page shared */
	size_t limit_pages; /* shared only: puts may fail -ENOSPC; 0: no limit */
};

static const struct th_cfg th_cfgs[] = {
	{ "owned_u16_lz4", "lz4", 16, 4, 0 },     /* a quarter of each unit each */
	{ "owned_u4_zstd", "zstd", 4, 3, 0 },     /* runs across units' edges */
	{ "owned_u16_zstd", "zstd", 16, 5, 0 },
	{ "shared_u16_lz4", "lz4", 16, 0, 0 },
	{ "shared_u4_zstd", "zstd", 4, 0, 0 },
	{ "shared_u16_lz4_limit", "lz4", 16, 0, 72 },
};

#define TH_PAGES 128

static struct zm_store *g_store;
static const struct th_cfg *g_tc;
static long g_th_steps;
static uint64_t g_published[NT];   /* atomic: the last version each writer began */
static int g_stop;                 /* atomic */

struct targ {
	unsigned id;
	long bad, puts, ranges, gets, nospc;
	uint64_t mine[TH_PAGES];   /* owned: the cookie each own page holds (0: zeros) */
};

static bool th_owns(unsigned tid, uint64_t idx)
{
	return !g_tc->run || idx / g_tc->run % NT == tid;
}

static void th_bad(struct targ *t, const char *what, uint64_t idx, int rc, int chk,
		   uint64_t got, uint64_t want)
{
	if (t->bad++ < 5)
		printf("thread %u: %s page %llu: rc %d, check %d, cookie %#llx, want %#llx\n",
		       t->id, what, (unsigned long long)idx, rc, chk, (unsigned long long)got,
		       (unsigned long long)want);
}

/* A get of page idx: a whole page of its own; if owned by this thread,
 * exactly what it last wrote there; if shared, a version its writer
 * began. */
static void th_get(struct targ *t, uint64_t idx)
{
	static __thread uint64_t out[WORDS];
	int rc = zm_store_get(g_store, idx, out), chk = rc ? 0 : ck_check(out, idx);

	t->gets++;
	if (rc || chk) {
		th_bad(t, "get", idx, rc, chk, out[0], 0);
		return;
	}
	if (g_tc->run && th_owns(t->id, idx) && out[0] != t->mine[idx])
		th_bad(t, "get (own)", idx, rc, chk, out[0], t->mine[idx]);
	if (!g_tc->run && out[0]) {
		unsigned w = (unsigned)(out[0] >> 56) - 1;

		if (((out[0] & 0xFFFFFFFF) >> 2) >
		    __atomic_load_n(&g_published[w], __ATOMIC_ACQUIRE))
			th_bad(t, "get (a version never begun)", idx, rc, chk, out[0], 0);
	}
}

/* A range [*at, *at + *n) this thread may write: within one of its runs
 * (owned), anywhere (shared). */
static void th_range(struct targ *t, struct rng *r, uint64_t *at, uint64_t *n)
{
	unsigned u = g_tc->unit_pages, run = g_tc->run;

	if (!run) {
		*at = rng_below(r, TH_PAGES);
		*n = 1 + rng_below(r, 2 * u);
	} else {
		uint64_t runs = TH_PAGES / run / NT + 1, k = rng_below(r, runs);
		uint64_t start = (k * NT + t->id) * run, len = run;

		if (start >= TH_PAGES)
			start = t->id * run;
		if (start + len > TH_PAGES)
			len = TH_PAGES - start;
		*n = 1 + rng_below(r, len);
		*at = start + rng_below(r, len - *n + 1);
		return;
	}
	if (*at + *n > TH_PAGES)
		*n = TH_PAGES - *at;
}

static void *th_worker(void *arg)
{
	struct targ *t = arg;
	uint64_t *buf = malloc(2 * ZM_STORE_UNIT_MAX * PS), version = 0;
	struct rng r;

	assert_non_null(buf);
	rng_seed(&r, g_seed * 31 + t->id * 7919 + g_tc->unit_pages);
	for (long s = 0; s < g_th_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t at, n;
		int rc;

		th_range(t, &r, &at, &n);
		if (op < 40) {                          /* put_range, or put */
			if (op >= 28)
				n = 1;
			for (uint64_t j = 0; j < n; j++) {
				uint64_t c = ck_make(t->id, at + j, ++version, ck_kind(&r));

				ck_page(buf + j * WORDS, c);
			}
			__atomic_store_n(&g_published[t->id], version, __ATOMIC_RELEASE);
			rc = n == 1 && rng_below(&r, 2) ? zm_store_put(g_store, at, buf)
							: zm_store_put_range(g_store, at, n, buf);
			if (rc == -ENOSPC && g_tc->limit_pages) {
				t->nospc++;
				continue;
			}
			if (rc) {
				th_bad(t, "put", at, rc, 0, buf[0], 0);
				continue;
			}
			for (uint64_t j = 0; j < n; j++)
				t->mine[at + j] = buf[j * WORDS];
			t->puts += n;
			t->ranges += n > 1;
		} else if (op < 46) {                   /* discard */
			rc = zm_store_discard(g_store, at, n);
			if (rc)
				th_bad(t, "discard", at, rc, 0, 0, 0);
			for (uint64_t j = 0; j < n; j++)
				t->mine[at + j] = 0;
		} else if (op < 80) {                   /* get: its own pages */
			for (uint64_t j = 0; j < n; j++)
				th_get(t, at + j);
		} else {                                /* get: neighbours' */
			th_get(t, rng_below(&r, TH_PAGES));
		}
	}
	free(buf);
	return NULL;
}

static void *th_watcher(void *arg)
{
	struct zm_store_stats st;

	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		zm_store_stats(g_store, &st);
		if (st.failed_reads)   /* (the others move apart for a moment) */
			(*(int *)arg)++;
		zm_store_compact(g_store);
		usleep(300);
	}
	return NULL;
}

static void test_threads(void **state)
{
	const struct th_cfg *tc = *state;
	struct zm_store_config c = { .codec = tc->codec, .unit_pages = tc->unit_pages,
				     .limit_bytes = tc->limit_pages * PS };
	struct targ ta[NT];
	pthread_t tid[NT], wt;
	struct zm_store_stats st;
	long puts = 0, ranges = 0, gets = 0, nospc = 0;
	int watch_bad = 0;

	g_tc = tc;
	g_th_steps = g_steps * 4;
	g_text = (uint64_t *)text_pages(TX_N, 0.5, 13);
	g_store = test_store_mk(&c, TH_PAGES);
	memset(g_published, 0, sizeof(g_published));
	g_stop = 0;
	pthread_create(&wt, NULL, th_watcher, &watch_bad);
	for (unsigned i = 0; i < NT; i++) {
		memset(&ta[i], 0, sizeof(ta[i]));
		ta[i].id = i;
		pthread_create(&tid[i], NULL, th_worker, &ta[i]);
	}
	for (unsigned i = 0; i < NT; i++) {
		pthread_join(tid[i], NULL);
		puts += ta[i].puts, ranges += ta[i].ranges, gets += ta[i].gets;
		nospc += ta[i].nospc;
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(wt, NULL);
	for (unsigned i = 0; i < NT; i++)
		assert_int_equal(ta[i].bad, 0);
	assert_int_equal(watch_bad, 0);
	consistent(g_store, tc->unit_pages, !tc->limit_pages);
	/* every page as its owner left it, or whole */
	for (uint64_t i = 0; i < TH_PAGES; i++) {
		uint64_t out[WORDS];

		assert_int_equal(zm_store_get(g_store, i, out), 0);
		assert_int_equal(ck_check(out, i), 0);
		if (tc->run)
			for (unsigned k = 0; k < NT; k++)
				if (th_owns(k, i))
					assert_int_equal(out[0], ta[k].mine[i]);
	}
	st = stats(g_store);
	printf("%-15s %ld pages put (%ld ranges, %ld refused), %ld gets: %llu units now, "
	       "%llu formed, %llu declined, %llu splits, %llu pages compacted\n", tc->name,
	       puts, ranges, nospc, gets, (unsigned long long)st.units,
	       (unsigned long long)st.units_formed,
	       (unsigned long long)st.units_declined, (unsigned long long)st.unit_splits,
	       (unsigned long long)st.pages_compacted);
	assert_true(st.units_formed > 0);
	assert_true(st.unit_splits > 0);
	assert_int_equal(st.failed_reads, 0);
	/* every put refused was refused by the limit */
	assert_int_equal(st.failed_writes, st.limit_fails);
	if (tc->limit_pages)
		assert_true(nospc > 0);
	else
		assert_int_equal(st.failed_writes, 0);
	zm_store_destroy(g_store);
	g_store = NULL;
	free(g_text);
}

/* ---- cold data ---------------------------------------------------------- */

/* 128 pages: text, then heap records, every 11th zero. */
static void tier_data(uint8_t *data, const uint8_t *text, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (i % 11 == 0)
			memset(data + i * PS, 0, PS);
		else if (i < n / 2)
			memcpy(data + i * PS, text + i * PS, PS);
		else
			heap_page(data + i * PS, 6000 + i);
	}
}

/* Idle marking, recompression and writeback of a store holding units
 * (docs/tiering.md, "Units"): marks count each page of a unit; units
 * are recompressed and written back whole, and read from the file; with
 * backing_readback a get brings its unit back into memory, whole; puts
 * and discards over units on file.  Every page reads back right. */
static void test_tiering(void **state)
{
	enum { N = 128 };
	char path[256];
	uint8_t *data = malloc(N * PS), *t = text_pages(N, 0.5, 14);
	struct zm_store_config c = { .recompress_codec = "zstd", .backing_path = path };
	struct zm_store *s;
	struct zm_store_stats st;
	long got;

	assert_non_null(data);
	tmp_file(path, sizeof(path));
	for (int pass = 0; pass < 4; pass++) {
		unsigned u = pass % 2 ? 16 : 4;
		uint64_t in_pool;
		struct walk w;

		c.unit_pages = u;
		c.backing_readback = pass >= 2;
		tier_data(data, t, N);
		s = test_store_mk(&c, N);
		assert_int_equal(zm_store_put_range(s, 0, N, data), 0);
		st = stats(s);
		assert_true(st.units > 0);
		in_pool = st.pages_stored - st.same_pages;

		/* every page of a unit is marked, and a read clears its own */
		got = zm_store_mark_idle(s, 0);
		assert_int_equal(got, (long)in_pool);
		assert_int_equal(stats(s).idle_pages, in_pool);
		expect_page(s, 5, data + 5 * PS);
		assert_int_equal(zm_store_mark_idle(s, 0), (long)in_pool);

		got = zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL);
		assert_true(got > 0 && (uint64_t)got <= in_pool);
		st = stats(s);
		printf("unit_pages %2u%s: %llu pages in %llu units, %ld recompressed", u,
		       pass >= 2 ? " readback" : "", (unsigned long long)st.unit_pages,
		       (unsigned long long)st.units, got);
		expect_all(s, data, N);
		consistent(s, u, true);
		assert_true(zm_store_recompress(s, 0, ALL) >= 0);
		expect_all(s, data, N);
		consistent(s, u, true);

		/* everything to the file: units whole, the pool empty */
		got = zm_store_writeback(s, 0, ALL);
		st = stats(s);
		printf(", %ld written back (%llu units on file)\n", got,
		       (unsigned long long)walk(s, u).file_units);
		assert_int_equal(got, (long)in_pool);
		assert_int_equal(st.bd_count, in_pool);
		assert_int_equal(st.compr_data_size, 0);
		assert_int_equal(st.pool_objects, 0);
		w = consistent(s, u, true);
		assert_int_equal(w.file_units, st.units);
		/* read from the file, backwards; with readback, each get that
		 * reads the file brings its unit back whole (the unit this
		 * thread decoded last is read from its cache, not the file) */
		for (uint64_t k = 0; k < N; k++)
			expect_page(s, N - 1 - k, data + (N - 1 - k) * PS);
		w = consistent(s, u, true);
		st = stats(s);
		if (pass >= 2) {
			assert_true(w.file_units <= 1);
			assert_true(st.bd_count <= u);
			assert_true(st.bd_reads > 0);
		} else {
			assert_int_equal(w.file_units, st.units);
		}

		/* one page of a unit, by hand, writes its unit */
		assert_int_equal(zm_store_put_range(s, 0, u, data), 0);
		if (kind_of(s, 1) == ZM_STORE_SLOT_UNIT) {
			uint64_t before = stats(s).bd_count;

			assert_int_equal(zm_store_writeback_page(s, 1), 0);
			assert_true(stats(s).bd_count >= before + 2);
			assert_int_equal(zm_store_writeback_page(s, 1), -ENOENT);
		}
		expect_all(s, data, N);
		consistent(s, u, true);
		/* puts and discards over pages on file and in units */
		assert_int_equal(zm_store_put_range(s, 1, N / 2, t + PS), 0);
		memcpy(data + PS, t + PS, N / 2 * PS);
		assert_int_equal(zm_store_put(s, N - 2, t), 0);
		memcpy(data + (N - 2) * PS, t, PS);
		assert_int_equal(zm_store_discard(s, N / 2 + 3, 5), 0);
		memset(data + (N / 2 + 3) * PS, 0, 5 * PS);
		expect_all(s, data, N);
		consistent(s, u, false);
		assert_int_equal(zm_store_discard(s, 0, N), 0);
		st = stats(s);
		assert_int_equal(st.compr_data_size + st.units + st.bd_count + st.bd_bytes +
				 st.pages_stored, 0);
		consistent(s, u, true);
		zm_store_destroy(s);
	}
	unlink(path);
	free(data), free(t);
}

/* The backing file's fault seam: every I/O of operation g_fault_op
 * fails with -EIO. */
static int g_fault_op;

static int fault_fn(int op, uint64_t index)
{
	(void)index;
	return op == g_fault_op ? -EIO : 0;
}

static int fault_teardown(void **state)
{
	zmi_store_backing_fault = NULL;
	return 0;
}

/* I/O errors on a unit on file: a read error fails the gets of its pages
 * only (-EIO, counted), and they read again once the file does; a write
 * error keeps the unit in memory, whole, counted in writeback_failures. */
static void test_file_faults(void **state)
{
	enum { N = 32 };
	char path[256];
	uint8_t *text = text_pages(N, 0.4, 22), out[PS];
	struct zm_store_config c = { .unit_pages = 4, .backing_path = path };
	struct zm_store *s;
	struct zm_store_stats st;
	zm_handle_t h[MAX_CHUNKS];

	tmp_file(path, sizeof(path));
	s = test_store_mk(&c, N);
	assert_int_equal(zm_store_put_range(s, 0, N, text), 0);
	assert_int_equal(stats(s).units, N / 4);
	assert_int_equal(zm_store_writeback_page(s, 5), 0);    /* the unit of 4..7 */
	assert_int_equal(unit_chunks(s, 5, h, MAX_CHUNKS), 0);
	assert_int_equal(stats(s).bd_count, 4);
	consistent(s, 4, true);

	g_fault_op = 'r';
	zmi_store_backing_fault = fault_fn;
	expect_page(s, 0, text);            /* the thread's cache: another unit */
	for (uint64_t i = 0; i < N; i++) {
		if (i / 4 == 1)
			assert_int_equal(zm_store_get(s, i, out), -EIO);
		else
			expect_page(s, i, text + i * PS);
	}
	assert_int_equal(zm_store_get(s, 6, out), -EIO);
	st = stats(s);
	assert_int_equal(st.failed_reads, 5);
	zmi_store_backing_fault = NULL;
	expect_all(s, text, N);
	consistent(s, 4, true);

	g_fault_op = 'w';
	zmi_store_backing_fault = fault_fn;
	assert_true(zm_store_writeback_page(s, 9) < 0);
	assert_true(zm_store_writeback(s, 0, ALL) <= 0);
	zmi_store_backing_fault = NULL;
	st = stats(s);
	printf("write errors: %llu pages kept in memory\n",
	       (unsigned long long)st.writeback_failures);
	assert_true(st.writeback_failures >= 4);
	assert_int_equal(st.bd_count, 4);
	assert_true(unit_chunks(s, 9, h, MAX_CHUNKS) > 0);
	expect_all(s, text, N);
	consistent(s, 4, true);
	/* and the file works again */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N - 4);
	expect_all(s, text, N);
	consistent(s, 4, true);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* A unit on file is not split when most of its pages leave (that would
 * bring cold pages back); read back into memory with backing_readback,
 * it must be, as a unit in memory would have been: no unit in memory
 * keeps the bytes of pages that mostly left it. */
static void test_readback_split(void **state)
{
	enum { N = 16 };
	char path[256];
	uint8_t *text = text_pages(N, 0.4, 23), *other = heap_pages(N, 8000);
	uint8_t *cur = malloc(N * PS);
	struct zm_store_config c = { .unit_pages = 4, .backing_path = path,
				     .backing_readback = true };
	struct zm_store *s;
	struct zm_store_stats st;

	assert_non_null(cur);
	tmp_file(path, sizeof(path));
	s = test_store_mk(&c, N);
	memcpy(cur, text, N * PS);
	assert_int_equal(zm_store_put_range(s, 0, N, cur), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	/* three of the first unit's pages rewritten while it is on file */
	for (uint64_t i = 0; i < 3; i++) {
		memcpy(cur + i * PS, other + i * PS, PS);
		assert_int_equal(zm_store_put(s, i, cur + i * PS), 0);
	}
	expect_page(s, 12, cur + 12 * PS);   /* the thread's cache: another unit */
	expect_page(s, 3, cur + 3 * PS);     /* read from the file, back in memory */
	expect_all(s, cur, N);
	st = stats(s);
	printf("page 3: kind %u; %llu units of %llu pages, %llu on file, %llu splits\n",
	       kind_of(s, 3), (unsigned long long)st.units, (unsigned long long)st.unit_pages,
	       (unsigned long long)st.bd_count, (unsigned long long)st.unit_splits);
	consistent(s, 4, true);
	zm_store_destroy(s);
	unlink(path);
	free(text), free(other), free(cur);
}

/* Recompression and writeback take at most the pages asked for, but
 * for the last unit, which goes whole (store.h: less than a unit more
 * than max_pages). */
static void test_cold_max_pages(void **state)
{
	enum { N = 64 };
	char path[256];
	uint8_t *text = text_pages(N, 0.5, 21);
	struct zm_store_config c = { .unit_pages = 16, .recompress_codec = "zstd",
				     .backing_path = path };
	struct zm_store *s;
	long got;

	tmp_file(path, sizeof(path));
	s = test_store_mk(&c, N);
	assert_int_equal(zm_store_put_range(s, 0, N, text), 0);
	assert_int_equal(stats(s).units, N / 16);
	for (uint64_t max = 1; max <= 8; max *= 2) {
		got = zm_store_recompress(s, 0, max);
		printf("recompress(0, %llu): %ld", (unsigned long long)max, got);
		got = got < 0 ? got : zm_store_writeback(s, 0, max);
		printf(", writeback(0, %llu): %ld\n", (unsigned long long)max, got);
		assert_true(got >= 0 && (uint64_t)got < max + 16);
	}
	for (uint64_t max = 1; max <= 8; max *= 2) {
		got = zm_store_recompress(s, 0, max);
		assert_true(got >= 0 && (uint64_t)got < max + 16);
	}
	expect_all(s, text, N);
	consistent(s, 16, true);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* Automatic tiering (idle_after_ms, recompression on the process's
 * worker) running while pages of units are put, read and discarded:
 * every page reads back as its last put. */
static void test_auto_tiering(void **state)
{
	enum { N = 96, ROUNDS = 300 };
	uint8_t *a = text_pages(N, 0.5, 19), *b = heap_pages(N, 7000);
	uint8_t *cur = malloc(N * PS);
	struct zm_store_config c = { .unit_pages = 4, .recompress_codec = "zstd",
				     .idle_after_ms = 2 };
	struct zm_store *s;
	struct rng r;

	assert_non_null(cur);
	rng_seed(&r, g_seed ^ 0xA7);
	s = test_store_mk(&c, N);
	memcpy(cur, a, N * PS);
	assert_int_equal(zm_store_put_range(s, 0, N, cur), 0);
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t at = rng_below(&r, N), n = 1 + rng_below(&r, 8);
		const uint8_t *src = rng_below(&r, 2) ? a : b;

		n = at + n > N ? N - at : n;
		switch (rng_below(&r, 4)) {
		case 0:
			assert_int_equal(zm_store_put_range(s, at, n, src + at * PS), 0);
			memcpy(cur + at * PS, src + at * PS, n * PS);
			break;
		case 1:
			assert_int_equal(zm_store_put(s, at, src + at * PS), 0);
			memcpy(cur + at * PS, src + at * PS, PS);
			break;
		case 2:
			assert_int_equal(zm_store_discard(s, at, n), 0);
			memset(cur + at * PS, 0, n * PS);
			break;
		default:
			for (uint64_t i = at; i < at + n; i++)
				expect_page(s, i, cur + i * PS);
		}
		if (round % 50 == 0)
			usleep(3000);   /* the worker's turn: pages go idle */
	}
	usleep(20000);
	expect_all(s, cur, N);
	consistent(s, 4, true);
	printf("%llu pages recompressed, %llu in units\n",
	       (unsigned long long)stats(s).recompressed_pages,
	       (unsigned long long)stats(s).unit_pages);
	zm_store_destroy(s);
	free(a), free(b), free(cur);
}

/* Stores whose last group is short, and a store smaller than a unit. */
static void test_short_groups(void **state)
{
	static const struct { uint64_t n; unsigned u; } geo[] = {
		{ 10, 16 }, { 10, 4 }, { 1, 16 }, { 3, 4 }, { 17, 16 },
	};
	uint8_t *text = text_pages(17, 0.4, 20), *cur = malloc(17 * PS);

	assert_non_null(cur);
	for (size_t g = 0; g < sizeof(geo) / sizeof(geo[0]); g++) {
		uint64_t n = geo[g].n;
		struct zm_store *s = mk("lz4", geo[g].u, n);

		memcpy(cur, text, n * PS);
		assert_int_equal(zm_store_put_range(s, 0, n, cur), 0);
		expect_all(s, cur, n);
		consistent(s, geo[g].u, true);
		if (n >= 3)
			assert_true(stats(s).units > 0);
		else
			assert_int_equal(stats(s).units, 0);
		/* the last page rewritten, the first discarded */
		assert_int_equal(zm_store_put(s, n - 1, text), 0);
		memcpy(cur + (n - 1) * PS, text, PS);
		assert_int_equal(zm_store_discard(s, 0, 1), 0);
		memset(cur, 0, PS);
		expect_all(s, cur, n);
		consistent(s, geo[g].u, true);
		assert_int_equal(zm_store_put_range(s, n - 1, 2, text), -EINVAL);
		assert_int_equal(zm_store_discard(s, 0, n), 0);
		assert_int_equal(stats(s).compr_data_size + stats(s).units, 0);
		zm_store_destroy(s);
	}
	free(text), free(cur);
}

/* The memory limit with a backing file: a put that would pass the limit
 * writes idle pages (any, if none is idle) back to make room, and fails
 * with -ENOSPC only when the file is full or the writeback limit spent
 * (store.h).  A store whose pages are in units must make room too. */
static void test_limit_backing(void **state)
{
	enum { N = 512, LIMIT_PAGES = 48, RUN = 16 };
	char path[256];
	uint8_t *data = text_pages(N, 0.4, 18);
	struct zm_store_config c = { .unit_pages = 4, .backing_path = path,
				     .limit_bytes = LIMIT_PAGES * PS };
	struct zm_store *s;
	struct zm_store_stats st;

	tmp_file(path, sizeof(path));
	s = test_store_mk(&c, N);
	for (uint64_t i = 0; i < N; i += RUN) {
		int rc = zm_store_put_range(s, i, RUN, data + i * PS);

		if (rc) {
			st = stats(s);
			fail_msg("put_range %llu+%d: %d; %llu units of %llu pages, %llu pages on "
				 "file, compr %llu, limit %llu", (unsigned long long)i, RUN, rc,
				 (unsigned long long)st.units, (unsigned long long)st.unit_pages,
				 (unsigned long long)st.bd_count,
				 (unsigned long long)st.compr_data_size,
				 (unsigned long long)st.mem_limit);
		}
	}
	st = stats(s);
	printf("%d pages under a limit of %d: %llu in %llu units, %llu on file, %llu formed\n",
	       N, LIMIT_PAGES, (unsigned long long)st.unit_pages, (unsigned long long)st.units,
	       (unsigned long long)st.bd_count, (unsigned long long)st.units_formed);
	assert_true(st.units_formed > 0);
	assert_true(st.compr_data_size <= LIMIT_PAGES * PS);
	expect_all(s, data, N);
	consistent(s, 4, false);
	zm_store_destroy(s);
	unlink(path);
	free(data);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_units_pay),
		cmocka_unit_test(test_min_saving),
		cmocka_unit_test(test_no_pay_random),
		cmocka_unit_test(test_no_pay_mix),
		cmocka_unit_test(test_declines_per_store),
		cmocka_unit_test(test_large_pages),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_corrupt_flips),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_tiering),
		cmocka_unit_test(test_cold_max_pages),
		cmocka_unit_test(test_readback_split),
		cmocka_unit_test_teardown(test_file_faults, fault_teardown),
		cmocka_unit_test(test_auto_tiering),
		cmocka_unit_test(test_short_groups),
		cmocka_unit_test(test_limit_backing),
	};
	enum { NU = sizeof(unit) / sizeof(unit[0]),
	       NM = sizeof(model_cfgs) / sizeof(model_cfgs[0]),
	       NTH = sizeof(th_cfgs) / sizeof(th_cfgs[0]) };
	struct CMUnitTest tests[NU + NM + NTH];
	char names[NM + NTH][48];

	test_args(argc, argv, &g_seed, &g_steps);
	memcpy(tests, unit, sizeof(unit));
	for (size_t i = 0; i < NM; i++) {
		snprintf(names[i], sizeof(names[i]), "test_model_%s", model_cfgs[i].name);
		tests[NU + i] = (struct CMUnitTest)cmocka_unit_test_prestate(
			test_model, (void *)&model_cfgs[i]);
		tests[NU + i].name = names[i];
	}
	for (size_t i = 0; i < NTH; i++) {
		snprintf(names[NM + i], sizeof(names[0]), "test_threads_%s", th_cfgs[i].name);
		tests[NU + NM + i] = (struct CMUnitTest)cmocka_unit_test_prestate(
			test_threads, (void *)&th_cfgs[i]);
		tests[NU + NM + i].name = names[NM + i];
	}
	return _cmocka_run_group_tests("store_units", tests,
				       test_select(tests, NU + NM + NTH), NULL, NULL);
}
