/*
 * lzo: lzo1x-1 from liblzo2, the codec of zcache and of zram's first
 * years, so that zcache's 2011 numbers can be re-measured with their codec.
 * Compiled only when the build has LZO (ZM_HAVE_LZO; liblzo2 is GPL, see
 * codec.h).
 *
 * lzo1x_1_compress takes no output capacity: it may write up to the worst
 * case (LZO_BOUND below).  When dst_cap covers the worst case it writes
 * into dst directly; otherwise into the thread's workspace buffer, and the
 * result is copied out only if it fits.  Its dictionary (wrkmem, 128 KiB on
 * 64-bit) is per thread too.  Decompression is lzo1x_decompress_safe,
 * which checks every read and write against both buffers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <lzo1x.h>

#include "codec/codec_internal.h"

/* lzo1x's worst case, from the library's documentation: incompressible
 * input grows by 1/16 plus a small constant. */
#define LZO_BOUND(len) ((len) + (len) / 16 + 64 + 3)

enum { LZ_WRKMEM }; /* index into ws->ctx[] */

static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_rc;

static void lzo_init_once(void)
{
	lzo_init_rc = lzo_init() == LZO_E_OK ? 0 : -EIO;
}

static int lzo_setup(void)
{
	pthread_once(&lzo_once, lzo_init_once);
	return lzo_init_rc;
}

static int lzo_level(int requested, int *eff)
{
	*eff = 1;
	return requested == 0 || requested == 1 ? 0 : -EINVAL;
}

static int lzo_compress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			const void *src, size_t len, void *dst, size_t cap)
{
	size_t bound = LZO_BOUND(len);
	unsigned char *out = dst;
	lzo_uint n = 0;

	if (zmi_unlikely(!ws->ctx[LZ_WRKMEM]) &&
	    !(ws->ctx[LZ_WRKMEM] = malloc(LZO1X_1_MEM_COMPRESS)))
		return -ENOMEM;
	if (cap < bound) {
		if (zmi_codec_ws_buf(ws, bound))
			return -ENOMEM;
		out = ws->buf;
	}
	if (lzo1x_1_compress(src, len, out, &n, ws->ctx[LZ_WRKMEM]) != LZO_E_OK)
		return -EIO;
	if (n > cap)
		return -ENOSPC;
	if (out != dst)
		memcpy(dst, out, n);
	return (int)n;
}

static int lzo_decompress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			  const void *src, size_t len, void *dst, size_t dst_len)
{
	lzo_uint n = dst_len;
	int r = lzo1x_decompress_safe(src, len, dst, &n, NULL);

	return r == LZO_E_OK && n == dst_len ? 0 : -EIO;
}

static size_t lzo_bound(size_t len)
{
	return LZO_BOUND(len);
}

static void lzo_ws_free(struct zmi_codec_ws *ws)
{
	free(ws->ctx[LZ_WRKMEM]);
	ws->ctx[LZ_WRKMEM] = NULL;
}

const struct zmi_codec_ops zmi_codec_lzo_ops = {
	.name = "lzo",
	.level = lzo_level,
	.needs_ws = true,
	.compress = lzo_compress,
	.decompress = lzo_decompress,
	.bound = lzo_bound,
	.ws_free = lzo_ws_free,
	.setup = lzo_setup,
};
