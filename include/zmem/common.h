/*
 * zmem: what every public header shares: the export marker, the version,
 * and where the library's messages go.
 */
#ifndef ZMEM_COMMON_H
#define ZMEM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the calls libzmem exports; everything else in the shared library
 * is hidden.  Applications never need to use it. */
#if defined(__GNUC__)
#define ZM_API __attribute__((visibility("default")))
#else
#define ZM_API
#endif

/* The headers' version; zm_version() gives the library's at run time.
 * MAJOR is the ABI's: it goes up with every change that breaks programs
 * linked against the previous library, and only then, and it is the
 * soname's number (libzmem.so.MAJOR); MINOR counts calls added, PATCH
 * fixes.  (0.2.0, soname libzmem.so.1, came before this rule.) */
#define ZMEM_VERSION_MAJOR 2
#define ZMEM_VERSION_MINOR 0
#define ZMEM_VERSION_PATCH 0
#define ZMEM_VERSION_NUMBER \
	(ZMEM_VERSION_MAJOR * 10000 + ZMEM_VERSION_MINOR * 100 + ZMEM_VERSION_PATCH)

/* The library's ZMEM_VERSION_NUMBER, e.g. 20000 for 2.0.0, and as "2.0.0". */
ZM_API unsigned zm_version(void);
ZM_API const char *zm_version_string(void);

/*
 * Messages.  The library says something only when it finds a problem: a
 * bad call (in ZM_DEBUG builds), a checker's findings, objects still live
 * at destroy.  By default each goes to stderr as one line "zmem: TEXT".
 *
 * zm_set_log(fn, arg) sends them to fn instead (text without the prefix
 * or a newline); zm_set_log(NULL, NULL) silences them; zm_set_log_stderr()
 * restores the default.  The environment variable ZMEM_LOG=off silences
 * them too, until zm_set_log() is called.  fn may be called from any
 * thread, with library locks held: it must not call back into zmem.
 * Not thread-safe against itself: set it before the threads start.
 */
enum zm_log_level {
	ZM_LOG_ERROR = 0,    /* a checker found corruption */
	ZM_LOG_WARNING = 1,  /* bad input, or memory still in use at destroy */
};
typedef void zm_log_fn(void *arg, enum zm_log_level level, const char *msg);
ZM_API void zm_set_log(zm_log_fn *fn, void *arg);
ZM_API void zm_set_log_stderr(void);

#ifdef ZMEM_ADVANCED
/* ---- advanced: lock hold times, for benchmarks ---- */

/*
 * How long the library's spinlocks were held: the longest hold of each
 * kind since start-up or the last reset, the function that took the lock
 * for it, and how many holds lasted 10 us and 100 us or more.  A lock
 * held long makes every thread that wants it wait as long (zmem allocbench
 * --latency prints these beside its percentiles).  Recorded only by
 * builds with ZM_DEBUG >= 1 (the time stamp counter read at each lock and
 * unlock); a release build records nothing and answers -EOPNOTSUPP.  The
 * time a holder spends preempted counts: on a machine with more runnable
 * threads than CPUs the longest hold may be a time slice.
 */
enum zm_lock_kind {
	ZM_LOCK_CLASS = 0,   /* zsmalloc: a size class's (alloc, free, compaction) */
	ZM_LOCK_ZONE,        /* pages: a zone's buddy allocator */
	ZM_LOCK_OTHER,       /* every other: handle table spans, the other
				backends, tmem */
	ZM_LOCK_COMPACT,     /* zsmalloc's compactor: its holds of class
				locks (counted in ZM_LOCK_CLASS too), timed
				by its own CPU clock, so without the time
				it spent preempted; site: the step (plan,
				pack, evacuate, sweep) */
	ZM_LOCK_KINDS
};

struct zm_lock_hold {
	uint64_t max_ns;       /* the longest hold */
	const char *site;      /* the function that took the lock for it, NULL
				  while none was recorded */
	uint64_t over_10us;    /* holds of 10 us or more */
	uint64_t over_100us;   /* of 100 us or more */
	uint64_t holds;        /* every hold: ZM_LOCK_COMPACT only (the locks'
				  kinds count none, which would write a shared
				  line on every unlock), else 0 */
};

/* Fill *out for kind.  0; -EINVAL for a NULL out or a bad kind;
 * -EOPNOTSUPP in a release build. */
ZM_API int zm_lock_hold_sized(enum zm_lock_kind kind, struct zm_lock_hold *out, size_t size);
#define zm_lock_hold(kind, out) \
	zm_lock_hold_sized((kind), (out), sizeof(struct zm_lock_hold))
/* Start the records again from nothing (every kind). */
ZM_API void zm_lock_hold_reset(void);
#endif /* ZMEM_ADVANCED */

#ifdef __cplusplus
}
#endif
#endif
