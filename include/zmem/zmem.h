/*
 * zmem: compressed memory in userspace.
 *
 * The library is built in layers, each with one public header and one
 * opaque type:
 *
 *   pages.h   zm_pages   an arena of fixed-size pages: buddy allocator,
 *                        per-thread page caches, bulk allocation, memory
 *                        returned to the operating system
 *   codec.h   zm_codec   compressors by name (lz4, zstd, lzo, none) with
 *                        per-thread workspaces
 *   pool.h    zm_pool    allocators for compressed objects (zsmalloc,
 *                        xvmalloc, xcfmalloc, zbud, malloc), handles
 *                        instead of pointers
 *   store.h   zm_store   the compressed page store (zram's core): slots,
 *                        same-filled pages, policy, limit, statistics
 *   tmem.h    zm_tmem    zcache's pools (transcendent memory): pages
 *                        keyed by (pool, object, index), persistent or
 *                        ephemeral, one budget, eviction by whole units
 *   region.h  zm_region  compressed regions: memory the program uses
 *                        directly, compressed beyond a resident limit and
 *                        brought back on touch (userfaultfd)
 *
 * common.h holds the version, the export marker and the log sink.
 *
 * Conventions that hold for every call in every header:
 *
 *   Names.  zm_<layer>_<verb>: zm_pool_alloc, zm_store_put, ...;
 *   constants ZM_<LAYER>_*.  Objects come in create/destroy pairs;
 *   destroy accepts NULL.
 *
 *   Returns.  A call that can fail returns 0 on success or a negative
 *   errno; a call that counts (compact, shrink, trim, bulk allocation)
 *   returns the count, or a negative errno where its type is signed.  The
 *   calls that return a handle or a pointer (zm_pool_alloc, zm_pool_map,
 *   zm_pool_key_handle, the getters) return 0/NULL on failure, with errno
 *   set where the header says so; size getters return 0.  Nothing in the
 *   library calls abort() or exit() because of bad input or lack of
 *   memory.  One errno per meaning:
 *     EINVAL      bad input: a NULL object or buffer, a handle of another
 *                 pool, stale, freed or garbage, a size or index out of
 *                 range, a config or stats struct too small
 *     ENOMEM      out of memory, or the pages' or pool's limit reached
 *     ENOSPC      the store's memory limit; output that does not fit
 *     EOPNOTSUPP  not done by this backend, or not in this build
 *     EBUSY       the thread holds ZM_POOL_MAX_MAPS maps already
 *     EMFILE      ZM_POOL_MAX_POOLS pools live already
 *     E2BIG       a config with fields set that this library does not know
 *     EIO         corrupt compressed data, a failed read of a backing
 *                 file, a pool that refused a call the store relies on
 *     EUCLEAN     a checker found a broken structure (and says what)
 *     ENOENT      tmem: no page under that key (a miss); a store's page
 *                 not in memory (zm_store_writeback_page)
 *     EDQUOT      a store's writeback_limit spent
 *     EPERM       no userfaultfd for a region: not permitted here
 *     ENOSYS      no userfaultfd for a region: not in this kernel
 *     ECHILD      a region's call in a child of its creator
 *     EOVERFLOW   a region page's pin count full
 *
 *   NULL.  Every call that takes an object (pages, pool, codec, store,
 *   tmem) or a buffer refuses NULL as bad input; what it returns then:
 *
 *     calls returning int or long        -EINVAL
 *     zm_pool_alloc, zm_pool_map         0 / NULL, errno EINVAL
 *     zm_pool_key_handle                 0
 *     getters of an object or a name     NULL  (zm_pages_addr, _meta,
 *                                        zm_store_pool, _codec,
 *                                        zm_pool_backend, zm_codec_name)
 *     sizes and counts                   0     (zm_pages_page_size, _trim,
 *                                        _alloc_bulk, zm_pool_obj_size,
 *                                        _nr_classes, zm_codec_bound,
 *                                        zm_store_page_size, _nr_pages)
 *     zm_pages_pfn                       UINT32_MAX
 *     destroy, unmap, flush, print       nothing
 *
 *   A NULL config means the defaults (the store needs one: its size).
 *   tests/test_api.c gives NULL to every call.
 *
 *   Bad input gets the error return; builds with ZM_DEBUG >= 1 also say
 *   which object was bad through the log sink (common.h).
 *
 *   Structures the caller allocates (configs, stats) can grow: the calls
 *   that take them are macros passing sizeof to a *_sized entry point.
 *   A struct smaller than the first published layout is refused
 *   (-EINVAL); one larger than the library knows is accepted when its
 *   unknown fields are 0 (else -E2BIG); stats are written as far as both
 *   know, the caller's unknown fields zeroed.  Fields are only ever added
 *   at the end.
 *
 *   Tiers.  Calls that tie a caller to the internals (owner words, page
 *   runs and particular pages, the compaction bound) are declared only
 *   when ZMEM_ADVANCED is defined before the headers; they may change
 *   between minor versions.
 *
 *   Threads.  Thread safety is stated per call; unless said otherwise
 *   every call may be made from any thread at any time.
 *
 *   Threads and fork.  The library starts at most one thread of its own
 *   per process: the background worker that runs every pool's automatic
 *   compaction, started when the first such pool is made and ending when
 *   the last is destroyed or switched off.  fork() is safe: the library's
 *   fork handlers wait for a compaction in progress and hold its
 *   registries' locks across the fork, so a child may use, compact and
 *   destroy every pages instance, pool, store, tmem and codec it
 *   inherited that no other thread of the parent was calling at the
 *   moment of fork; the
 *   worker starts again in the child when needed, and nothing in the
 *   child waits for a thread of the parent.  An object another thread was
 *   inside at the fork may have been left with that thread's lock held:
 *   the child must leave it alone (not even destroy it).  Pages held in
 *   the other threads' caches stay counted as cached in the child.  A
 *   store's backing file stays the parent's: in the child the store is
 *   detached from it (store.h, backing_path), so nothing the child does
 *   changes the file, its blocks or its lock.
 */
#ifndef ZMEM_ZMEM_H
#define ZMEM_ZMEM_H

#include <zmem/common.h>
#include <zmem/pages.h>
#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>
#include <zmem/tmem.h>
#include <zmem/region.h>

#endif
