/*
 * Per-thread workspaces: what a library needs besides the two buffers
 * (zstd's compression and decompression contexts, lzo's dictionary and a
 * worst-case output buffer), one per thread and codec, so that any number
 * of threads can share one zm_codec without a lock on the hot path.
 *
 * Finding the workspace: each thread keeps a list of its workspaces, most
 * recently used first; the common case (one codec per thread) is one load
 * and one compare.
 *
 * Lifetime, as for the per-thread page caches.  A workspace is allocated
 * by its thread and registered with its codec (c->wss) under ws_lock.
 * When the thread exits, a pthread key destructor frees all of its
 * workspaces.  When a codec is destroyed, its workspaces' contents are
 * freed and the workspaces detached (owner set to NULL) under ws_lock;
 * the emptied shells (a few words each) are freed by their threads the
 * next time they walk their list, or when they exit.
 *
 * Lock order: ws_lock only.  `owner` is written under ws_lock and
 * read by the owning thread without it (acquire/release atomics); the rest
 * of a workspace is touched only by its thread, or by destroy once no
 * thread uses the codec.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/worker.h"
#include "codec/codec_internal.h"

static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static __thread struct zmi_codec_ws *tls_wss;

static void ws_thread_exit(void *unused);

/* fork: ws_lock is held across it.  The child keeps the forking
 * thread's workspaces; the other threads' stay registered with their
 * codecs, which free them when destroyed; nothing waits for them. */
static void ws_fork_prepare(void)
{
	pthread_mutex_lock(&ws_lock);
}

static void ws_fork_release(void)
{
	pthread_mutex_unlock(&ws_lock);
}

static void ws_key_init(void)
{
	pthread_key_create(&ws_key, ws_thread_exit);
	zmi_fork_hook(ws_fork_prepare, ws_fork_release, ws_fork_release);
}

static inline struct zm_codec *ws_owner(struct zmi_codec_ws *ws)
{
	return __atomic_load_n(&ws->owner, __ATOMIC_ACQUIRE);
}

/* Unlink from the codec's registry and free the contents (ws_lock). */
static void ws_release(struct zm_codec *c, struct zmi_codec_ws *ws)
{
	if (ws->rprev)
		ws->rprev->rnext = ws->rnext;
	else
		c->wss = ws->rnext;
	if (ws->rnext)
		ws->rnext->rprev = ws->rprev;
	ws->rnext = ws->rprev = NULL;
	c->ops->ws_free(ws);
	free(ws->buf);
	ws->buf = NULL;
	ws->buf_cap = 0;
}

static void ws_thread_exit(void *unused)
{
	struct zmi_codec_ws *ws = tls_wss, *next;

	pthread_mutex_lock(&ws_lock);
	for (; ws; ws = next) {
		struct zm_codec *c = ws_owner(ws);

		next = ws->tnext;
		if (c)
			ws_release(c, ws);
		free(ws);
	}
	tls_wss = NULL;
	pthread_mutex_unlock(&ws_lock);
}

/* Slow path: walk the list, freeing detached shells, moving the match to
 * the front, or creating a workspace. */
static struct zmi_codec_ws *ws_lookup(struct zm_codec *c)
{
	struct zmi_codec_ws **link = &tls_wss, *ws;

	while ((ws = *link) != NULL) {
		struct zm_codec *o = ws_owner(ws);

		if (!o) {
			*link = ws->tnext;
			free(ws);
			continue;
		}
		if (o == c) {
			*link = ws->tnext;
			ws->tnext = tls_wss;
			tls_wss = ws;
			return ws;
		}
		link = &ws->tnext;
	}
	pthread_once(&ws_once, ws_key_init);
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->owner = c;
	pthread_mutex_lock(&ws_lock);
	ws->rnext = c->wss;
	if (c->wss)
		c->wss->rprev = ws;
	c->wss = ws;
	pthread_mutex_unlock(&ws_lock);
	ws->tnext = tls_wss;
	tls_wss = ws;
	pthread_setspecific(ws_key, ws); /* any non-NULL value arms exit */
	return ws;
}

struct zmi_codec_ws *zmi_codec_ws_get(struct zm_codec *c)
{
	struct zmi_codec_ws *ws = tls_wss;

	if (zmi_likely(ws && ws_owner(ws) == c))
		return ws;
	return ws_lookup(c);
}

void zmi_codec_ws_detach_all(struct zm_codec *c)
{
	pthread_mutex_lock(&ws_lock);
	while (c->wss) {
		struct zmi_codec_ws *ws = c->wss;

		ws_release(c, ws);
		/* Last touch: from here the owning thread may free the shell. */
		__atomic_store_n(&ws->owner, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ws_lock);
}

int zmi_codec_ws_buf(struct zmi_codec_ws *ws, size_t cap)
{
	void *b;

	if (zmi_likely(ws->buf_cap >= cap))
		return 0;
	b = malloc(cap);
	if (!b)
		return -ENOMEM;
	free(ws->buf);
	ws->buf = b;
	ws->buf_cap = cap;
	return 0;
}
