/*
 * none: a copy.  The baseline against which the real codecs are measured
 * (and what a store does with incompressible pages anyway).
 */
#include <errno.h>
#include <string.h>

#include "codec/codec_internal.h"

static int none_level(int requested, int *eff)
{
	*eff = 0;
	return requested ? -EINVAL : 0;
}

static int none_compress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			 const void *src, size_t len, void *dst, size_t cap)
{
	if (len > cap)
		return -ENOSPC;
	memcpy(dst, src, len);
	return (int)len;
}

static int none_decompress(const struct zm_codec *c, struct zmi_codec_ws *ws,
			   const void *src, size_t len, void *dst, size_t dst_len)
{
	if (len != dst_len)
		return -EIO;
	memcpy(dst, src, len);
	return 0;
}

static size_t none_bound(size_t len)
{
	return len;
}

static void none_ws_free(struct zmi_codec_ws *ws)
{
}

const struct zmi_codec_ops zmi_codec_none_ops = {
	.name = "none",
	.level = none_level,
	.needs_ws = false,
	.compress = none_compress,
	.decompress = none_decompress,
	.bound = none_bound,
	.ws_free = none_ws_free,
};
