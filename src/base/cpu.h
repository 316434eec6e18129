/*
 * The processor-specific lines of the library, and only those: a pause in a
 * spin loop and a cheap tick counter, for each architecture zmem builds on
 * (x86-64 and i386, aarch64), with a portable fallback for the others.
 * Nothing else in src/ names an architecture.
 *
 * zmi_cpu_relax(): the body of every spin-wait loop.  It tells the core
 * that the thread is waiting (x86 `pause`: the sibling hyper-thread gets
 * the pipeline, and leaving the loop does not flush it; aarch64 `isb`,
 * which stalls for a few dozen cycles as `pause` does, where `yield` is
 * a no-op on most cores and the loop would hammer the line it waits on),
 * and it is a compiler barrier on every architecture: the loop re-reads
 * memory, whatever the loop's own loads say.  It orders nothing between
 * CPUs: the waits use acquire loads for that.
 *
 * zmi_cpu_ticks(): a monotonic counter for timing short sections (the
 * debug build's lock holds, the benchmarks), in ticks of unknown rate
 * that the caller calibrates against the clock (x86: the time stamp
 * counter; aarch64: the generic timer's virtual count, readable from user
 * space on Linux; otherwise: CLOCK_MONOTONIC in ns).
 * zmi_cpu_ticks_after(): the same, read only once every earlier
 * instruction has finished (the end of a timed section).
 */
#ifndef ZM_BASE_CPU_H
#define ZM_BASE_CPU_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
static inline void zmi_cpu_relax(void)
{
	__builtin_ia32_pause();
	__asm__ __volatile__("" ::: "memory");
}

static inline uint64_t zmi_cpu_ticks(void)
{
	return __builtin_ia32_rdtsc();
}

static inline uint64_t zmi_cpu_ticks_after(void)
{
	unsigned aux;

	return __builtin_ia32_rdtscp(&aux);
}
#elif defined(__aarch64__)
static inline void zmi_cpu_relax(void)
{
	__asm__ __volatile__("isb" ::: "memory");
}

static inline uint64_t zmi_cpu_ticks(void)
{
	uint64_t t;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(t));
	return t;
}

static inline uint64_t zmi_cpu_ticks_after(void)
{
	uint64_t t;

	__asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(t) :: "memory");
	return t;
}
#else
#include <time.h>

static inline void zmi_cpu_relax(void)
{
	__asm__ __volatile__("" ::: "memory");
}

static inline uint64_t zmi_cpu_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t zmi_cpu_ticks_after(void)
{
	return zmi_cpu_ticks();
}
#endif

#endif
