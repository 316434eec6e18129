/*
 * zstd: one zstd frame per buffer, from libzstd's one-shot calls with
 * per-thread contexts (a ZSTD_CCtx and a ZSTD_DCtx in each workspace,
 * created on first use: creating them per call would cost more than
 * compressing a page).
 *
 * ZSTD_compressCCtx stops with dstSize_tooSmall when the frame would not
 * fit in dst_cap, so incompressible pages need no extra copy.
 * ZSTD_decompressDCtx checks every length against both buffers; a frame
 * that decodes to anything but dst_len bytes is rejected.
 */
#include <errno.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec_internal.h"

enum { ZS_CCTX, ZS_DCTX }; /* indices into ws->ctx[] */

static int zstd_level(int requested, int *eff)
{
	if (requested == 0) {
		*eff = ZSTD_defaultCLevel();
		return 0;
	}
	if (requested < ZSTD_minCLevel() || requested > ZSTD_maxCLevel())
		return -EINVAL;
	*eff = requested;
	return 0;
}

static int zstd_errno(size_t r)
{
	switch (ZSTD_getErrorCode(r)) {
	case ZSTD_error_dstSize_tooSmall:
		return -ENOSPC;
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

static int zstd_compress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			 const void *src, size_t len, void *dst, size_t cap)
{
	size_t r;

	if (zmi_unlikely(!ws->ctx[ZS_CCTX]) && !(ws->ctx[ZS_CCTX] = ZSTD_createCCtx()))
		return -ENOMEM;
	r = ZSTD_compressCCtx(ws->ctx[ZS_CCTX], dst, cap, src, len, c->level);
	return ZSTD_isError(r) ? zstd_errno(r) : (int)r;
}

static int zstd_decompress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			   const void *src, size_t len, void *dst, size_t dst_len)
{
	size_t r;

	if (zmi_unlikely(!ws->ctx[ZS_DCTX]) && !(ws->ctx[ZS_DCTX] = ZSTD_createDCtx()))
		return -ENOMEM;
	r = ZSTD_decompressDCtx(ws->ctx[ZS_DCTX], dst, dst_len, src, len);
	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ?
		       -ENOMEM : -EIO;
	return r == dst_len ? 0 : -EIO;
}

static size_t zstd_bound(size_t len)
{
	return ZSTD_compressBound(len);
}

static void zstd_ws_free(struct zmi_codec_ws *ws)
{
	ZSTD_freeCCtx(ws->ctx[ZS_CCTX]);
	ZSTD_freeDCtx(ws->ctx[ZS_DCTX]);
	ws->ctx[ZS_CCTX] = ws->ctx[ZS_DCTX] = NULL;
}

const struct zmi_codec_ops zmi_codec_zstd_ops = {
	.name = "zstd",
	.level = zstd_level,
	.needs_ws = true,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
	.bound = zstd_bound,
	.ws_free = zstd_ws_free,
};
