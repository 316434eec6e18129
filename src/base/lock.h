/*
 * zmi_lock: the lock of the library's short critical sections.
 *
 * Every section it guards is bounded (a chunk of at most 64 pages, one
 * object's bookkeeping), so a spinlock beats a futex-based mutex: lock +
 * unlock uncontended is one atomic exchange and one release store
 * (docs/results/2026-12-02-code-choices.md).  Waiters spin with a pause for a while and then
 * yield the CPU, so that a holder preempted on a 2-core machine gets to run.
 * Build with -DZM_LOCK_PTHREAD to use pthread mutexes instead (for
 * comparison, or for tools that only understand those).
 *
 * Hold times (ZM_DEBUG >= 1 only; zm_lock_hold in common.h): each lock
 * also keeps the time stamp counter read when it was taken and the
 * function that took it (zmi_lock and zmi_trylock are macros passing
 * __func__), and zmi_unlock compares the hold with the longest seen for
 * the lock's kind (zmi_lock_init_kind; ZMI_LOCK_OTHER by default): a
 * counter read and a subtraction on every unlock, and a shared line
 * written only when a record falls or a hold passes 10 us.  Release
 * builds compile none of it: the lock, its size and its code are the
 * same as without.
 */
#ifndef ZM_BASE_LOCK_H
#define ZM_BASE_LOCK_H

#include <stdint.h>

#include "base/cpu.h"

/* The kinds whose holds are told apart (zm_lock_kind in common.h, which
 * has the same numbers). */
enum {
	ZMI_LOCK_CLASS = 0,  /* a zsmalloc class shard's */
	ZMI_LOCK_ZONE = 1,   /* a pages zone's */
	ZMI_LOCK_OTHER = 2,  /* every other */
	ZMI_LOCK_COMPACT = 3, /* the compactor's class lock holds, by its CPU
				 clock (zmi_hold_note_ns; no lock has it) */
	ZMI_LOCK_KINDS = 4,
};

#if ZM_DEBUG >= 1
#define ZMI_LOCK_HOLDS 1
/* A record (or a hold of 10 us or more) of kind, taken at site: out of
 * line, in lock.c.  ticks: time stamp counter ticks. */
void zmi_lock_held(unsigned kind, const char *site, uint64_t ticks);
/* The longest hold of each kind so far, in ticks (atomic), and the hold
 * from which zmi_lock_held counts long ones (set at start-up). */
extern uint64_t zmi_hold_max[ZMI_LOCK_KINDS];
extern uint64_t zmi_hold_long_ticks;
/* A hold of kind timed by the caller, in ns (the compactor's, by its CPU
 * clock). */
void zmi_hold_note_ns(unsigned kind, const char *site, uint64_t ns);

static inline uint64_t zmi_hold_now(void)
{
	return zmi_cpu_ticks();
}
#define ZMI_HOLD_FIELDS                                                       \
	uint8_t kind;                                                         \
	const char *site;   /* the holder's: who took it */                   \
	uint64_t t0;        /* the holder's: when (ticks) */
#define ZMI_HOLD_START(l, s) ((l)->site = (s), (l)->t0 = zmi_hold_now())
/* Read before the lock is released: after, another holder writes them. */
#define ZMI_HOLD_END(l)                                                       \
	uint64_t hold_ = zmi_hold_now() - (l)->t0;                            \
	const char *site_ = (l)->site;                                        \
	unsigned kind_ = (l)->kind
#define ZMI_HOLD_NOTE()                                                       \
	do {                                                                  \
		if (__builtin_expect(hold_ > __atomic_load_n(&zmi_hold_max[kind_], \
							    __ATOMIC_RELAXED) ||  \
				     hold_ >= zmi_hold_long_ticks, 0))        \
			zmi_lock_held(kind_, site_, hold_);                   \
	} while (0)
#endif

#ifdef ZM_LOCK_PTHREAD
#include <pthread.h>
#ifdef ZMI_LOCK_HOLDS
typedef struct {
	pthread_mutex_t m;
	ZMI_HOLD_FIELDS
} zmi_lock_t;
#define ZM_LOCK_INIT { PTHREAD_MUTEX_INITIALIZER, ZMI_LOCK_OTHER, 0, 0 }
static inline void zmi_lock_init_kind(zmi_lock_t *l, unsigned kind)
{
	pthread_mutex_init(&l->m, NULL);
	l->kind = (uint8_t)kind;
}
static inline void zmi_lock_at(zmi_lock_t *l, const char *site)
{
	pthread_mutex_lock(&l->m);
	ZMI_HOLD_START(l, site);
}
static inline int zmi_trylock_at(zmi_lock_t *l, const char *site)
{
	if (pthread_mutex_trylock(&l->m))
		return 0;
	ZMI_HOLD_START(l, site);
	return 1;
}
static inline void zmi_unlock(zmi_lock_t *l)
{
	ZMI_HOLD_END(l);
	pthread_mutex_unlock(&l->m);
	ZMI_HOLD_NOTE();
}
static inline void zmi_lock_destroy(zmi_lock_t *l) { pthread_mutex_destroy(&l->m); }
#else
typedef pthread_mutex_t zmi_lock_t;
#define ZM_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
static inline void zmi_lock_init(zmi_lock_t *l) { pthread_mutex_init(l, NULL); }
static inline void zmi_lock(zmi_lock_t *l) { pthread_mutex_lock(l); }
static inline void zmi_unlock(zmi_lock_t *l) { pthread_mutex_unlock(l); }
static inline int zmi_trylock(zmi_lock_t *l) { return pthread_mutex_trylock(l) == 0; }
static inline void zmi_lock_destroy(zmi_lock_t *l) { pthread_mutex_destroy(l); }
#endif
#else
#ifdef ZMI_LOCK_HOLDS
typedef struct {
	int held;
	ZMI_HOLD_FIELDS
} zmi_lock_t;
#define ZM_LOCK_INIT { 0, ZMI_LOCK_OTHER, 0, 0 }
#else
typedef struct {
	int held;
} zmi_lock_t;
#define ZM_LOCK_INIT { 0 }
#endif

void zmi_lock_slow(zmi_lock_t *l);

static inline void zmi_lock_destroy(zmi_lock_t *l) { (void)l; }

#ifdef ZMI_LOCK_HOLDS
static inline void zmi_lock_init_kind(zmi_lock_t *l, unsigned kind)
{
	l->held = 0;
	l->kind = (uint8_t)kind;
}

static inline void zmi_lock_at(zmi_lock_t *l, const char *site)
{
	if (!__builtin_expect(!__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE), 1))
		zmi_lock_slow(l);
	ZMI_HOLD_START(l, site);
}

static inline int zmi_trylock_at(zmi_lock_t *l, const char *site)
{
	if (__atomic_load_n(&l->held, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE))
		return 0;
	ZMI_HOLD_START(l, site);
	return 1;
}

static inline void zmi_unlock(zmi_lock_t *l)
{
	ZMI_HOLD_END(l);
	__atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
	ZMI_HOLD_NOTE();
}
#else
static inline void zmi_lock_init(zmi_lock_t *l) { l->held = 0; }

static inline void zmi_lock(zmi_lock_t *l)
{
	if (__builtin_expect(!__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE), 1))
		return;
	zmi_lock_slow(l);
}

static inline int zmi_trylock(zmi_lock_t *l)
{
	return !__atomic_load_n(&l->held, __ATOMIC_RELAXED) &&
	       !__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE);
}

static inline void zmi_unlock(zmi_lock_t *l)
{
	__atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
}
#endif
#endif

#ifdef ZMI_LOCK_HOLDS
#define zmi_lock(l) zmi_lock_at((l), __func__)
#define zmi_trylock(l) zmi_trylock_at((l), __func__)
#define zmi_lock_init(l) zmi_lock_init_kind((l), ZMI_LOCK_OTHER)
#else
/* the kind matters only to the hold times */
#define zmi_lock_init_kind(l, kind) zmi_lock_init(l)
#endif

#endif
