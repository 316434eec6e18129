/*
 * The board's helpers (run.h).  Shared by the preload library and the
 * launcher; uses nothing of either.
 *
 * Ordering: a slot's numbers are plain stores between two release stores
 * of seq (odd, then even); a reader loads seq with acquire, copies, then
 * loads seq again after an acquire fence.  Commands: cmd and cmd_arg are
 * written, then cmd_seq is bumped with release.
 */
#include "run/run.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Times a reader copies a slot being written before it takes what it
 * read: a writer holds seq odd for a few hundred nanoseconds, or forever
 * if it was killed there. */
#define BOARD_READ_TRIES 8

void run_board_init(struct run_board *b, int32_t launcher_pid)
{
	b->version = RUN_BOARD_VERSION;
	b->nslots = RUN_BOARD_SLOTS;
	b->launcher_pid = launcher_pid;
	__atomic_store_n(&b->magic, RUN_BOARD_MAGIC, __ATOMIC_RELEASE);
}

int run_board_attach(const char *path, struct run_board **out)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDWR | O_CLOEXEC), rc = 0;

	*out = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if ((size_t)st.st_size < sizeof(struct run_board)) {
		rc = -EPROTO;
	} else {
		p = mmap(NULL, sizeof(struct run_board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			rc = -errno;
		} else {
			struct run_board *b = p;

			if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != RUN_BOARD_MAGIC ||
			    b->version != RUN_BOARD_VERSION || b->nslots != RUN_BOARD_SLOTS) {
				munmap(p, sizeof(struct run_board));
				rc = -EPROTO;
			} else {
				*out = b;
			}
		}
	}
	close(fd);
	return rc;
}

void run_board_detach(struct run_board *b)
{
	if (b)
		munmap(b, sizeof(*b));
}

int run_board_claim(struct run_board *b, int32_t pid, int32_t ppid, const char *comm)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++) {
		struct run_slot *s = &b->slot[i];
		int32_t zero = 0;

		if (__atomic_load_n(&s->pid, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&s->pid, &zero, pid, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) | 1;

		__atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		s->ppid = ppid;
		s->cmd_done = 0;
		s->started_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		memset(s->comm, 0, sizeof(s->comm));
		if (comm)
			strncpy(s->comm, comm, sizeof(s->comm) - 1);
		memset(&s->st, 0, sizeof(s->st));
		__atomic_store_n(&s->state, RUN_SLOT_LIVE, __ATOMIC_RELAXED);
		__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
		return (int)i;
	}
	__atomic_fetch_add(&b->unreported, 1, __ATOMIC_RELAXED);
	return -ENOSPC;
}

void run_board_publish(struct run_board *b, unsigned slot, const struct run_proc_stats *st,
		       uint32_t state)
{
	struct run_slot *s = &b->slot[slot];
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) | 1;

	__atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->st = *st;
	__atomic_store_n(&s->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
}

int run_board_take_cmd(struct run_board *b, unsigned slot, uint32_t *cmd, uint64_t *arg)
{
	struct run_slot *s = &b->slot[slot];
	uint32_t seq = __atomic_load_n(&b->cmd_seq, __ATOMIC_ACQUIRE);

	if (seq == s->cmd_done)
		return 0;
	for (int i = 0; i < BOARD_READ_TRIES; i++) {
		*cmd = __atomic_load_n(&b->cmd, __ATOMIC_RELAXED);
		*arg = __atomic_load_n(&b->cmd_arg, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint32_t again = __atomic_load_n(&b->cmd_seq, __ATOMIC_ACQUIRE);

		if (again == seq)
			break;
		seq = again;
	}
	__atomic_store_n(&s->cmd_done, seq, __ATOMIC_RELEASE);
	return 1;
}

void run_board_post(struct run_board *b, uint32_t cmd, uint64_t arg)
{
	__atomic_store_n(&b->cmd, cmd, __ATOMIC_RELAXED);
	__atomic_store_n(&b->cmd_arg, arg, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->cmd_seq, 1, __ATOMIC_RELEASE);
}

int32_t run_board_read(const struct run_board *b, unsigned i, struct run_slot *out)
{
	const struct run_slot *s = &b->slot[i];

	for (int t = 0; t < BOARD_READ_TRIES; t++) {
		uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

		memcpy(out, (const void *)s, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(seq & 1) && __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	return out->pid;
}

void run_board_release(struct run_board *b, unsigned i)
{
	struct run_slot *s = &b->slot[i];

	__atomic_store_n(&s->state, RUN_SLOT_FREE, __ATOMIC_RELAXED);
	__atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
}
