/*
 * libFuzzer harness for the pool layer: the input bytes are a program of
 * operations on a pool of the backend its first byte picks from
 * zm_pool_backends() (so every backend is fuzzed),
 * checked against a model: malloc of a size taken from the bytes, free,
 * write, read-and-compare, map in each mode, compact, bad frees, and
 * binding objects to owner words (pool.h), whose owner bits must never
 * change.  Any mismatch or sanitizer report is a finding.
 *
 *   make fuzz            build build/fuzz/fuzz_pool (clang)
 *   build/fuzz/fuzz_pool -max_total_time=60
 */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/pool.h>

#define MAXO 64

static void check(int ok)
{
	if (!ok)
		abort();
}

#define NKEYS (2 * MAXO)
#define OWNER_BITS(k) (((uint64_t)(k) * 0x9E3779B97F4A7C15ull) & ZM_POOL_OWNER_MASK)

struct obj {
	zm_handle_t h;
	uint16_t size;
	uint8_t fill;
	int key;             /* owner word it is bound to, or -1 */
};

static void release(struct zm_pool *p, const struct obj *o)
{
	if (o->key >= 0)
		check(zm_pool_free_key(p, (uint64_t)o->key) == 0);
	else
		check(zm_pool_free(p, o->h) == 0);
}

static void verify(struct zm_pool *p, const struct obj *o, uint8_t *buf)
{
	check(zm_pool_read(p, o->h, buf, o->size) == 0);
	for (size_t i = 0; i < o->size; i++)
		check(buf[i] == (uint8_t)(o->fill + i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static uint8_t buf[4096];
	struct zm_pool_config c = { .compact = ZM_COMPACT_OFF, .arena_bytes = 64u << 20,
				    .limit_bytes = 4u << 20 };
	static uint64_t words[NKEYS];
	struct obj o[MAXO];
	struct zm_pool *p;
	size_t n = 0, i = 0;

	if (len < 1)
		return 0;
	for (int k = 0; k < NKEYS; k++)
		words[k] = OWNER_BITS(k);
	c.words = words;
	c.nwords = NKEYS;
	{
		const char *const *b = zm_pool_backends();
		size_t nb = 0;

		while (b[nb])
			nb++;
		c.allocator = b[(data[0] >> 1) % nb];
	}
	c.span = data[0] & 1 ? ZM_SPAN_COPY : ZM_SPAN_CONTIG;
	if (zm_pool_create(&c, &p))
		return 0;
	for (i = 1; i + 2 < len; i += 3) {
		unsigned op = data[i] % 9, arg = data[i + 1] | (unsigned)data[i + 2] << 8;

		switch (op) {
		case 0: case 1: {                    /* malloc + write */
			uint16_t size = (uint16_t)(1 + arg % 4096);
			zm_handle_t h;

			if (n == MAXO)
				break;
			h = zm_pool_alloc(p, size);
			if (!h)
				break;               /* the limit */
			o[n] = (struct obj){ h, size, (uint8_t)arg, -1 };
			for (size_t k = 0; k < size; k++)
				buf[k] = (uint8_t)(o[n].fill + k);
			check(zm_pool_write(p, h, buf, size) == 0);
			n++;
			break;
		}
		case 2:                              /* free */
			if (!n)
				break;
			arg %= n;
			verify(p, &o[arg], buf);
			release(p, &o[arg]);
			o[arg] = o[--n];
			break;
		case 3:                              /* read */
			if (n)
				verify(p, &o[arg % n], buf);
			break;
		case 4: {                            /* map */
			struct obj *x;
			enum zm_map_mode mode = (enum zm_map_mode)(1 + arg % 3);
			uint8_t *m;

			if (!n)
				break;
			x = &o[(arg >> 2) % n];
			m = zm_pool_map(p, x->h, mode);
			check(m != NULL);
			if (mode & ZM_MAP_RO)
				for (size_t k = 0; k < x->size; k++)
					check(m[k] == (uint8_t)(x->fill + k));
			if (mode & ZM_MAP_WO) {
				x->fill++;
				for (size_t k = 0; k < x->size; k++)
					m[k] = (uint8_t)(x->fill + k);
			}
			zm_pool_unmap(p, x->h);
			break;
		}
		case 5:                              /* compact */
			zm_pool_compact(p);
			break;
		case 7: {                            /* bind to a free key */
			struct obj *x;
			int key = (int)((arg >> 4) % NKEYS);

			if (!n)
				break;
			x = &o[arg % n];
			if (x->key >= 0 || zm_pool_key_handle(p, (uint64_t)key))
				break;
			check(zm_pool_bind(p, x->h, (uint64_t)key) == 0);
			x->key = key;
			x->h = zm_pool_key_handle(p, (uint64_t)key);
			check(x->h != 0);
			verify(p, x, buf);
			break;
		}
		case 6:                              /* a bad handle: refused */
			if (strcmp(c.allocator, "malloc") && n)  /* malloc cannot tell */
				check(zm_pool_free(p, o[arg % n].h ^ 2) < 0);
			break;
		default:
			check(zm_pool_check(p) == 0);
		}
	}
	check(zm_pool_check(p) == 0);
	while (n) {
		n--;
		verify(p, &o[n], buf);
		release(p, &o[n]);
	}
	for (int k = 0; k < NKEYS; k++)
		check(words[k] == OWNER_BITS(k));
	zm_pool_destroy(p);
	return 0;
}
