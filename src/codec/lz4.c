/*
 * lz4: liblz4's block format, no frame (the length is kept by the caller).
 *
 * Compression stops as soon as the output would exceed dst_cap
 * (LZ4_compress_fast's dstCapacity), so an incompressible page costs one
 * pass and no copy.  Decompression is LZ4_decompress_safe, which never
 * reads or writes outside the buffers it is given.  liblz4 needs no
 * workspace beyond its 16 KiB hash table on the stack.
 */
#include <errno.h>
#include <lz4.h>

#include "codec/codec_internal.h"

/* LZ4_compress_fast accepts accelerations 1 .. LZ4_ACCELERATION_MAX
 * (65537 in liblz4 1.9); level 0 means 1, LZ4_compress_default. */
#define LZ4_ACCEL_MAX 65537

static int lz4_level(int requested, int *eff)
{
	if (requested < 0 || requested > LZ4_ACCEL_MAX)
		return -EINVAL;
	*eff = requested ? requested : 1;
	return 0;
}

static int lz4_compress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			const void *src, size_t len, void *dst, size_t cap)
{
	int n = LZ4_compress_fast(src, dst, (int)len, (int)cap, c->level);

	return n > 0 ? n : -ENOSPC;
}

static int lz4_decompress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			  const void *src, size_t len, void *dst, size_t dst_len)
{
	int n = LZ4_decompress_safe(src, dst, (int)len, (int)dst_len);

	return n >= 0 && (size_t)n == dst_len ? 0 : -EIO;
}

static size_t lz4_bound(size_t len)
{
	return (size_t)LZ4_compressBound((int)len);
}

static void lz4_ws_free(struct zmi_codec_ws *ws)
{
}

const struct zmi_codec_ops zmi_codec_lz4_ops = {
	.name = "lz4",
	.level = lz4_level,
	.needs_ws = false,
	.compress = lz4_compress,
	.decompress = lz4_decompress,
	.bound = lz4_bound,
	.ws_free = lz4_ws_free,
};
