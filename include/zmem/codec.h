/*
 * zm_codec: the compressors, chosen by name at run time.
 *
 * A codec compresses one buffer (typically one page) at a time into a
 * caller-supplied buffer, and decompresses it back.  The codecs are thin
 * wrappers over the real libraries:
 *
 *   "lz4"    liblz4, LZ4_compress_fast (the default codec).  level is the
 *            acceleration: 0 or 1 = LZ4_compress_default, higher = faster
 *            and weaker (up to 65537).
 *   "zstd"   libzstd, one frame per buffer.  level is zstd's level,
 *            ZSTD_minCLevel() .. ZSTD_maxCLevel(); 0 = zstd's default (3).
 *   "lzo"    liblzo2, lzo1x-1 (the codec of zcache and early zram).  level
 *            must be 0 or 1.  Only in builds with LZO (see below).
 *   "none"   a copy; useful as a baseline.  level must be 0.
 *
 * The level may also be given in the name: "zstd:19", "lz4:8".
 *
 * Licence note: liblzo2 is GPL-2.0-or-later.  A zmem built with LZO
 * (make ZM_WITH_LZO=1, or the default ZM_WITH_LZO=auto when liblzo2 is
 * installed) links GPL code, and the combined library and programs are
 * subject to the GPL.  Build with ZM_WITH_LZO=0 for a library without it;
 * zm_codec_create("lzo", ...) then fails with -EOPNOTSUPP, and "lzo" is
 * missing from zm_codec_list().
 *
 * Errors follow zmem.h: 0 (or a length) on success, a negative errno on
 * failure.  A zm_codec may be used by any number of threads at once: the
 * workspaces the libraries need (zstd's contexts, lzo's dictionary and
 * output buffer) are kept per thread and per codec, created on a thread's
 * first call, and freed when the thread exits or the codec is destroyed.
 */
#ifndef ZMEM_CODEC_H
#define ZMEM_CODEC_H

#include <stddef.h>

#include <zmem/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest input of one call, from liblz4's limit (LZ4_MAX_INPUT_SIZE): all
 * lengths fit an int. */
#define ZM_CODEC_MAX_LEN 0x7E000000u

/* zstd's margin: see zm_codec_compress(). */
#define ZM_CODEC_ZSTD_SLACK 16

/* Longest codec name accepted by zm_codec_create(), level suffix included. */
#define ZM_CODEC_NAME_MAX 32

struct zm_codec;

/* Create a codec by name ("lz4", "zstd", "lzo", "none", optionally with
 * ":LEVEL"); NULL or "" means the default, "lz4".  level 0 means the
 * codec's default; a level given both in the name and as an argument must
 * agree.  Returns 0 and sets *out, or -EINVAL (unknown name, bad level,
 * out == NULL), -EOPNOTSUPP (a known codec this build lacks: "lzo" without
 * LZO), -ENOMEM.  *out is NULL on failure. */
ZM_API int zm_codec_create(const char *name, int level, struct zm_codec **out);

/* Free the codec and every thread's workspaces for it.  No other thread
 * may be using it.  Accepts NULL. */
ZM_API void zm_codec_destroy(struct zm_codec *codec);

/* Compress len bytes (1 .. ZM_CODEC_MAX_LEN) from src into dst, writing at
 * most dst_cap bytes.  Returns the compressed length (> 0), or -ENOSPC when
 * the result does not fit in dst_cap (nothing beyond dst_cap is written;
 * pass dst_cap = len to detect incompressible data cheaply: the codecs stop
 * early instead of finishing and copying), -EINVAL (NULL buffer, len 0 or
 * too long), -ENOMEM (a workspace could not be allocated), -EIO (the
 * library failed).  lz4, lzo and none succeed whenever the result fits;
 * zstd may refuse a result that would fit with fewer than
 * ZM_CODEC_ZSTD_SLACK bytes to spare (libzstd keeps a margin for its block
 * headers). */
ZM_API int zm_codec_compress(struct zm_codec *codec, const void *src, size_t len,
		      void *dst, size_t dst_cap);

/* Decompress len bytes from src into dst, which must end up holding
 * exactly dst_len bytes (the original length, which the caller keeps).
 * Returns 0, or -EIO when src is corrupt, truncated, or decodes to any
 * other length; -EINVAL (NULL buffer, a length 0 or too long), -ENOMEM.
 * Never reads outside src[0..len) nor writes outside dst[0..dst_len), for
 * any input.  On error the contents of dst are unspecified. */
ZM_API int zm_codec_decompress(struct zm_codec *codec, const void *src, size_t len,
			void *dst, size_t dst_len);

/* Largest compressed length the codec can produce for len input bytes:
 * a dst_cap this large never fails with -ENOSPC.  0 if len is too long. */
ZM_API size_t zm_codec_bound(const struct zm_codec *codec, size_t len);

/* The codec's base name ("lz4", "zstd", ...) and its effective level (the
 * default resolved: zstd's default gives 3). */
ZM_API const char *zm_codec_name(const struct zm_codec *codec);
ZM_API int zm_codec_level(const struct zm_codec *codec);

/* The names of the codecs this build offers, default first, as a
 * NULL-terminated static array. */
ZM_API const char *const *zm_codec_list(void);

#ifdef __cplusplus
}
#endif
#endif
