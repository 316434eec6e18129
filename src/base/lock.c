/* The contended path of zmi_lock: spin politely, then yield.  And, in
 * ZM_DEBUG builds, the longest holds (lock.h, zm_lock_hold in common.h). */
#define ZMEM_ADVANCED  /* zm_lock_hold */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "base/abi.h"
#include "base/cpu.h"
#include "base/lock.h"
#include <zmem/common.h>

#ifndef ZM_LOCK_PTHREAD
/* Spins before yielding: ~100 pause instructions is a few hundred ns, about
 * the length of the longest critical section; beyond that the holder was
 * probably preempted and spinning only burns its CPU. */
#define ZM_SPINS 100

void zmi_lock_slow(zmi_lock_t *l)
{
	for (;;) {
		for (int i = 0; i < ZM_SPINS; i++) {
			if (!__atomic_load_n(&l->held, __ATOMIC_RELAXED) &&
			    !__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE))
				return;
			zmi_cpu_relax();
		}
		sched_yield();
	}
}
#endif

_Static_assert((int)ZM_LOCK_CLASS == ZMI_LOCK_CLASS && (int)ZM_LOCK_ZONE == ZMI_LOCK_ZONE &&
	       (int)ZM_LOCK_OTHER == ZMI_LOCK_OTHER && (int)ZM_LOCK_COMPACT == ZMI_LOCK_COMPACT &&
	       (int)ZM_LOCK_KINDS == ZMI_LOCK_KINDS,
	       "the public kinds are the internal ones");

#ifdef ZMI_LOCK_HOLDS
/* Holds from this long on are counted (zm_lock_hold's over_10us). */
#define ZMI_LONG_NS 10000ull

uint64_t zmi_hold_max[ZMI_LOCK_KINDS];
uint64_t zmi_hold_long_ticks = UINT64_MAX;  /* until calibrated */

static struct {
	int busy;                           /* a spin flag: records are rare */
	const char *site[ZMI_LOCK_KINDS];   /* busy: who took the longest */
	uint64_t over_10us[ZMI_LOCK_KINDS], over_100us[ZMI_LOCK_KINDS]; /* atomic */
	uint64_t holds[ZMI_LOCK_KINDS];     /* atomic: zmi_hold_note_ns's */
	uint64_t tsc0, ns0;                 /* the counter and the clock at start-up */
	uint64_t ticks_per_ms;              /* from a first 1 ms: for the thresholds */
} hs;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The counter's rate for the thresholds, from 1 ms at start-up (the
 * figures reported use the whole time since: zm_lock_hold). */
__attribute__((constructor)) static void holds_calibrate(void)
{
	uint64_t n0 = mono_ns(), t0 = zmi_hold_now(), n1, t1;

	do
		n1 = mono_ns(), t1 = zmi_hold_now();
	while (n1 - n0 < 1000000);
	hs.tsc0 = t0;
	hs.ns0 = n0;
	hs.ticks_per_ms = (t1 - t0) * 1000000 / (n1 - n0);
	__atomic_store_n(&zmi_hold_long_ticks, hs.ticks_per_ms * ZMI_LONG_NS / 1000000,
			 __ATOMIC_RELAXED);
}

void zmi_lock_held(unsigned kind, const char *site, uint64_t ticks)
{
	uint64_t max;

	if (ticks >= zmi_hold_long_ticks) {
		__atomic_fetch_add(&hs.over_10us[kind], 1, __ATOMIC_RELAXED);
		if (ticks >= 10 * zmi_hold_long_ticks)
			__atomic_fetch_add(&hs.over_100us[kind], 1, __ATOMIC_RELAXED);
	}
	if (ticks <= __atomic_load_n(&zmi_hold_max[kind], __ATOMIC_RELAXED))
		return;
	while (__atomic_exchange_n(&hs.busy, 1, __ATOMIC_ACQUIRE))
		zmi_cpu_relax();
	max = __atomic_load_n(&zmi_hold_max[kind], __ATOMIC_RELAXED);
	if (ticks > max) {
		__atomic_store_n(&zmi_hold_max[kind], ticks, __ATOMIC_RELAXED);
		hs.site[kind] = site;
	}
	__atomic_store_n(&hs.busy, 0, __ATOMIC_RELEASE);
}

void zmi_hold_note_ns(unsigned kind, const char *site, uint64_t ns)
{
	uint64_t ticks = ns * hs.ticks_per_ms / 1000000;

	__atomic_fetch_add(&hs.holds[kind], 1, __ATOMIC_RELAXED);

	if (ticks > __atomic_load_n(&zmi_hold_max[kind], __ATOMIC_RELAXED) ||
	    ticks >= zmi_hold_long_ticks)
		zmi_lock_held(kind, site, ticks);
}
#endif

void zm_lock_hold_reset(void)
{
#ifdef ZMI_LOCK_HOLDS
	while (__atomic_exchange_n(&hs.busy, 1, __ATOMIC_ACQUIRE))
		zmi_cpu_relax();
	for (unsigned k = 0; k < ZMI_LOCK_KINDS; k++) {
		__atomic_store_n(&zmi_hold_max[k], 0, __ATOMIC_RELAXED);
		hs.site[k] = NULL;
		__atomic_store_n(&hs.over_10us[k], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&hs.over_100us[k], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&hs.holds[k], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&hs.busy, 0, __ATOMIC_RELEASE);
#endif
}

int zm_lock_hold_sized(enum zm_lock_kind kind, struct zm_lock_hold *out, size_t size)
{
	struct zm_lock_hold h;

	memset(&h, 0, sizeof(h));
	if (!out || (unsigned)kind >= ZMI_LOCK_KINDS)
		return -EINVAL;
#ifdef ZMI_LOCK_HOLDS
	{
		/* the counter's rate over the whole time since start-up */
		uint64_t dn = mono_ns() - hs.ns0, dt = zmi_hold_now() - hs.tsc0;
		double ns_per_tick = dt ? (double)dn / (double)dt : 0;

		while (__atomic_exchange_n(&hs.busy, 1, __ATOMIC_ACQUIRE))
			zmi_cpu_relax();
		h.max_ns = (uint64_t)((double)__atomic_load_n(&zmi_hold_max[kind],
							      __ATOMIC_RELAXED) * ns_per_tick);
		h.site = hs.site[kind];
		__atomic_store_n(&hs.busy, 0, __ATOMIC_RELEASE);
		h.over_10us = __atomic_load_n(&hs.over_10us[kind], __ATOMIC_RELAXED);
		h.over_100us = __atomic_load_n(&hs.over_100us[kind], __ATOMIC_RELAXED);
		h.holds = __atomic_load_n(&hs.holds[kind], __ATOMIC_RELAXED);
	}
	return zmi_struct_out(out, size, zmi_size_upto(struct zm_lock_hold, over_100us), &h,
			      sizeof(h));
#else
	(void)size;
	return -EOPNOTSUPP;
#endif
}
