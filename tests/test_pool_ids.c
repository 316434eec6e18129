/*
 * Handles of destroyed pools.  A pool's id (bits 52..63 of its handles)
 * comes back to a new pool after ZM_POOL_MAX_POOLS creations; below it,
 * the new pool's backend hands out slots, pages and generations as the
 * old one did.  Every handle of a destroyed pool must still be refused by
 * the pools made after it, also by those with its id, and leave their
 * objects whole, however much either churned its slots (pool.h).
 */
#define ZMEM_ADVANCED  /* owner words, zm_pool_key_handle */
#include <errno.h>

#include "pooltest.h"

enum {
	CYCLES = 13000,         /* creations per configuration: each id
				   comes back three times at least, so
				   that a pool's base is reckoned from one
				   that itself started past 0 */
	NOBJ = 4,               /* live objects a pool keeps */
	CHURN = 5,              /* alloc/free rounds of one slot per pool */
	MASS = 1200,            /* objects of a mass churn: whole pages of
				   zsmalloc's handle table, given back */
	MASS_EVERY = 455,       /* divides 4095: an id's pools all do it */
	NSTALE = NOBJ + 3,      /* handles kept of a destroyed pool */
	NWORDS = 8,
	CHECK_EVERY = 1000,     /* whole-structure checks (slow at ZM_DEBUG=2) */
};

/* By pool id: the handles of the last destroyed pool that had it. */
static zm_handle_t stale[ZM_POOL_MAX_POOLS + 1][NSTALE];

static void quiet(void *arg, enum zm_log_level level, const char *msg)
{
	(void)arg, (void)level, (void)msg;
}

static uint64_t cookie(unsigned cycle, unsigned i)
{
	return mix64((uint64_t)cycle << 8 | i);
}

/* A stale handle must be refused by every call that takes one. */
static void refused(struct zm_pool *p, zm_handle_t h, unsigned cycle)
{
	char buf[16];

	if (!h)
		return;
	if (zm_pool_obj_size(p, h) != 0 || zm_pool_read(p, h, buf, 1) != -EINVAL ||
	    zm_pool_map(p, h, ZM_MAP_RO) != NULL || zm_pool_free(p, h) != -EINVAL)
		fail_msg("cycle %u: handle %#llx of a destroyed pool was taken by pool %s "
			 "(same id)", cycle, (unsigned long long)h, zm_pool_backend(p));
}

static void test_ids_come_back(void **st)
{
	const struct zm_pool_config *base = *st;
	struct zm_pool_config c = *base;
	uint64_t words[NWORDS];
	uint8_t buf[4096 * 4];
	size_t page = c.page_size ? c.page_size : 4096;
	const size_t sizes[NOBJ] = { 24, 300, page / 2 + 8, page };
	unsigned tried = 0;

	memset(stale, 0, sizeof(stale));
	c.arena_bytes = 4 << 20;
	c.compact = ZM_COMPACT_OFF;  /* no compacting thread to start and stop */
	c.words = words;
	c.nwords = NWORDS;
	zm_set_log(quiet, NULL);  /* refused handles and live objects at destroy */
	for (unsigned cycle = 0; cycle < CYCLES; cycle++) {
		struct zm_pool *p = NULL;
		zm_handle_t h[NOBJ], churned = 0, massh = 0, keyh;
		uint64_t key = cycle % NWORDS;
		unsigned id;

		memset(words, 0, sizeof(words));
		assert_int_equal(zm_pool_create(&c, &p), 0);
		/* one slot freed and taken again: its generation moves on */
		for (unsigned k = 0; k < CHURN; k++) {
			churned = zm_pool_alloc(p, 100);
			assert_true(churned != 0);
			assert_int_equal(zm_pool_free(p, churned), 0);
		}
		/* now and then many slots, freed, and the pool compacted */
		for (unsigned k = 0; cycle % MASS_EVERY == 0 && k < 3; k++) {
			static zm_handle_t mass[MASS];

			for (unsigned i = 0; i < MASS; i++)
				assert_true((mass[i] = zm_pool_alloc(p, 100)) != 0);
			for (unsigned i = 0; i < MASS; i++)
				assert_int_equal(zm_pool_free(p, mass[i]), 0);
			massh = mass[MASS - 1];
			assert_true(zm_pool_compact(p) >= 0 || !strcmp(base->allocator, "zbud") ||
				    !strcmp(base->allocator, "malloc") ||
				    !strcmp(base->allocator, "xvmalloc") ||
				    !strcmp(base->allocator, "xcfmalloc"));
		}
		for (unsigned i = 0; i < NOBJ; i++) {
			h[i] = zm_pool_alloc(p, sizes[i]);
			assert_true(h[i] != 0);
			pt_fill(buf, sizes[i], cookie(cycle, i));
			assert_int_equal(zm_pool_write(p, h[i], buf, sizes[i]), 0);
		}
		/* object 0 by an owner key (zsmalloc: only by it from now on) */
		assert_int_equal(zm_pool_bind(p, h[0], key), 0);
		keyh = zm_pool_key_handle(p, key);
		assert_true(keyh != 0);
		id = (unsigned)(h[1] >> 52);
		assert_true(id >= 1 && id <= ZM_POOL_MAX_POOLS);
		for (unsigned s = 0; s < NSTALE; s++) {
			tried += stale[id][s] != 0;
			refused(p, stale[id][s], cycle);
		}
		/* this pool's objects are whole */
		for (unsigned i = 0; i < NOBJ; i++) {
			zm_handle_t x = i ? h[i] : keyh;

			memset(buf, 0, sizes[i]);
			assert_int_equal(zm_pool_read(p, x, buf, sizes[i]), 0);
			assert_int_equal(pt_check(buf, sizes[i], cookie(cycle, i)), 0);
			assert_int_equal(zm_pool_obj_size(p, x) >= sizes[i], 1);
		}
		if (cycle % CHECK_EVERY == 0)
			assert_int_equal(zm_pool_check(p), 0);
		/* destroyed with its objects live: their slots keep their
		 * generations */
		stale[id][0] = keyh;
		for (unsigned i = 1; i < NOBJ; i++)
			stale[id][i] = h[i];
		stale[id][NOBJ] = churned;
		stale[id][NOBJ + 1] = h[0];
		stale[id][NOBJ + 2] = massh;
		zm_pool_destroy(p);
	}
	zm_set_log_stderr();
	/* every id came back at least once */
	assert_true(tried >= (CYCLES - ZM_POOL_MAX_POOLS) * (NSTALE - 1));
}

/* Pools of two backends made and destroyed in turn, one live at a time:
 * an id comes back to a pool of the backend its last pool had, whose
 * generations moved past that pool's (a handle of another backend's pool
 * would be read in this one's layout, with no such guarantee).  Every
 * stale handle of the id's last pool is refused, as above. */
static void test_ids_keep_backend(void **st)
{
	static const char *const names[2] = { "zsmalloc", "malloc" };
	static const char *last[ZM_POOL_MAX_POOLS + 1];
	const unsigned cycles = 2 * ZM_POOL_MAX_POOLS + 100;

	(void)st;
	memset(stale, 0, sizeof(stale));
	memset(last, 0, sizeof(last));
	zm_set_log(quiet, NULL);
	for (unsigned cycle = 0; cycle < cycles; cycle++) {
		struct zm_pool_config c = { .allocator = names[cycle % 2],
					    .arena_bytes = 4 << 20,
					    .compact = ZM_COMPACT_OFF };
		struct zm_pool *p = NULL;
		zm_handle_t h[NOBJ];
		unsigned id;

		assert_int_equal(zm_pool_create(&c, &p), 0);
		for (unsigned i = 0; i < NOBJ; i++) {
			/* the last a page: zsmalloc's huge objects */
			h[i] = zm_pool_alloc(p, i + 1 < NOBJ ? 100 : 4096);
			assert_true(h[i] != 0);
			assert_int_equal(zm_pool_write(p, h[i], &cycle, sizeof(cycle)), 0);
		}
		id = (unsigned)(h[0] >> 52);
		if (last[id] && strcmp(last[id], names[cycle % 2]))
			fail_msg("cycle %u: id %u of a %s pool came back to a %s pool", cycle, id,
				 last[id], names[cycle % 2]);
		for (unsigned s = 0; s < NOBJ; s++)
			refused(p, stale[id][s], cycle);
		for (unsigned i = 0; i < NOBJ; i++) {
			unsigned got = 0;

			assert_int_equal(zm_pool_read(p, h[i], &got, sizeof(got)), 0);
			assert_int_equal(got, cycle);
		}
		last[id] = names[cycle % 2];
		for (unsigned i = 0; i < NOBJ; i++)
			stale[id][i] = h[i];
		zm_pool_destroy(p);
	}
	zm_set_log_stderr();
}

int main(void)
{
	struct CMUnitTest tests[PT_NCONFIGS + 1];
	size_t n = 0;

	/* each backend once: page size and span method change no handle */
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		if (pt_configs[i].page_size || pt_configs[i].span)
			continue;
		tests[n] = (struct CMUnitTest)cmocka_unit_test_prestate(test_ids_come_back,
									(void *)&pt_configs[i]);
		tests[n++].name = pt_name(&pt_configs[i]);
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_ids_keep_backend);
	return _cmocka_run_group_tests("pool ids", tests, test_select(tests, n), NULL, NULL);
}
