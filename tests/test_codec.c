/* Unit tests of the codec layer: every codec of the build round-trips
 * zero, random and text pages of 4..64 KiB; incompressible data gets
 * -ENOSPC without writing past dst_cap; corrupt, truncated and random input
 * gets -EIO and never touches memory outside the buffers (buffers are
 * allocated to their exact size, so ASan sees any overrun); bad names and
 * arguments get -EINVAL.  Random cases are seeded: --seed N replays. */
#include <errno.h>
#include <pthread.h>

#include "testutil.h"
#include <zmem/codec.h>

static uint64_t seed;

/* Codec names to test: every one of the build, plus some levels. */
static const char *const extra[] = { "zstd:1", "zstd:19", "zstd:-5", "lz4:8" };

#define CANARY 64
#define CANARY_BYTE 0xa5

static void fill_random(struct rng *r, unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rng_next(r);
}

static void fill_text(struct rng *r, unsigned char *p, size_t n)
{
	static const char *const w[] = {
		"the", "memory", "of", "a", "page", "compressed", "and", "stored",
		"in", "pool", "zsmalloc", "allocator", "to", "is", "with", "kernel",
	};
	size_t i = 0;

	while (i < n) {
		const char *s = w[rng_below(r, 16) * rng_below(r, 16) / 16];
		size_t l = strlen(s);

		for (size_t j = 0; j < l && i < n; j++)
			p[i++] = (unsigned char)s[j];
		if (i < n)
			p[i++] = rng_below(r, 12) ? ' ' : '\n';
	}
}

/* pages: 0 zero, 1 random, 2 text, 3 half text half zero, 4 one byte set */
static void fill_kind(struct rng *r, int kind, unsigned char *p, size_t n)
{
	memset(p, 0, n);
	switch (kind) {
	case 1: fill_random(r, p, n); break;
	case 2: fill_text(r, p, n); break;
	case 3: fill_text(r, p, n / 2); break;
	case 4: p[rng_below(r, n)] = 1; break;
	}
}

static struct zm_codec *mk(const char *name)
{
	struct zm_codec *c = NULL;

	assert_int_equal(zm_codec_create(name, 0, &c), 0);
	assert_non_null(c);
	return c;
}

/* Call fn for every codec name of the build and the extra levels. */
static void for_each_codec(void (*fn)(const char *name))
{
	const char *const *l = zm_codec_list();

	for (size_t i = 0; l[i]; i++)
		fn(l[i]);
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		fn(extra[i]);
}

static void test_list(void **st)
{
	const char *const *l = zm_codec_list();
	int seen_lz4 = 0, seen_zstd = 0, seen_none = 0, seen_lzo = 0;
	struct zm_codec *c;

	assert_string_equal(l[0], "lz4"); /* the default first */
	for (size_t i = 0; l[i]; i++) {
		seen_lz4 += !strcmp(l[i], "lz4");
		seen_zstd += !strcmp(l[i], "zstd");
		seen_none += !strcmp(l[i], "none");
		seen_lzo += !strcmp(l[i], "lzo");
		c = mk(l[i]);
		assert_string_equal(zm_codec_name(c), l[i]);
		zm_codec_destroy(c);
	}
	assert_int_equal(seen_lz4 + seen_zstd + seen_none, 3);
#ifdef ZM_HAVE_LZO
	assert_int_equal(seen_lzo, 1);
#else
	assert_int_equal(seen_lzo, 0);
	assert_int_equal(zm_codec_create("lzo", 0, &c), -ENOTSUP);
	assert_null(c);
#endif
	assert_int_equal(zm_codec_create(NULL, 0, &c), 0);
	assert_string_equal(zm_codec_name(c), "lz4");
	zm_codec_destroy(c);
	assert_int_equal(zm_codec_create("", 0, &c), 0);
	assert_string_equal(zm_codec_name(c), "lz4");
	zm_codec_destroy(c);
}

static void test_levels(void **st)
{
	struct zm_codec *c;

	c = mk("zstd");
	assert_int_equal(zm_codec_level(c), 3);
	zm_codec_destroy(c);
	c = mk("zstd:7");
	assert_string_equal(zm_codec_name(c), "zstd");
	assert_int_equal(zm_codec_level(c), 7);
	zm_codec_destroy(c);
	assert_int_equal(zm_codec_create("zstd", 9, &c), 0);
	assert_int_equal(zm_codec_level(c), 9);
	zm_codec_destroy(c);
	assert_int_equal(zm_codec_create("zstd:9", 9, &c), 0); /* agreeing */
	zm_codec_destroy(c);
	c = mk("zstd:-3");
	assert_int_equal(zm_codec_level(c), -3);
	zm_codec_destroy(c);
	c = mk("lz4");
	assert_int_equal(zm_codec_level(c), 1);
	zm_codec_destroy(c);
}

static void test_bad_create(void **st)
{
	static const char *const bad[] = {
		"lz5", "LZ4", "zstd:", "zstd:x", "zstd:3x", "zstd:99", "zstd:1:2",
		"none:1", "lz4:-1", "lz4:99999999", "zstd:99999999999999999999",
		" lz4", "lz4 ", "a-very-long-codec-name-that-is-too-long-for-zmem",
	};
	struct zm_codec *c = (void *)1;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(zm_codec_create(bad[i], 0, &c), -EINVAL);
		assert_null(c);
	}
	assert_int_equal(zm_codec_create("zstd:3", 4, &c), -EINVAL);
	assert_int_equal(zm_codec_create("none", 1, &c), -EINVAL);
	assert_int_equal(zm_codec_create("lz4", 0, NULL), -EINVAL);
#ifdef ZM_HAVE_LZO
	assert_int_equal(zm_codec_create("lzo", 2, &c), -EINVAL);
#endif
	zm_codec_destroy(NULL);
	assert_null(zm_codec_name(NULL));
}

static void test_bad_args(void **st)
{
	struct zm_codec *c = mk("lz4");
	unsigned char a[4096] = { 0 }, b[4096];

	assert_int_equal(zm_codec_compress(NULL, a, 4096, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_compress(c, NULL, 4096, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_compress(c, a, 4096, NULL, 4096), -EINVAL);
	assert_int_equal(zm_codec_compress(c, a, 0, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_compress(c, a, (size_t)ZM_CODEC_MAX_LEN + 1, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_compress(c, a, 4096, b, 0), -ENOSPC);
	assert_int_equal(zm_codec_decompress(NULL, a, 10, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_decompress(c, a, 0, b, 4096), -EINVAL);
	assert_int_equal(zm_codec_decompress(c, a, 10, b, 0), -EINVAL);
	assert_int_equal(zm_codec_decompress(c, a, 10, NULL, 4096), -EINVAL);
	assert_int_equal(zm_codec_bound(c, (size_t)ZM_CODEC_MAX_LEN + 1), 0);
	zm_codec_destroy(c);
}

/* ---- round trips ---------------------------------------------------- */

static void roundtrip_one(const char *name)
{
	struct zm_codec *c = mk(name);
	struct rng r;

	rng_seed(&r, seed);
	for (size_t ps = 4096; ps <= 65536; ps <<= 1) {
		size_t bound = zm_codec_bound(c, ps);
		unsigned char *src = malloc(ps), *dst = malloc(bound), *out = malloc(ps);

		assert_true(bound >= ps);
		for (int kind = 0; kind < 5; kind++) {
			int n;

			fill_kind(&r, kind, src, ps);
			n = zm_codec_compress(c, src, ps, dst, bound);
			assert_true(n > 0 && (size_t)n <= bound);
			if (kind != 1 && strcmp(name, "none"))
				/* compressible, even by lz4 at acceleration 8 */
				if ((size_t)n >= ps * 3 / 4)
					fail_msg("%s: kind %d of %zu bytes compressed to %d",
						 name, kind, ps, n);
			memset(out, 0x5a, ps);
			assert_int_equal(zm_codec_decompress(c, dst, (size_t)n, out, ps), 0);
			assert_memory_equal(src, out, ps);
			/* a length the caller did not store: refused */
			assert_int_equal(zm_codec_decompress(c, dst, (size_t)n, out, ps - 1), -EIO);
		}
		free(src);
		free(dst);
		free(out);
	}
	zm_codec_destroy(c);
}

static void test_roundtrip(void **st)
{
	for_each_codec(roundtrip_one);
}

/* Odd lengths, and a dst_cap exactly the compressed length. */
static void odd_one(const char *name)
{
	struct zm_codec *c = mk(name);
	struct rng r;

	rng_seed(&r, seed + 1);
	for (int i = 0; i < 40; i++) {
		size_t len = 1 + rng_below(&r, 9000);
		size_t bound = zm_codec_bound(c, len);
		unsigned char *src = malloc(len), *dst = malloc(bound), *out = malloc(len);
		unsigned char *exact;
		int n, m;

		fill_kind(&r, (int)rng_below(&r, 5), src, len);
		n = zm_codec_compress(c, src, len, dst, bound);
		assert_true(n > 0);
		exact = malloc((size_t)n + ZM_CODEC_ZSTD_SLACK);
		m = zm_codec_compress(c, src, len, exact, (size_t)n);
		if (strncmp(name, "zstd", 4))
			assert_int_equal(m, n);
		else
			assert_true(m == n || m == -ENOSPC);
		m = zm_codec_compress(c, src, len, exact, (size_t)n + ZM_CODEC_ZSTD_SLACK);
		assert_int_equal(m, n);
		assert_int_equal(zm_codec_decompress(c, exact, (size_t)n, out, len), 0);
		assert_memory_equal(src, out, len);
		if (n > 1)
			assert_int_equal(zm_codec_compress(c, src, len, exact, (size_t)n - 1), -ENOSPC);
		free(exact);
		free(src);
		free(dst);
		free(out);
	}
	zm_codec_destroy(c);
}

static void test_odd_lengths(void **st)
{
	for_each_codec(odd_one);
}

/* ---- incompressible: -ENOSPC, nothing written past dst_cap --------- */

static void enospc_one(const char *name)
{
	struct zm_codec *c = mk(name);
	struct rng r;

	rng_seed(&r, seed + 2);
	for (size_t ps = 4096; ps <= 65536; ps <<= 1) {
		unsigned char *src = malloc(ps), *dst = malloc(ps + CANARY);
		/* none fits a page exactly in a page: ask for one byte less */
		size_t cap = strcmp(name, "none") ? ps : ps - 1;

		fill_random(&r, src, ps);
		memset(dst, CANARY_BYTE, ps + CANARY);
		assert_int_equal(zm_codec_compress(c, src, ps, dst, cap), -ENOSPC);
		for (size_t i = cap; i < ps + CANARY; i++)
			assert_int_equal(dst[i], CANARY_BYTE);
		/* compressible data, too small a buffer */
		fill_text(&r, src, ps);
		memset(dst, CANARY_BYTE, ps + CANARY);
		assert_int_equal(zm_codec_compress(c, src, ps, dst, 16), -ENOSPC);
		for (size_t i = 16; i < ps + CANARY; i++)
			assert_int_equal(dst[i], CANARY_BYTE);
		free(src);
		free(dst);
	}
	zm_codec_destroy(c);
}

static void test_incompressible(void **st)
{
	for_each_codec(enospc_one);
}

/* ---- corrupt input: -EIO, never a crash ----------------------------- */

#define CORRUPT_ROUNDS 300

/* Decompress a private exact-size copy of src[0..len) into an exact-size
 * buffer of dst_len bytes. */
static int try_decompress(struct zm_codec *c, const unsigned char *src, size_t len,
			  size_t dst_len)
{
	unsigned char *in = malloc(len), *out = malloc(dst_len);
	int rc;

	memcpy(in, src, len);
	rc = zm_codec_decompress(c, in, len, out, dst_len);
	free(in);
	free(out);
	return rc;
}

static void corrupt_one(const char *name)
{
	const size_t ps = 4096;
	struct zm_codec *c = mk(name);
	int is_none = !strcmp(name, "none");
	unsigned char *src = malloc(ps), *comp = malloc(2 * ps), *bad = malloc(2 * ps);
	struct rng r;

	rng_seed(&r, seed + 3);
	for (int round = 0; round < CORRUPT_ROUNDS; round++) {
		int kind = (int)rng_below(&r, 5), n, rc;
		size_t len;

		fill_kind(&r, kind, src, ps);
		n = zm_codec_compress(c, src, ps, comp, 2 * ps);
		assert_true(n > 0);

		/* flipped bytes: an error, or (if only literals were hit) the
		 * right length with other contents */
		memcpy(bad, comp, (size_t)n);
		for (int k = 1 + (int)rng_below(&r, 8); k > 0; k--)
			bad[rng_below(&r, (uint64_t)n)] ^= (unsigned char)(1 + rng_below(&r, 255));
		rc = try_decompress(c, bad, (size_t)n, ps);
		assert_true(rc == 0 || rc == -EIO);

		/* truncated */
		if (n > 1) {
			len = 1 + rng_below(&r, (uint64_t)n - 1);
			rc = try_decompress(c, comp, len, ps);
			assert_int_equal(rc, -EIO);
		}

		/* extended with garbage: the frame does not end where it
		 * should (lz4 and lzo) or the tail is not a frame (zstd) */
		memcpy(bad, comp, (size_t)n);
		fill_random(&r, bad + n, 1 + rng_below(&r, 64));
		rc = try_decompress(c, bad, (size_t)n + 1 + rng_below(&r, 64), ps);
		assert_true(rc == -EIO || (is_none && rc == 0));

		/* pure garbage */
		len = 1 + rng_below(&r, 2 * ps);
		if (is_none && len == ps)
			len++;
		fill_random(&r, bad, len);
		assert_int_equal(try_decompress(c, bad, len, ps), -EIO);

		/* right stream, wrong expected length */
		assert_int_equal(try_decompress(c, comp, (size_t)n, ps + 1), -EIO);
		assert_int_equal(try_decompress(c, comp, (size_t)n, ps - 1 - rng_below(&r, 100)), -EIO);
	}
	free(src);
	free(comp);
	free(bad);
	zm_codec_destroy(c);
}

static void test_corrupt(void **st)
{
	const char *const *l = zm_codec_list();

	for (size_t i = 0; l[i]; i++)
		corrupt_one(l[i]);
}

/* ---- workspaces: thread exit, destroy, a new codec at the old address */

static void *compress_in_thread(void *arg)
{
	unsigned char a[4096], b[4096];
	int n;

	memset(a, 'x', sizeof(a));
	n = zm_codec_compress(arg, a, sizeof(a), b, sizeof(b));
	return (void *)(intptr_t)(n > 0 && zm_codec_decompress(arg, b, (size_t)n, a, 4096) == 0);
}

static void test_workspaces(void **st)
{
	const char *const *l = zm_codec_list();

	for (size_t i = 0; l[i]; i++) {
		struct zm_codec *a = mk(l[i]), *b = mk(l[i]);
		pthread_t t;
		void *ok;

		/* a thread's workspace is freed when it exits (LSan checks) */
		pthread_create(&t, NULL, compress_in_thread, a);
		pthread_join(t, &ok);
		assert_true(ok != NULL);
		/* two codecs in one thread, then one destroyed while this
		 * thread still lists its workspace */
		assert_true(compress_in_thread(a) != NULL);
		assert_true(compress_in_thread(b) != NULL);
		zm_codec_destroy(a);
		assert_true(compress_in_thread(b) != NULL);
		a = mk(l[i]); /* may reuse the address */
		assert_true(compress_in_thread(a) != NULL);
		zm_codec_destroy(a);
		zm_codec_destroy(b);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_bad_create),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_odd_lengths),
		cmocka_unit_test(test_incompressible),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_workspaces),
	};

	test_args(argc, argv, &seed, NULL);
	return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
