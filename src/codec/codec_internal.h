/*
 * Internals of the codec layer, shared by its files:
 *
 *   codec.c      create/destroy by name, argument checks, dispatch
 *   workspace.c  per-thread, per-codec workspaces
 *   lz4.c zstd.c lzo.c none.c   one backend each, behind zmi_codec_ops
 *
 * A backend sees its input already checked: buffers non-NULL, lengths in
 * 1 .. ZM_CODEC_MAX_LEN.  It returns what the public call returns.
 *
 * Lock order: ws_lock (global, workspace.c) is the only lock of the
 * layer; it is never held while calling into another layer.
 */
#ifndef ZM_CODEC_INTERNAL_H
#define ZM_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/debug.h"
#include <zmem/codec.h>

struct zmi_codec_ws;

/* One backend.  Fields are only ever added at the end. */
struct zmi_codec_ops {
	const char *name;
	/* Check a requested level (0 = default) and resolve it; 0 or
	 * -EINVAL. */
	int (*level)(int requested, int *effective);
	/* Needs a per-thread workspace (ws is NULL in calls otherwise). */
	bool needs_ws;
	int (*compress)(const struct zm_codec *c, struct zmi_codec_ws *ws,
			const void *src, size_t len, void *dst, size_t cap);
	int (*decompress)(const struct zm_codec *c, struct zmi_codec_ws *ws,
			  const void *src, size_t len, void *dst, size_t dst_len);
	size_t (*bound)(size_t len);
	/* Free what the backend put in ws->ctx[] (ws->buf is freed by
	 * workspace.c). */
	void (*ws_free)(struct zmi_codec_ws *ws);
	/* Called by every zm_codec_create() before anything else; 0 or a
	 * negative errno.  NULL if nothing to do. */
	int (*setup)(void);
};

struct zm_codec {
	const struct zmi_codec_ops *ops;
	int level;                  /* effective level; read-only */
	struct zmi_codec_ws *wss;    /* every thread's workspace: ws_lock */
};

/* A workspace: one per (thread, codec), owned by its thread. */
struct zmi_codec_ws {
	struct zm_codec *owner;        /* NULL once detached; atomic */
	struct zmi_codec_ws *tnext;     /* the thread's list: owner thread only */
	struct zmi_codec_ws *rnext, *rprev; /* the codec's registry: ws_lock */
	/* For the backend; zeroed when created. */
	void *ctx[2];
	void *buf;
	size_t buf_cap;
};

/* The calling thread's workspace for c, created on first use; NULL when
 * memory is short. */
struct zmi_codec_ws *zmi_codec_ws_get(struct zm_codec *c);

/* Free every thread's workspace of c (at destroy: no thread uses c). */
void zmi_codec_ws_detach_all(struct zm_codec *c);

/* Make ws->buf at least cap bytes; 0 or -ENOMEM. */
int zmi_codec_ws_buf(struct zmi_codec_ws *ws, size_t cap);

extern const struct zmi_codec_ops zmi_codec_lz4_ops;
extern const struct zmi_codec_ops zmi_codec_zstd_ops;
extern const struct zmi_codec_ops zmi_codec_none_ops;
#ifdef ZM_HAVE_LZO
extern const struct zmi_codec_ops zmi_codec_lzo_ops;
#endif

#endif
