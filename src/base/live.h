/*
 * The live objects, for ZM_DEBUG builds: a process-wide set of the pools,
 * stores and tmem instances created and not yet destroyed, so that a
 * destroy of something that is not live (destroyed already, or never
 * made) is named in a message and refused before it touches the memory,
 * instead of freeing it twice.  Destroying twice stays undefined
 * behaviour (the headers say so); this only makes the debug build say
 * what happened.
 *
 * The check compares addresses and reads nothing of the object, so it
 * holds when the object's memory is gone.  An address is reused once the
 * memory goes back to malloc, and a second destroy after that would
 * destroy the newcomer: zmi_live_free therefore keeps the last
 * ZMI_LIVE_QUARANTINE destroyed objects' memory from malloc (filled with
 * a pattern and, under ASan, poisoned, so a use after destroy still shows)
 * and frees the oldest as newer ones come.
 *
 * Release builds (ZM_DEBUG 0) pay nothing: the calls are empty inline
 * functions and zmi_live_free is free().
 */
#ifndef ZM_BASE_LIVE_H
#define ZM_BASE_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "base/debug.h"

enum zmi_live_kind { ZMI_LIVE_POOL = 1, ZMI_LIVE_STORE = 2, ZMI_LIVE_TMEM = 3 };

#if ZM_DEBUG >= 1
/* obj (of at least 4-byte alignment) is live from now on. */
void zmi_live_add(const void *obj, enum zmi_live_kind kind);
/* At the start of a destroy: true, and obj is no longer live, if it was a
 * live object of this kind; else false, after a message naming op and obj
 * (the caller then returns without touching obj).  True also when the set
 * could not track every object (no memory for it). */
bool zmi_live_take(const void *obj, enum zmi_live_kind kind, const char *op);
/* The end of a destroy: free obj (size bytes), after a while (above). */
void zmi_live_free(void *obj, size_t size);
#else
static inline void zmi_live_add(const void *obj, enum zmi_live_kind kind)
{
	(void)obj, (void)kind;
}
static inline bool zmi_live_take(const void *obj, enum zmi_live_kind kind, const char *op)
{
	(void)obj, (void)kind, (void)op;
	return true;
}
static inline void zmi_live_free(void *obj, size_t size)
{
	(void)size;
	free(obj);
}
#endif

#endif
