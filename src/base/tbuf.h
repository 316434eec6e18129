/*
 * The per-thread scratch buffer: one compressed page between the codec
 * and the pool, for the store's and tmem's put paths.  Allocated on a
 * thread's first call (grown for a larger size) and freed when the
 * thread exits.  One buffer per thread, shared by every caller: a caller
 * must be done with it before it calls anything that may use it again.
 */
#ifndef ZM_BASE_TBUF_H
#define ZM_BASE_TBUF_H

#include <stddef.h>

/* The thread's buffer of at least size bytes, or NULL. */
char *zmi_thread_buf(size_t size);

#endif
