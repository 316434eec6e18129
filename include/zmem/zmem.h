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
 *   workload.h           test data: zero, random and English-like text
 *                        pages at a chosen compression ratio, and the
 *                        memory of a live process
 *   pool.h    zm_pool    allocators for compressed objects (zsmalloc,
 *                        malloc), handles instead of pointers
 *   store.h   zm_store   the compressed page store (zram's core): slots,
 *                        same-filled pages, policy, limit, statistics
 *
 * Conventions that hold for every function in every header:
 *
 *   - Functions that can fail return 0 on success or a negative errno
 *     (-ENOMEM, -ENOSPC, -EINVAL, ...).  Functions returning a count return
 *     how many items they handled.  Nothing in the library calls abort() or
 *     exit() because of bad input or lack of memory.
 *   - Objects come in create/destroy pairs; destroy accepts NULL.
 *   - Bad input (a page that was not allocated, a double free, an index
 *     out of range) gets an error return; builds with ZM_DEBUG >= 1 also
 *     print a message naming the offending object on stderr.
 *   - Thread safety is stated per function; unless said otherwise every
 *     function may be called from any thread at any time.
 */
#ifndef ZMEM_ZMEM_H
#define ZMEM_ZMEM_H

#include <zmem/common.h>
#include <zmem/pages.h>
#include <zmem/codec.h>
#include <zmem/workload.h>
#include <zmem/pool.h>
#include <zmem/store.h>

#endif
