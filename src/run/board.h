/*
 * The board: what `zmem run` and the processes it runs share.
 *
 * `zmem run` (src/cli/run.c) makes a file in a private folder, sizes it to
 * struct run_board, maps it shared and passes its path to CMD in
 * ZMEM_RUN_BOARD.  Every process of the run that loads the preload library
 * (src/run/: CMD, and the children it forks or execs with the environment
 * kept) maps the same file, claims a slot and, from its run thread, writes
 * its statistics there every RUN_PUBLISH_MS and once more at exit; it also
 * reads the commands the launcher posts (zmem ctl: reclaim, mem-limit,
 * untrack).  The launcher reads the slots for `zmem stats`, `zmem list` and
 * --stats, and never blocks on a process: a process killed outright leaves
 * its last numbers and a pid that is gone.
 *
 * Rules that keep two processes that do not trust each other's timing
 * right:
 *   - a slot is claimed by a compare-and-swap of pid from 0 to the
 *     process's pid (a child of fork claims a new one: its pid differs
 *     from the slot it inherited);
 *   - a slot's numbers are written under a sequence count (odd while
 *     writing): a reader copies them and retries while seq was odd or
 *     changed, at most a few times, then takes what it read;
 *   - a command is written whole (verb, arg), then cmd_seq is bumped
 *     (release); each process applies every command whose number it has
 *     not applied yet (its slot's cmd_done), so one posted while a process
 *     starts is applied by it too, and one posted twice is two commands.
 *
 * The layout is the file's format: RUN_BOARD_VERSION goes up whenever it
 * changes, and both sides refuse a board of another version (the preload
 * then runs unreported, as it does without ZMEM_RUN_BOARD).
 */
#ifndef ZM_RUN_BOARD_H
#define ZM_RUN_BOARD_H

#include <stdint.h>

#define RUN_BOARD_MAGIC   0x31646275726d7a00ull /* "\0zmrubd1", little-endian */
#define RUN_BOARD_VERSION 2u
/* Processes one run reports at once: a build's or a test suite's worth.
 * Processes beyond it run compressed but unreported (counted in
 * board.unreported). */
#define RUN_BOARD_SLOTS   256u
/* How often a process's numbers are refreshed, and commands looked for. */
#define RUN_PUBLISH_MS    100u
/* The store's allocator when none is asked for: xcfmalloc, not the
 * store's own default (zsmalloc).  A program's heap churns (blocks freed
 * and allocated, pages evicted and brought back over and over), and
 * under that churn zsmalloc's pool held 14-34% more than the bytes it
 * stored where xcfmalloc's held 2-3%, at the same speed (bench/run's
 * three programs at a quarter of their peak: docs/results/). */
#define RUN_ALLOCATOR     "xcfmalloc"

enum run_cmd {
	RUN_CMD_NONE = 0,
	RUN_CMD_RECLAIM = 1,   /* arg: bytes to compress now (0: all it can) */
	RUN_CMD_MEM_LIMIT = 2, /* arg: bytes, 0: none; or with RUN_ARG_PCT set,
				  a share of the heap seen, in 1/100 percent */
	RUN_CMD_UNTRACK = 3,   /* stop compressing: no limit from now on, and
				  new memory no longer placed in regions */
};
#define RUN_ARG_PCT (1ull << 63)

enum run_slot_state {
	RUN_SLOT_FREE = 0,
	RUN_SLOT_LIVE = 1,
	RUN_SLOT_EXITED = 2,   /* its last numbers are final */
};

/* One process's numbers: all in bytes unless named otherwise. */
struct run_proc_stats {
	uint64_t heap_bytes;      /* region memory in use: resident + stored
				     pages (pages never written excluded) */
	uint64_t heap_max;        /* the most heap_bytes has been */
	uint64_t resident_bytes;  /* region pages resident now */
	uint64_t resident_max;
	uint64_t resident_limit;  /* 0: none */
	uint64_t stored_bytes;    /* compressed bytes in the store */
	uint64_t pool_bytes;      /* memory the store's pool holds */
	uint64_t meta_bytes;      /* page table, store and pool metadata */
	uint64_t malloc_bytes;    /* live bytes from malloc and its kind (as
				     the allocator counts them, 0 if unknown) */
	uint64_t mmap_bytes;      /* live anonymous mmap bytes in regions */
	uint64_t faults_first;
	uint64_t faults_refault;
	uint64_t faults_wp;
	uint64_t fault_ns;        /* time serving faults, all threads */
	uint64_t evictions;
	uint64_t outside_bytes;   /* allocations that could not go in a
				     region (it was full) and went to the
				     system's allocator or mmap */
	uint64_t rss_bytes;       /* the process's resident set (VmRSS),
				     region pages included */
	/* the most each has been, at the process's samples (every
	 * RUN_PUBLISH_MS: a peak shorter than that may be missed) */
	uint64_t pool_max;
	uint64_t stored_max;
	uint64_t meta_max;
	uint64_t total_max;       /* resident + pool + meta, at one sample */
	uint64_t rss_max;
};

struct run_slot {
	int32_t pid;              /* 0: free; claimed by CAS */
	uint32_t state;           /* enum run_slot_state */
	int32_t ppid;             /* the process it was forked from, or 0 */
	uint32_t seq;             /* odd while the numbers are written */
	uint32_t cmd_done;        /* commands applied: cmd_seq's value */
	uint32_t pad;
	uint64_t started_ns;      /* CLOCK_MONOTONIC */
	char comm[32];            /* its name (the exec'd file's base name) */
	struct run_proc_stats st;
};

struct run_board {
	uint64_t magic;           /* RUN_BOARD_MAGIC */
	uint32_t version;         /* RUN_BOARD_VERSION */
	uint32_t nslots;          /* RUN_BOARD_SLOTS */
	int32_t launcher_pid;     /* zmem run's own pid */
	uint32_t cmd_seq;         /* bumped after cmd and arg are written */
	uint32_t cmd;             /* enum run_cmd */
	uint32_t unreported;      /* processes that found no free slot */
	uint64_t cmd_arg;
	uint64_t reserved[8];
	struct run_slot slot[RUN_BOARD_SLOTS];
};

#endif
