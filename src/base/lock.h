/*
 * zmi_lock: the lock of the library's short critical sections.
 *
 * Every section it guards is bounded (a chunk of at most 64 pages, one
 * object's bookkeeping), so a spinlock beats a futex-based mutex: lock +
 * unlock uncontended is one atomic exchange and one release store (measured
 * by zmem pagebench: bulk allocation at batch 16 went from 2.0 to the
 * figure in docs/pages.md).  Waiters spin with a pause for a while and then
 * yield the CPU, so that a holder preempted on a 2-core machine gets to run.
 * Build with -DZM_LOCK_PTHREAD to use pthread mutexes instead (for
 * comparison, or for tools that only understand those).
 */
#ifndef ZM_BASE_LOCK_H
#define ZM_BASE_LOCK_H

#ifdef ZM_LOCK_PTHREAD
#include <pthread.h>
typedef pthread_mutex_t zmi_lock_t;
#define ZM_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
static inline void zmi_lock_init(zmi_lock_t *l) { pthread_mutex_init(l, NULL); }
static inline void zmi_lock(zmi_lock_t *l) { pthread_mutex_lock(l); }
static inline void zmi_unlock(zmi_lock_t *l) { pthread_mutex_unlock(l); }
static inline int zmi_trylock(zmi_lock_t *l) { return pthread_mutex_trylock(l) == 0; }
static inline void zmi_lock_destroy(zmi_lock_t *l) { pthread_mutex_destroy(l); }
#else
typedef struct {
	int held;
} zmi_lock_t;
#define ZM_LOCK_INIT { 0 }

void zmi_lock_slow(zmi_lock_t *l);

static inline void zmi_lock_init(zmi_lock_t *l) { l->held = 0; }
static inline void zmi_lock_destroy(zmi_lock_t *l) { (void)l; }

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
