/*
 * The pool layer's backend table and what its files share.
 *
 *   pool_internal.h  this header: the backend table, per-thread state and
 *                 the hazard protocol, the pool's id in its handles
 *   pool.c        create/destroy by name, dispatch, the printed class table
 *   thread.c      per-thread state: map slots, copy buffers, hazard
 *                 pointers and the registry compactors read them from
 *   keys.c        owner words (pool.h): the calls and the key table
 *   malloc_be.c   the "malloc" baseline backend
 *   zbud.c        the "zbud" backend: two objects per page
 *   zsmalloc/     the "zsmalloc" backend (its map: zsmalloc/zsmalloc.h)
 *   xvmalloc/     the "xvmalloc" backend (its map: xvmalloc/xvmalloc.h)
 *   xcfmalloc/    the "xcfmalloc" backend (its map: xcfmalloc/xcfmalloc.h)
 *
 * Backends are a table of operations; fields are only ever added at the
 * end.  An operation left NULL means "not supported" (compact).
 */
#ifndef ZM_POOL_INTERNAL_H
#define ZM_POOL_INTERNAL_H

#define ZMEM_ADVANCED  /* the advanced tier of the headers */
#include <stdbool.h>
#include <string.h>

#include "base/abi.h"
#include "base/debug.h"
#include "base/lazy.h"
#include <zmem/pool.h>

struct zmi_pool_ops {
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
	long (*shrink)(struct zm_pool *pool, size_t bytes);
	long (*min_moves)(struct zm_pool *pool, size_t pages);
	int (*set_compaction)(struct zm_pool *pool, enum zm_compact_policy policy);
	/* owner words (pool.h), when the backend keeps locations in them;
	 * NULL: pool.c keeps the handles in its key table.  Keys are checked
	 * against nwords before the call. */
	int (*bind)(struct zm_pool *pool, zm_handle_t h, uint64_t key);
	zm_handle_t (*key_handle)(struct zm_pool *pool, uint64_t key);
	int (*free_key)(struct zm_pool *pool, uint64_t key);
	/* zm_pool_unit (pool.h): NULL for backends whose objects share no
	 * unit that freeing them all gives back */
	long (*unit)(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
		     size_t *pages);
	/* zm_pool_put_key / zm_pool_get_key (pool.h), arguments checked;
	 * NULL: keys.c makes them of the calls above */
	int (*put_key)(struct zm_pool *pool, uint64_t key, const void *buf, size_t size);
	/* fn: a zm_pool_get_fn (spelled out: a user of this header may have
	 * included pool.h without its advanced tier) */
	int (*get_key)(struct zm_pool *pool, uint64_t key,
		       int (*fn)(void *arg, const void *obj, size_t len), void *arg);
	/* zm_pool_prefetch_key (pool.h), key checked; NULL: a no-op */
	void (*prefetch_key)(struct zm_pool *pool, uint64_t key);
};

/*
 * Handles name their pool.  A backend's handles stay below
 * ZMI_HANDLE_LIMIT (each backend asserts so); pool.c puts the pool's id,
 * unique among the live pools of the process, in the bits above, checks
 * it on every call and gives the backend its own handle back.  So a
 * handle of another live pool is refused whatever its backend would make
 * of it; a stale handle of this pool is the backend's to refuse (each
 * keeps a generation per slot).
 *
 * Ids come back (after ZM_POOL_MAX_POOLS creations, round robin), and a
 * new pool's backend would hand out the handles the old one did.  So
 * each id also has a generation counter, which only grows: a pool's
 * backend starts the generations it puts in handles at gen_base (the
 * counter, modulo the number of generations its handles hold), and its
 * destroy says in gen_span how many generation values from gen_base they
 * may have taken (the furthest generation from gen_base, + 1); the id's
 * next pool starts there.  A handle of a destroyed pool can then pass
 * for one of a later pool with its id only once the generations of that
 * id's pools have come all the way round the field: what a stale handle
 * of one pool needs too.  (A handle of another backend's pool is read as
 * its own encoding: refused as a garbage value is.)
 */
#define ZMI_POOL_ID_SHIFT 52
#define ZMI_HANDLE_LIMIT  (1ull << ZMI_POOL_ID_SHIFT)
#define ZMI_POOL_IDS      (1u << (64 - ZMI_POOL_ID_SHIFT))  /* id 0 unused */
_Static_assert(ZMI_POOL_IDS - 1 == ZM_POOL_MAX_POOLS, "ids for every live pool");

struct zm_pool {
	const struct zmi_pool_ops *ops;  /* immutable */
	unsigned id;                    /* immutable: 1..ZM_POOL_MAX_POOLS */
	uint64_t id_bits;               /* immutable: id << ZMI_POOL_ID_SHIFT */
	uint64_t gen_base;              /* immutable: the id's counter (above) */
	uint64_t gen_span;              /* set by the backend's destroy (above) */
	void *priv;                     /* the backend's state */
	struct zm_pages *pages;         /* page source, or NULL */
	bool own_pages;
	size_t page_size;               /* immutable */
	uint64_t *words;                /* owner words (pool.h); immutable */
	uint64_t nwords;                /* immutable */
	/* the key table, for backends without bind: key -> handle, a lazy
	 * array (base/lazy.h), counted in meta_bytes */
	zm_handle_t *keys;              /* key_arr's elements, or NULL */
	struct zmi_lazy key_arr;
};

/* The public handle of a backend's own handle (0 stays 0). */
zm_handle_t zmi_pool_handle(const struct zm_pool *pool, zm_handle_t raw);
/* The backend's own handle of a public one: false, with a message in
 * ZM_DEBUG builds, for a handle without this pool's id. */
bool zmi_pool_own(const struct zm_pool *pool, zm_handle_t h, zm_handle_t *raw, const char *op);

/* The published layouts' ends (base/abi.h): never change these when a
 * field is added; a struct as small as these is still accepted. */
#define ZMI_POOL_CONFIG_MIN zmi_size_upto(struct zm_pool_config, nwords)
#define ZMI_POOL_STATS_MIN zmi_size_upto(struct zm_pool_stats, descriptors)
#define ZMI_POOL_CLASS_STATS_MIN zmi_size_upto(struct zm_pool_class_stats, freeable)

/* keys.c: owner words' key table (for backends without bind) */
int zmi_pool_keys_init(struct zm_pool *pool, const struct zm_pool_config *cfg);
void zmi_pool_keys_fini(struct zm_pool *pool);
uint64_t zmi_pool_keys_meta(const struct zm_pool *pool);

extern const struct zmi_pool_ops zmi_pool_zsmalloc_ops;
extern const struct zmi_pool_ops zmi_pool_malloc_ops;
extern const struct zmi_pool_ops zmi_pool_xvmalloc_ops;
extern const struct zmi_pool_ops zmi_pool_xcfmalloc_ops;
extern const struct zmi_pool_ops zmi_pool_zbud_ops;

/* ---- per-thread state (thread.c) ------------------------------------
 *
 * Each thread that touches a pool has a record in static TLS: its maps
 * (slots, copy buffers) and its hazard pointers.  A hazard announces "this
 * thread is reading inside unit P (a zspage)"; a compactor that wants to
 * move objects out of P first marks P as migrating, then calls
 * zmi_pool_heavy_barrier() (membarrier: every running thread executes a full
 * barrier) and looks for P with zmi_pool_hazard_find().  Readers therefore pay
 * only plain stores and loads on their path -- no atomic read-modify-write
 * and no shared cache line -- while the rare compactor pays the barrier.
 * Where membarrier is missing, readers add a full fence instead.
 */
struct zmi_pool_map_slot {
	zm_handle_t handle;
	struct zm_pool *pool;
	char *buf;         /* copy method: the thread's buffer handed out */
	char *seg[2];      /* copy method: where the two halves live */
	size_t len[2];
	enum zm_map_mode mode;
	bool copied;       /* the pointer handed out is the thread's buffer */
};

#define ZM_HAZARDS (ZM_POOL_MAX_MAPS + 1) /* one per map, one for read/write */
#define ZM_HAZARD_RW ZM_POOL_MAX_MAPS

struct zmi_pool_thread {
	unsigned nmaps;
	bool registered;
	unsigned number;                      /* zmi_pool_thread_number(); 0 = none yet */
	unsigned shard;                       /* zsmalloc: preferred class shard */
	bool shard_set;                       /* zsmalloc: shard chosen */
	void *hazard[ZM_HAZARDS];             /* atomic: read by compactors */
	struct zmi_pool_map_slot slot[ZM_POOL_MAX_MAPS];
	char *buf[ZM_POOL_MAX_MAPS];
	size_t buflen[ZM_POOL_MAX_MAPS];
	struct zmi_pool_thread *next, *prev;        /* registry; threads_lock */
};

extern __thread struct zmi_pool_thread zmi_pool_self __attribute__((tls_model("initial-exec")));
extern unsigned zmi_pool_threads_numbered; /* atomic: threads numbered so far */

/* This thread's number, 1, 2, ... in the order threads first ask: spreads
 * threads over per-thread-group state (zsmalloc's shards, the malloc
 * backend's counters) so that two threads start apart. */
static inline unsigned zmi_pool_thread_number(void)
{
	if (zmi_unlikely(!zmi_pool_self.number))
		zmi_pool_self.number = __atomic_add_fetch(&zmi_pool_threads_numbered, 1,
							  __ATOMIC_RELAXED);
	return zmi_pool_self.number;
}
extern bool zmi_pool_readers_light;   /* membarrier available: readers need no fence */

void zmi_pool_thread_register(void);
void zmi_pool_heavy_barrier(void);
/* Does any thread hold a hazard on p?  Call after zmi_pool_heavy_barrier(). */
bool zmi_pool_hazard_find(const void *p);

static inline void zmi_pool_hazard_set(unsigned i, void *p)
{
	if (zmi_unlikely(!zmi_pool_self.registered))
		zmi_pool_thread_register();
#ifdef __SANITIZE_THREAD__
	/* TSan does not model fences: a seq_cst exchange says the same */
	(void)__atomic_exchange_n(&zmi_pool_self.hazard[i], p, __ATOMIC_SEQ_CST);
#else
	__atomic_store_n(&zmi_pool_self.hazard[i], p, __ATOMIC_RELAXED);
	if (zmi_likely(zmi_pool_readers_light))
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

static inline void zmi_pool_hazard_clear(unsigned i)
{
	__atomic_store_n(&zmi_pool_self.hazard[i], NULL, __ATOMIC_RELEASE);
}

/* The calling thread's next map slot, or NULL (errno EBUSY) when it holds
 * ZM_POOL_MAX_MAPS already; with buf, *buf gets a buffer of at least
 * page_size bytes for the copy method (NULL, errno ENOMEM, if none). */
struct zmi_pool_map_slot *zmi_pool_map_push(size_t page_size, char **buf);
/* The thread's most recent map if it is (pool, h), else NULL. */
static inline struct zmi_pool_map_slot *zmi_pool_map_top(struct zm_pool *pool, zm_handle_t h)
{
	struct zmi_pool_map_slot *s;

	if (zmi_unlikely(zmi_pool_self.nmaps == 0))
		return NULL;
	s = &zmi_pool_self.slot[zmi_pool_self.nmaps - 1];
	return s->handle == h && s->pool == pool ? s : NULL;
}
static inline void zmi_pool_map_pop(void)
{
	zmi_pool_self.nmaps--;
}

/* The in-place method: record that the thread maps h by p itself and
 * return p, or NULL (errno EBUSY) when it holds ZM_POOL_MAX_MAPS maps. */
static inline void *zmi_pool_map_in_place(struct zm_pool *pool, zm_handle_t h, void *p)
{
	struct zmi_pool_map_slot *s = zmi_pool_map_push(0, NULL);

	if (zmi_unlikely(!s))
		return NULL;
	s->handle = h;
	s->pool = pool;
	s->copied = false;
	return p;
}

/* The copy method, shared by the backends whose objects may lie in two
 * pieces: record in slot s (from zmi_pool_map_push) that buf stands for the
 * pieces seg[0..1] of len[0..1] bytes, copy them in unless the map is
 * write-only, and return buf. */
static inline void *zmi_pool_map_copy_in(struct zmi_pool_map_slot *s, struct zm_pool *pool,
					 zm_handle_t h, enum zm_map_mode mode, char *buf,
					 char *const seg[2], const size_t len[2])
{
	s->handle = h;
	s->pool = pool;
	s->copied = true;
	s->buf = buf;
	s->mode = mode;
	s->seg[0] = seg[0], s->seg[1] = seg[1];
	s->len[0] = len[0], s->len[1] = len[1];
	if (mode & ZM_MAP_RO) {
		memcpy(buf, seg[0], len[0]);
		memcpy(buf + len[0], seg[1], len[1]);
	}
	return buf;
}

/* At unmap: a copied map that may have been written goes back to its
 * pieces. */
static inline void zmi_pool_map_copy_out(const struct zmi_pool_map_slot *s)
{
	if (s->copied && (s->mode & ZM_MAP_WO)) {
		memcpy(s->seg[0], s->buf, s->len[0]);
		memcpy(s->seg[1], s->buf + s->len[0], s->len[1]);
	}
}

/* Unmap, for every backend: h must be the thread's last map (who names
 * the backend in the message); a copied map is written back unless it was
 * read-only.  false (and nothing done) for a bad unmap. */
static inline bool zmi_pool_unmap_slot(struct zm_pool *pool, zm_handle_t h)
{
	struct zmi_pool_map_slot *s = zmi_pool_map_top(pool, h);

	if (zmi_unlikely(!s)) {
		zmi_bad_input("%s: unmap of %#llx, which is not this thread's last map",
			     pool->ops->name, (unsigned long long)h);
		return false;
	}
	zmi_pool_map_copy_out(s);
	zmi_pool_map_pop();
	return true;
}

#endif
