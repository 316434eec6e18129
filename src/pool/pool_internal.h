/*
 * The pool layer's backend table and what its files share.
 *
 *   pool.c        create/destroy by name, dispatch, the printed class table
 *   malloc_be.c   the "malloc" baseline backend
 *   zs_*.c        the "zsmalloc" backend (see zsmalloc.h)
 *
 * Backends are a table of operations; fields are only ever added at the
 * end.  An operation left NULL means "not supported" (compact).
 */
#ifndef ZM_POOL_INTERNAL_H
#define ZM_POOL_INTERNAL_H

#include <stdbool.h>

#include "base/debug.h"
#include <zmem/pool.h>

struct zm_pool_ops {
	const char *name;
	bool uses_pages;  /* needs a zm_pages */
	int (*create)(struct zm_pool *pool, const struct zm_pool_config *cfg);
	void (*destroy)(struct zm_pool *pool);
	zm_handle_t (*malloc)(struct zm_pool *pool, size_t size);
	int (*free)(struct zm_pool *pool, zm_handle_t h);
	void *(*map)(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode);
	void (*unmap)(struct zm_pool *pool, zm_handle_t h);
	int (*read)(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len);
	int (*write)(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len);
	size_t (*obj_size)(struct zm_pool *pool, zm_handle_t h);
	long (*compact)(struct zm_pool *pool);
	void (*stats)(struct zm_pool *pool, struct zm_pool_stats *st);
	unsigned (*nr_classes)(struct zm_pool *pool);
	int (*class_stats)(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs);
	int (*check)(struct zm_pool *pool);
};

struct zm_pool {
	const struct zm_pool_ops *ops;  /* immutable */
	void *priv;                     /* the backend's state */
	struct zm_pages *pages;         /* page source, or NULL */
	bool own_pages;
	size_t page_size;               /* immutable */
};

extern const struct zm_pool_ops zm_zsmalloc_ops;
extern const struct zm_pool_ops zm_malloc_ops;

/* Per-thread map bookkeeping shared by backends (pool.c). */
struct zm_map_slot {
	zm_handle_t handle;
	struct zm_pool *pool;
	void *cookie;      /* backend's (zsmalloc: the pinned zspage) */
	char *buf;         /* copy method: the thread's buffer handed out */
	char *seg[2];      /* copy method: where the two halves live */
	size_t len[2];
	enum zm_map_mode mode;
	bool copied;       /* the pointer handed out is the thread's buffer */
};

/* The calling thread's next free map slot, or NULL (errno EBUSY) when it
 * holds ZM_POOL_MAX_MAPS already; *buf gets a buffer of at least one page
 * for the copy method (NULL, errno ENOMEM if it cannot be had). */
struct zm_map_slot *zm_map_push(size_t page_size, char **buf);
/* The thread's most recent map; NULL if it holds none or it is not h. */
struct zm_map_slot *zm_map_top(struct zm_pool *pool, zm_handle_t h);
void zm_map_pop(void);

#endif
