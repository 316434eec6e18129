/*
 * libFuzzer harness for tmem: the input bytes are a program of tmem calls
 * on a small instance (a budget of 32 pages, so that puts evict each
 * other at once) of the backend the first byte picks from
 * zm_pool_backends(), with three pools whose kinds the bytes choose,
 * checked against a model as tests/test_tmem_model.c does:
 *
 *   persistent gets equal the model exactly; ephemeral gets miss or
 *   equal it (a miss: the model forgets the key); a failed put leaves
 *   the key empty; flush counts agree; calls on destroyed pools and bad
 *   lengths are refused with -EINVAL; at the end the statistics agree
 *   with the model and zm_tmem_check() is clean.
 *
 * Any mismatch aborts; so does any sanitizer report.
 *
 *   make fuzz            build build/fuzz/fuzz_tmem (clang)
 *   build/fuzz/fuzz_tmem -max_total_time=60
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/pool.h>
#include <zmem/tmem.h>

#define PS 4096
#define NPOOL 3
#define NOID 4
#define NIDX 32       /* 16 low indices and 16 in the next run of 256 */

static void check(int ok)
{
	if (!ok)
		abort();
}

enum { NONE, SURE, MAYBE };

struct ent {
	uint32_t cookie;
	uint16_t len;
	uint8_t noise, state;
};

struct mpool {
	int id;
	int persistent, excl;
	struct ent e[NOID][NIDX];
};

static uint32_t idx_of(unsigned i)
{
	return i < 16 ? i : 256 + (i - 16) * 3;
}

/* A value: noise eighths of random bytes, the rest a pattern of the
 * cookie, which is also its first four bytes. */
static uint8_t vbyte(uint32_t cookie, unsigned noise, size_t len, size_t i)
{
	if (i < 4)
		return (uint8_t)(cookie >> (i * 8));
	if (i < len * noise / 8) {
		uint64_t x = (cookie + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;

		x ^= x >> 31;
		x *= 0x94D049BB133111EBull;
		return (uint8_t)(x >> 29);
	}
	return (uint8_t)(cookie ^ (i % 7) * 37);
}

static void fill(uint8_t *b, const struct ent *x)
{
	for (size_t i = 0; i < x->len; i++)
		b[i] = vbyte(x->cookie, x->noise, x->len, i);
}

static int same(const uint8_t *b, const struct ent *x)
{
	for (size_t i = 0; i < x->len; i++)
		if (b[i] != vbyte(x->cookie, x->noise, x->len, i))
			return 0;
	return 1;
}

static void pool_make(struct zm_tmem *t, struct mpool *m, unsigned how)
{
	struct zm_tmem_pool_config c = { 0 };

	memset(m, 0, sizeof(*m));
	m->persistent = how & 1;
	m->excl = !m->persistent && (how & 2);
	c.kind = m->persistent ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL;
	c.exclusive_gets = m->excl;
	if (how & 4)
		c.max_mean_zsize = SIZE_MAX;
	m->id = zm_tmem_pool_create(t, &c);
	check(m->id > 0);
}

static void do_get(struct zm_tmem *t, struct mpool *m, unsigned o, unsigned i, int short_cap,
		   uint8_t *buf)
{
	struct ent *x = &m->e[o][i];
	size_t cap = short_cap && x->state != NONE && x->len > 1 ? x->len - 1u : PS;
	int rc = zm_tmem_get(t, m->id, o, idx_of(i), buf, cap);

	if (rc == -ENOENT) {
		check(x->state != SURE);
		x->state = NONE;
		return;
	}
	check(x->state != NONE);
	if (cap < PS) {
		check(rc == -ENOSPC);
		return;
	}
	check(rc == (int)x->len && same(buf, x));
	if (m->excl)
		x->state = NONE;
}

static long model_count(const struct mpool *m, int o, long *maybe)
{
	long sure = 0;

	*maybe = 0;
	for (unsigned a = o < 0 ? 0 : (unsigned)o; a < (o < 0 ? NOID : (unsigned)o + 1); a++)
		for (unsigned i = 0; i < NIDX; i++) {
			sure += m->e[a][i].state == SURE;
			*maybe += m->e[a][i].state == MAYBE;
		}
	return sure;
}

static void forget(struct mpool *m, int o)
{
	for (unsigned a = o < 0 ? 0 : (unsigned)o; a < (o < 0 ? NOID : (unsigned)o + 1); a++)
		for (unsigned i = 0; i < NIDX; i++)
			m->e[a][i].state = NONE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static uint8_t buf[PS];
	static struct mpool mp[NPOOL];
	static const unsigned pcts[4] = { 0, 100, 20, 50 };
	struct zm_tmem_config c = { .budget_bytes = 32 * PS };
	struct zm_tmem_stats st;
	struct zm_tmem *t;
	int dead = 0;

	if (len < 2)
		return 0;
	{
		const char *const *b = zm_pool_backends();
		size_t nb = 0;

		while (b[nb])
			nb++;
		c.allocator = b[data[0] % nb];
	}
	c.persistent_pct = pcts[(data[0] >> 4) & 3];
	if (data[0] & 0x40)
		c.codec = "zstd";
	check(zm_tmem_create(&c, &t) == 0);
	for (unsigned p = 0; p < NPOOL; p++)
		pool_make(t, &mp[p], data[1] >> (p * 2));
	for (size_t k = 2; k + 3 < len; k += 4) {
		unsigned op = data[k] & 7, a = data[k + 1], b = data[k + 2], w = data[k + 3];
		struct mpool *m = &mp[a % NPOOL];
		unsigned o = (b >> 5) & (NOID - 1), i = b & (NIDX - 1);
		struct ent *x = &m->e[o][i];

		switch (op) {
		case 0: case 1: {                    /* put */
			struct ent v;
			int rc;

			v.cookie = (uint32_t)(k * 0x10001u) ^ w << 8 ^ a;
			v.noise = (uint8_t)((a >> 2) % 9);
			v.len = (uint16_t)(w & 0x80 ? PS - (w & 3) : 1 + (w * 37 + (a >> 4) * 499) % PS);
			fill(buf, &v);
			rc = zm_tmem_put(t, m->id, o, idx_of(i), buf, v.len);
			if (rc == 0) {
				v.state = m->persistent ? SURE : MAYBE;
				*x = v;
				/* random bytes cannot come under 7/8 of a page */
				check(!(v.noise == 8 && v.len == PS));
				break;
			}
			check(rc == -ENOSPC || rc == -E2BIG);
			x->state = NONE;
			check(zm_tmem_get(t, m->id, o, idx_of(i), buf, PS) == -ENOENT);
			break;
		}
		case 2: case 3:                      /* get, or with too small a buffer */
			do_get(t, m, o, i, op == 3, buf);
			break;
		case 4: {                            /* flush a page */
			int rc = zm_tmem_flush_page(t, m->id, o, idx_of(i));

			check(x->state == SURE ? rc == 0 : x->state == NONE ? rc == -ENOENT :
			      rc == 0 || rc == -ENOENT);
			x->state = NONE;
			break;
		}
		case 5: {                            /* flush an object */
			long maybe, sure = model_count(m, (int)o, &maybe);
			long n = zm_tmem_flush_object(t, m->id, o);

			check(n >= sure && n <= sure + maybe);
			forget(m, (int)o);
			break;
		}
		case 6: {                            /* flush the pool, now and then */
			long maybe, sure, n;

			if (w & 7) {
				do_get(t, m, o, i, 0, buf);
				break;
			}
			sure = model_count(m, -1, &maybe);
			n = zm_tmem_flush_pool(t, m->id);
			check(n >= sure && n <= sure + maybe);
			forget(m, -1);
			break;
		}
		default:                             /* a new pool, or bad calls */
			if (w & 1) {
				if (w & 2) {
					check(zm_tmem_pool_destroy(t, m->id) == 0);
					dead = m->id;
					pool_make(t, m, w >> 2);
					check(m->id != dead);
				}
				break;
			}
			if (dead) {
				check(zm_tmem_put(t, dead, o, i, buf, 10) == -EINVAL);
				check(zm_tmem_get(t, dead, o, i, buf, PS) == -EINVAL);
				check(zm_tmem_flush_page(t, dead, o, i) == -EINVAL);
				check(zm_tmem_flush_object(t, dead, o) == -EINVAL);
				check(zm_tmem_flush_pool(t, dead) == -EINVAL);
				check(zm_tmem_pool_destroy(t, dead) == -EINVAL);
			}
			check(zm_tmem_put(t, m->id, o, idx_of(i), buf, 0) == -EINVAL);
			check(zm_tmem_put(t, m->id, o, idx_of(i), buf, PS + 1 + w) == -EINVAL);
			check(zm_tmem_put(t, m->id, o, idx_of(i), NULL, 1) == -EINVAL);
			check(zm_tmem_get(t, m->id, o, idx_of(i), NULL, PS) == -EINVAL);
			check(zm_tmem_get(t, 0, o, idx_of(i), buf, PS) == -EINVAL);
			/* a put refused as bad input leaves the old page, or
			 * nothing (a failed put removes it): never other bytes */
			{
				int rc = zm_tmem_get(t, m->id, o, idx_of(i), buf, PS);

				if (rc == -ENOENT) {
					x->state = NONE;
					break;
				}
				check(x->state != NONE && rc == (int)x->len && same(buf, x));
				if (m->excl)
					x->state = NONE;
			}
			break;
		}
	}
	/* the statistics against the model: persistent pools exactly,
	 * ephemeral ones at most what the model knows of */
	for (unsigned p = 0; p < NPOOL; p++) {
		long maybe, sure = model_count(&mp[p], -1, &maybe);

		check(zm_tmem_stats(t, mp[p].id, &st) == 0);
		check(st.hits + st.misses == st.gets && st.puts_stored <= st.puts);
		if (mp[p].persistent)
			check(st.persistent_pages == (uint64_t)sure && !st.ephemeral_pages);
		else
			check(st.ephemeral_pages <= (uint64_t)maybe && !st.persistent_pages);
	}
	check(zm_tmem_stats(t, 0, &st) == 0);
	check(st.pool_bytes <= st.budget_bytes);
	check(zm_tmem_check(t) == 0);
	zm_tmem_destroy(t);
	return 0;
}
