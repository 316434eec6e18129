/*
 * The board's helpers (board.h has the layout and its rules), for both
 * sides: the preload library (src/run/) and the launcher (zmem run).
 *
 * Each is small and never blocks: a board is shared memory written by
 * processes that may die at any point, so a reader copies and checks and
 * a writer never waits for a reader.  Errors are 0 or a negative errno.
 */
#ifndef ZM_RUN_RUN_H
#define ZM_RUN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "run/board.h"

/* Launcher: fill a new board's header (the file sized and mapped shared,
 * zero-filled): magic, version, slot count, launcher_pid. */
void run_board_init(struct run_board *b, int32_t launcher_pid);

/* Map the board file at path (read-write, shared) and check its magic,
 * version and size.  Sets *out; 0, or -errno of open/fstat/mmap, or
 * -EPROTO (not a board, or another version's).  Unmap with
 * run_board_detach. */
int run_board_attach(const char *path, struct run_board **out);
void run_board_detach(struct run_board *b);

/* Process: claim a free slot (pid 0) for pid, forked from ppid (0: not
 * forked from a process of the run), named comm.  Its commands start at
 * 0 applied, so the last command posted before it started is applied by
 * it too.  Returns the slot's index, or -ENOSPC (every slot taken: the
 * board's unreported count goes up). */
int run_board_claim(struct run_board *b, int32_t pid, int32_t ppid, const char *comm);

/* Process: write slot's numbers (and state, RUN_SLOT_LIVE or
 * RUN_SLOT_EXITED) under its sequence count. */
void run_board_publish(struct run_board *b, unsigned slot, const struct run_proc_stats *st,
		       uint32_t state);

/* Process: the command to apply, if one was posted that slot has not
 * applied: returns 1 and sets *cmd and *arg (and marks it applied), or 0.
 * Only the last command posted is seen: commands posted faster than a
 * process polls (RUN_PUBLISH_MS) are folded into the last one. */
int run_board_take_cmd(struct run_board *b, unsigned slot, uint32_t *cmd, uint64_t *arg);

/* Launcher: post a command to every process (enum run_cmd, arg). */
void run_board_post(struct run_board *b, uint32_t cmd, uint64_t arg);

/* Launcher: copy slot i (its header and numbers) consistently: retries
 * while it is being written, a few times, then takes what it read.
 * Returns the slot's pid (0: a free slot). */
int32_t run_board_read(const struct run_board *b, unsigned i, struct run_slot *out);

/* Launcher: free slot i again (after folding an exited process's final
 * numbers into its totals), so that a run of many short processes does
 * not run out of slots.  Only an RUN_SLOT_EXITED slot, or one whose pid
 * is gone, may be freed. */
void run_board_release(struct run_board *b, unsigned i);

#endif
