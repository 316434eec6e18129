/*
 * The model of the store's cold-data tiering: random puts, gets,
 * discards, marks, recompressions, writebacks and limit changes against
 * a reference copy of every page, with and without a backing file and a
 * limit, for 4 KiB and 16 KiB pages.
 *
 *   test_store_tier_model [--seed N] [--steps N]     (or ZM_TEST_SEED=N)
 */

#include "tiertest.h"

static uint64_t g_seed;
static long g_steps = 3000;

/* ---- the model ---------------------------------------------------------- */

struct model_cfg {
	const char *name;
	size_t ps;
	bool backing;
	size_t limit_pages;   /* 0: none */
	uint64_t wb_limit;
	bool cache_kept;      /* the file through the page cache (the seam) */
	bool buffered;        /* O_DIRECT refused (the seam): flush and drop */
};

static const struct model_cfg model_cfgs[] = {
	{ "4k", 4096, false, 0, 0, false, false },
	{ "4k limit", 4096, false, 64, 0, false, false },
	{ "4k file", 4096, true, 0, 0, false, false },
	{ "4k file limit", 4096, true, 64, 0, false, false },
	{ "4k file limit wbl", 4096, true, 64, 60, false, false },
	{ "4k file limit kept", 4096, true, 64, 0, true, false },
	{ "4k file buffered", 4096, true, 0, 0, false, true },
	{ "4k file limit buffered", 4096, true, 64, 0, false, true },
	{ "16k", 16384, false, 0, 0, false, false },
	{ "16k limit", 16384, false, 40, 0, false, false },
	{ "16k file", 16384, true, 0, 0, false, false },
	{ "16k file limit", 16384, true, 40, 0, false, false },
	{ "16k file limit wbl", 16384, true, 40, 60, false, false },
	{ "16k file limit kept", 16384, true, 40, 0, true, false },
	{ "16k file limit buffered", 16384, true, 40, 0, false, true },
};

#define MODEL_PAGES 160

struct model {
	struct zm_store *s;
	long soft;                 /* header promises broken (reported at the end) */
	size_t ps;
	uint8_t *data;             /* the last content of every page */
	bool written[MODEL_PAGES]; /* put since the last discard */
	bool maybe_idle[MODEL_PAGES]; /* marked, not accessed since */
	unsigned kinds[MODEL_PAGES];
	size_t lens[MODEL_PAGES];
};

/* A promise of the header broken: the run goes on, to find what else
 * breaks, and fails at its end; the first few of each kind are shown. */
#define MODEL_SOFT(m, cond, ...)                                              \
	do {                                                                  \
		static int shown_;                                            \
                                                                              \
		if (!(cond)) {                                                \
			(m)->soft++;                                          \
			if (shown_++ < 3) {                                   \
				printf("step %ld: %s: ", step, #cond);        \
				printf(__VA_ARGS__);                          \
				printf("\n");                                \
			}                                                     \
		}                                                             \
	} while (0)

static void model_snapshot(struct model *m)
{
	for (uint64_t i = 0; i < MODEL_PAGES; i++)
		assert_int_equal(zm_store_slot_info(m->s, i, &m->kinds[i], NULL, &m->lens[i]), 0);
}

/* Whole-store consistency: the checker, and the tiering counters against
 * a walk of the slots. */
static void model_check(struct model *m, const struct model_cfg *mc)
{
	struct zm_store_stats st = stats(m->s);
	uint64_t file = 0, pool = 0, huge = 0, used = 0, bytes = 0;

	CHECK(m->s);
	model_snapshot(m);
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		file += m->kinds[i] == ZM_STORE_SLOT_FILE;
		pool += m->kinds[i] == ZM_STORE_SLOT_POOL;
		huge += m->kinds[i] == ZM_STORE_SLOT_HUGE;
		used += m->kinds[i] != ZM_STORE_SLOT_EMPTY;
		bytes += m->kinds[i] == ZM_STORE_SLOT_FILE ? m->lens[i] : 0;
		assert_true(m->kinds[i] != ZM_STORE_SLOT_EMPTY || !m->written[i]);
		assert_true(m->kinds[i] == ZM_STORE_SLOT_EMPTY || m->written[i]);
	}
	assert_int_equal(st.bd_count, file);
	assert_int_equal(st.bd_bytes, bytes);
	assert_int_equal(st.pool_objects, pool + huge);
	assert_int_equal(st.pages_stored, used);
	assert_true(st.secondary_pages <= pool + huge);
	assert_true(st.incompressible_pages <= huge);
	if (!mc->backing) {
		assert_int_equal(file, 0);
		assert_int_equal(st.writeback_left, 0);
	} else if (mc->wb_limit) {
		assert_int_equal(st.writeback_left, mc->wb_limit - st.bd_writes);
	} else {
		assert_int_equal(st.writeback_left, UINT64_MAX);
	}
	assert_true(st.bd_writes >= st.bd_count);
}

static void model_verify(struct model *m, uint64_t i)
{
	uint8_t *out = malloc(m->ps);

	assert_int_equal(zm_store_get(m->s, i, out), 0);
	if (memcmp(out, m->data + i * m->ps, m->ps))
		fail_msg("page %llu: not its last content (slot kind %u, %s)",
			 (unsigned long long)i, kind_of(m->s, i),
			 m->written[i] ? "written" : "never written or discarded");
	free(out);
	m->maybe_idle[i] = false;
}

/* A pick's pages: each slot a call moved (changed kind or length) must
 * have matched what it asked for. */
static void model_picked(struct model *m, long step, const char *what, unsigned which,
			 const unsigned *kinds, const size_t *lens)
{
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		bool idle_ok, huge_ok;

		if (kinds[i] == m->kinds[i] && lens[i] == m->lens[i])
			continue;
		assert_true(kinds[i] == ZM_STORE_SLOT_POOL || kinds[i] == ZM_STORE_SLOT_HUGE);
		idle_ok = !(which & ZM_STORE_PICK_IDLE) || m->maybe_idle[i];
		huge_ok = !(which & (ZM_STORE_PICK_HUGE | ZM_STORE_PICK_INCOMPRESSIBLE)) ||
			  kinds[i] == ZM_STORE_SLOT_HUGE;
		MODEL_SOFT(m, idle_ok && huge_ok,
			   "%s(%#x) moved slot %llu (kind %u, %zu bytes -> kind %u, %zu bytes), "
			   "which it does not pick", what, which, (unsigned long long)i, kinds[i],
			   lens[i], m->kinds[i], m->lens[i]);
	}
}

static void model_run(const struct model_cfg *mc)
{
	enum { SRC = 24 };
	size_t ps = mc->ps, limit = mc->limit_pages * ps;
	struct zm_store_config c = { .page_size = ps, .recompress_codec = "zstd",
				     .limit_bytes = limit, .writeback_limit = mc->wb_limit };
	static const unsigned picks[] = {
		0, ZM_STORE_PICK_IDLE, ZM_STORE_PICK_HUGE, ZM_STORE_PICK_INCOMPRESSIBLE,
		ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE,
	};
	uint8_t *src[PK_NR], *page = malloc(ps);
	unsigned kinds[MODEL_PAGES];
	size_t lens[MODEL_PAGES];
	struct model m = { .ps = ps };
	long nospc = 0, moved = 0, recompressed = 0;
	char path[256] = "";
	struct rng r;

	rng_seed(&r, g_seed ^ mix64(ps + 31 * mc->limit_pages + mc->backing + mc->wb_limit));
	for (int k = 0; k < PK_NR; k++)
		src[k] = make_pages(SRC, ps, (enum page_kind)k, 5000 + 100 * (uint64_t)k);
	if (mc->backing) {
		tmp_file(path, sizeof(path), st_direct_dir());
		c.backing_path = path;
	}
	zmi_store_backing_cache_fail = mc->cache_kept;
	zmi_store_backing_direct_fail = mc->buffered;
	m.s = test_store_mk(&c, MODEL_PAGES);
	zmi_store_backing_cache_fail = 0;
	zmi_store_backing_direct_fail = 0;
	if (mc->cache_kept)
		assert_int_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_NONE);
	if (mc->backing && !mc->cache_kept) {
		bool works;

		st_direct_probe(&works);
		printf("backing_cache_mode %llu\n",
		       (unsigned long long)stats(m.s).backing_cache_mode);
		if (mc->buffered)
			assert_int_not_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_DIRECT);
		else if (works)
			assert_int_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_DIRECT);
	}
	m.data = calloc(MODEL_PAGES, ps);
	assert_non_null(m.data);
	for (long step = 0; step < g_steps; step++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t i = rng_below(&r, MODEL_PAGES);
		struct zm_store_stats st;
		long got;
		int rc;

		if (op < 34) {                          /* put */
			enum page_kind k = (enum page_kind)rng_below(&r, PK_NR);

			memcpy(page, src[k] + rng_below(&r, SRC) * ps, ps);
			if (k != PK_SAME && k != PK_ZERO && rng_below(&r, 2))
				memcpy(page + 8 * rng_below(&r, 4), &step, sizeof(step));
			st = stats(m.s);
			rc = zm_store_put(m.s, i, page);
			if (rc == 0) {
				memcpy(m.data + i * ps, page, ps);
				m.written[i] = true;
			} else {
				/* refused only by a limit with no file to spill
				 * to, or with its writes spent */
				assert_int_equal(rc, -ENOSPC);
				assert_true(limit);
				if (mc->backing) {
					struct zm_store_stats a = stats(m.s);

					MODEL_SOFT(&m, mc->wb_limit && a.writeback_left == 0,
						   "put %llu (kind %d) refused: limit %llu, compr %llu, "
						   "pool %llu, %llu objects, %llu on file",
						   (unsigned long long)i, (int)k,
						   (unsigned long long)a.mem_limit,
						   (unsigned long long)a.compr_data_size,
						   (unsigned long long)a.mem_used_total,
						   (unsigned long long)a.pool_objects,
						   (unsigned long long)a.bd_count);
				}
				nospc++;
			}
			/* a failed put leaves the slot as it was, mark and all */
			if (rc == 0)
				m.maybe_idle[i] = false;
			(void)st;
		} else if (op < 60) {                   /* get */
			model_verify(&m, i);
		} else if (op < 66) {                   /* discard */
			uint64_t n = 1 + rng_below(&r, 8);

			n = i + n > MODEL_PAGES ? MODEL_PAGES - i : n;
			assert_int_equal(zm_store_discard(m.s, i, n), 0);
			memset(m.data + i * ps, 0, n * ps);
			memset(m.written + i, 0, n);
			memset(m.maybe_idle + i, 0, n);
		} else if (op < 71) {                   /* mark */
			unsigned age = rng_below(&r, 4) ? 0 : 1;
			long want = 0;

			model_snapshot(&m);
			for (uint64_t k = 0; k < MODEL_PAGES; k++) {
				bool in_pool = m.kinds[k] == ZM_STORE_SLOT_POOL ||
					       m.kinds[k] == ZM_STORE_SLOT_HUGE;

				want += in_pool;
				if (in_pool)
					m.maybe_idle[k] = true;
			}
			got = zm_store_mark_idle(m.s, age);
			assert_true(got >= 0 && got <= want);
			if (!age)
				assert_int_equal(got, want);
			assert_int_equal(stats(m.s).idle_pages, got);
		} else if (op < 79) {                   /* recompress */
			unsigned which = picks[rng_below(&r, 5)];
			uint64_t max = rng_below(&r, 3) ? 1 + rng_below(&r, 32) : ALL;

			model_snapshot(&m);
			memcpy(kinds, m.kinds, sizeof(kinds));
			memcpy(lens, m.lens, sizeof(lens));
			got = zm_store_recompress(m.s, which, max);
			assert_true(got >= 0 && (uint64_t)got <= max);
			if (which == ZM_STORE_PICK_INCOMPRESSIBLE)
				assert_int_equal(got, 0);   /* never tried again */
			model_snapshot(&m);
			model_picked(&m, step, "recompress", which, kinds, lens);
			recompressed += got;
		} else if (op < 87) {                   /* writeback */
			unsigned which = picks[rng_below(&r, 5)];
			uint64_t max = rng_below(&r, 3) ? 1 + rng_below(&r, 16) : ALL;
			uint64_t left = stats(m.s).writeback_left;

			model_snapshot(&m);
			memcpy(kinds, m.kinds, sizeof(kinds));
			memcpy(lens, m.lens, sizeof(lens));
			got = zm_store_writeback(m.s, which, max);
			if (!mc->backing) {
				assert_int_equal(got, -EOPNOTSUPP);
				continue;
			}
			if (left == 0) {
				MODEL_SOFT(&m, got == -EDQUOT,
					   "writeback(%#x) with writeback_limit spent: %ld", which, got);
				continue;
			}
			assert_true(got >= 0 && (uint64_t)got <= max && (uint64_t)got <= left);
			model_snapshot(&m);
			model_picked(&m, step, "writeback", which, kinds, lens);
			for (uint64_t k = 0; k < MODEL_PAGES; k++)
				if (kinds[k] != m.kinds[k])
					assert_int_equal(m.kinds[k], ZM_STORE_SLOT_FILE);
			moved += got;
		} else if (op < 94) {                   /* writeback one page */
			unsigned kind = kind_of(m.s, i);
			uint64_t left = stats(m.s).writeback_left;
			bool in_pool = kind == ZM_STORE_SLOT_POOL || kind == ZM_STORE_SLOT_HUGE;

			rc = zm_store_writeback_page(m.s, i);
			if (!mc->backing)
				assert_int_equal(rc, -EOPNOTSUPP);
			else if (in_pool && left)
				assert_int_equal(rc, 0);
			else if (in_pool)
				assert_int_equal(rc, -EDQUOT);
			else if (!left)
				MODEL_SOFT(&m, rc == -EDQUOT,
					   "writeback_page of a kind %u slot with writeback_limit "
					   "spent: %d", kind, rc);
			else
				assert_int_equal(rc, -ENOENT);
			if (rc == 0) {
				assert_int_equal(kind_of(m.s, i), ZM_STORE_SLOT_FILE);
				moved++;
			}
		} else if (op < 97) {                   /* limit */
			if (limit) {
				size_t l = limit / 2 + rng_below(&r, limit / 2 + 1);

				assert_int_equal(zm_store_set_limit(m.s, l), 0);
				assert_int_equal(stats(m.s).mem_limit, l);
			}
		} else {
			assert_true(zm_store_compact(m.s) >= 0);
		}
		if (step % 64 == 0)
			model_check(&m, mc);
		if (step % 1000 == 999)
			for (uint64_t k = 0; k < MODEL_PAGES; k++)
				model_verify(&m, k);
	}
	model_check(&m, mc);
	for (uint64_t k = 0; k < MODEL_PAGES; k++)
		model_verify(&m, k);
	assert_int_equal(m.soft, 0);
	{
		struct zm_store_stats st = stats(m.s);

		printf("%-18s %ld steps: %ld refused, %ld recompressed, %ld written back "
		       "(%llu by hand or by the limit), %llu read back, %llu on file\n",
		       mc->name, g_steps, nospc, recompressed, moved,
		       (unsigned long long)st.bd_writes, (unsigned long long)st.bd_reads,
		       (unsigned long long)st.bd_count);
		if (mc->backing)
			assert_true(st.bd_writes >= (uint64_t)moved);
	}
	zm_store_destroy(m.s);
	if (*path)
		unlink(path);
	for (int k = 0; k < PK_NR; k++)
		free(src[k]);
	free(m.data);
	free(page);
}



static void test_model(void **state)
{
	model_run(*state);
}

int main(int argc, char **argv)
{
	enum { NM = sizeof(model_cfgs) / sizeof(model_cfgs[0]) };
	struct CMUnitTest tests[NM];
	char names[NM][48];
	const char *env = getenv("ZM_TEST_SEED");

	test_args(argc, argv, &g_seed, &g_steps);
	if (env) {
		g_seed = strtoull(env, NULL, 0);
		printf("seed %llu from ZM_TEST_SEED\n", (unsigned long long)g_seed);
	}
	for (size_t i = 0; i < NM; i++) {
		snprintf(names[i], sizeof(names[i]), "test_model %s", model_cfgs[i].name);
		tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
			test_model, NULL, teardown, (void *)&model_cfgs[i]);
		tests[i].name = names[i];
	}
	return _cmocka_run_group_tests("store_tier_model", tests, test_select(tests, NM), NULL, NULL);
}
