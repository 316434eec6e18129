/*
 * A stand-in for libzmem-run.so in the tests of zmem run's launcher
 * (tests/cli/test_run.sh): it compresses nothing, but speaks the board
 * (src/run/board.h) as the library does, so that zmem stats, ctl, list
 * and --stats are tested apart from the library.  Loaded with
 * ZMEM_RUN_LIB=.../run-fake.so: a process claims a slot, publishes fixed
 * numbers every RUN_PUBLISH_MS from a thread, applies the commands
 * posted (reclaim: one eviction more and nothing resident; mem-limit:
 * the limit, a share of heap_max when RUN_ARG_PCT; untrack: no limit),
 * and publishes EXITED at exit.  A child of fork claims a slot of its
 * own.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "run/board.h"

#define FAKE_HEAP (64ull << 20)

static struct run_board *board;
static struct run_slot *slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void publish(uint32_t state)
{
	struct run_slot *s = slot;

	if (!s)
		return;
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);  /* odd */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->state = state;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static void apply(void)
{
	uint32_t seq = __atomic_load_n(&board->cmd_seq, __ATOMIC_ACQUIRE);
	struct run_proc_stats *st = &slot->st;
	uint64_t arg = board->cmd_arg;

	if (seq == slot->cmd_done)
		return;
	__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELEASE);
	switch (board->cmd) {
	case RUN_CMD_RECLAIM:
		st->evictions++;
		st->resident_bytes = 0;
		break;
	case RUN_CMD_MEM_LIMIT:
		st->resident_limit = arg & RUN_ARG_PCT
				     ? st->heap_max * (arg & ~RUN_ARG_PCT) / 10000 : arg;
		break;
	case RUN_CMD_UNTRACK:
		st->resident_limit = 0;
		break;
	}
	__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&slot->cmd_done, seq, __ATOMIC_RELEASE);
}

static void *run_thread(void *arg)
{
	for (;;) {
		struct timespec ts = { 0, RUN_PUBLISH_MS * 1000000l };

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&lock);
		apply();
		publish(RUN_SLOT_LIVE);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void claim(int32_t ppid)
{
	int32_t pid = (int32_t)getpid();
	pthread_t t;

	slot = NULL;
	for (unsigned i = 0; i < RUN_BOARD_SLOTS && !slot; i++) {
		int32_t zero = 0;

		if (__atomic_compare_exchange_n(&board->slot[i].pid, &zero, pid, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			slot = &board->slot[i];
	}
	if (!slot) {
		__atomic_fetch_add(&board->unreported, 1, __ATOMIC_RELAXED);
		return;
	}
	slot->ppid = ppid;
	{
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		slot->started_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	}
	/* commands posted before we came are not ours */
	slot->cmd_done = __atomic_load_n(&board->cmd_seq, __ATOMIC_ACQUIRE);
	{
		char buf[64] = "";
		int fd = open("/proc/self/comm", O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;

		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		strncpy(slot->comm, buf, sizeof(slot->comm) - 1);
	}
	slot->st = (struct run_proc_stats){
		.heap_bytes = FAKE_HEAP, .heap_max = FAKE_HEAP,
		.resident_bytes = FAKE_HEAP / 4, .resident_max = FAKE_HEAP / 4,
		.stored_bytes = FAKE_HEAP / 8, .pool_bytes = FAKE_HEAP / 8 + 4096,
		.meta_bytes = 1 << 20, .faults_first = 100, .faults_refault = 10,
		.faults_wp = 5, .fault_ns = 2000000, .evictions = 1000,
	};
	publish(RUN_SLOT_LIVE);
	pthread_create(&t, NULL, run_thread, NULL);
	pthread_detach(t);
}

static void child(void)
{
	pthread_mutex_init(&lock, NULL);
	if (board)
		claim(getppid());
}

static void at_exit(void)
{
	pthread_mutex_lock(&lock);
	publish(RUN_SLOT_EXITED);
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void fake_init(void)
{
	const char *path = getenv("ZMEM_RUN_BOARD");
	int fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
	void *p;

	if (fd < 0)
		return;
	p = mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	board = p;
	if (__atomic_load_n(&board->magic, __ATOMIC_ACQUIRE) != RUN_BOARD_MAGIC ||
	    board->version != RUN_BOARD_VERSION) {
		board = NULL;
		return;
	}
	pthread_atfork(NULL, NULL, child);
	atexit(at_exit);
	claim(0);
}
