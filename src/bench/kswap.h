/* The kernel's compressed swap as a side of a benchmark (regionbench,
 * runbench): a memory cgroup of our own with a limit, and as the swap in
 * use either a zram device of our own or a swap file with zswap on.
 * Root only; every call that sets something up says why it could not in
 * why (the side is then skipped), and kswap_down() / kcg_destroy() undo
 * whatever was done, so a failed or interrupted side leaves nothing
 * behind. */
#ifndef ZM_BENCH_KSWAP_H
#define ZM_BENCH_KSWAP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A memory cgroup: v1 (memory.limit_in_bytes) or v2 (memory.max). */
struct kcgroup {
	char dir[256];
	bool v2;
};

/* Make the cgroup NAME.PID with limit bytes: 0, or -1 with why. */
int kcg_create(struct kcgroup *cg, const char *name, uint64_t limit, char *why, size_t wl);
int kcg_set_limit(const struct kcgroup *cg, uint64_t bytes);   /* 0 or -errno */
int kcg_enter(const struct kcgroup *cg, pid_t pid);            /* 0 or -errno */
/* Its peak usage (v1 max_usage_in_bytes, v2 memory.peak) and usage now,
 * page cache and kernel memory charged to it included; 0 if unknown. */
uint64_t kcg_peak(const struct kcgroup *cg);
uint64_t kcg_usage(const struct kcgroup *cg);
/* Remove it (waits a moment for the last process to leave). */
void kcg_destroy(struct kcgroup *cg);

enum kswap_kind { KSWAP_ZRAM, KSWAP_ZSWAP };

/* The swap a kernel side runs with. */
struct kswap {
	enum kswap_kind kind;
	char dev[256];          /* the swap device or file */
	char sys[64];           /* zram: /sys/block/zramN */
	int zram_id;            /* -1: none */
	char zs_enabled[8], zs_comp[32], zs_shrinker[8]; /* zswap: what to restore */
	bool on;
};

/* Bring up a swap of kind of bytes, highest priority, the codec's kernel
 * name ("lz4" of "lz4:1"; the kernel's default if it has no such one,
 * with a note); zswap's swap file goes in dir.  0, or -1 with why;
 * kswap_down() in both cases. */
int kswap_up(struct kswap *k, enum kswap_kind kind, const char *codec, const char *dir,
	     size_t bytes, char *why, size_t wl);
void kswap_down(struct kswap *k);
/* zram's mm_stat: the first n of its fields (orig_data_size,
 * compr_data_size, mem_used_total, mem_limit, mem_used_max, same_pages,
 * pages_compacted, huge_pages); 0, or -1 if unreadable. */
int kswap_zram_mm(const struct kswap *k, uint64_t *v, int n);

/* A field of /proc/meminfo, bytes (0 if absent). */
uint64_t kswap_meminfo(const char *key);

/* While a kernel side is up, SIGINT, SIGTERM and SIGHUP only note
 * themselves (in whatever thread they land) until it is torn down:
 * kswap_signals_hold() before bringing it up, kswap_signals_release()
 * after the teardown (a signal noted then takes effect).  A child
 * started meanwhile calls kswap_signals_child() to take them at once.
 * SIGPIPE is ignored from the first hold on: a child killed by its
 * cgroup closes its pipes. */
#define KSWAP_NSTOP 3
void kswap_signals_hold(struct sigaction old[KSWAP_NSTOP]);
void kswap_signals_release(const struct sigaction old[KSWAP_NSTOP]);
void kswap_signals_child(void);

/* A small file (a sysfs or cgroup attribute) written whole: 0 or -errno;
 * and read as a decimal number (0 if unreadable). */
int bench_file_write(const char *path, const char *val);
uint64_t bench_file_u64(const char *path);

#endif
