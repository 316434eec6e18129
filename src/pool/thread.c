/*
 * Per-thread state of the pool layer: map slots and copy buffers, hazard
 * pointers, and the registry that lets a compactor see every thread's
 * hazards (see pool_internal.h for the protocol).
 *
 * Lock order: zm_threads_lock is a leaf (nothing else is taken under it).
 * It protects the registry list; a thread's record is written by that
 * thread only (hazards with relaxed atomics, read by compactors).
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool/pool_internal.h"

__thread struct zm_thread zm_self __attribute__((tls_model("initial-exec")));
unsigned zm_threads_numbered;
bool zm_readers_light;

static pthread_mutex_t zm_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zm_thread *zm_threads;
static pthread_key_t zm_thread_key;
static pthread_once_t zm_thread_once = PTHREAD_ONCE_INIT;

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void thread_exit(void *unused)
{
	struct zm_thread *t = &zm_self;

	pthread_mutex_lock(&zm_threads_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		zm_threads = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&zm_threads_lock);
	for (int i = 0; i < ZM_POOL_MAX_MAPS; i++) {
		free(t->buf[i]);
		t->buf[i] = NULL;
		t->buflen[i] = 0;
	}
	t->registered = false;
}

static void once_init(void)
{
	pthread_key_create(&zm_thread_key, thread_exit);
	/* Readers go fence-free only if the expedited private membarrier
	 * can be registered; otherwise every reader fences. */
	zm_readers_light = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#ifdef __SANITIZE_THREAD__
	zm_readers_light = false;  /* TSan cannot see the syscall's ordering */
#endif
}

void zm_thread_register(void)
{
	struct zm_thread *t = &zm_self;

	pthread_once(&zm_thread_once, once_init);
	pthread_mutex_lock(&zm_threads_lock);
	t->prev = NULL;
	t->next = zm_threads;
	if (zm_threads)
		zm_threads->prev = t;
	zm_threads = t;
	pthread_mutex_unlock(&zm_threads_lock);
	pthread_setspecific(zm_thread_key, t);
	t->registered = true;
}

void zm_heavy_barrier(void)
{
	pthread_once(&zm_thread_once, once_init);
#ifdef __SANITIZE_THREAD__
	static int dummy;

	__atomic_fetch_add(&dummy, 1, __ATOMIC_SEQ_CST);  /* TSan: no fences */
#else
	if (!zm_readers_light || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

bool zm_hazard_find(const void *p)
{
	bool found = false;

	pthread_mutex_lock(&zm_threads_lock);
	for (struct zm_thread *t = zm_threads; t && !found; t = t->next)
		for (int i = 0; i < ZM_HAZARDS; i++)
			if (__atomic_load_n(&t->hazard[i], __ATOMIC_ACQUIRE) == p)
				found = true;
	pthread_mutex_unlock(&zm_threads_lock);
	return found;
}

struct zm_map_slot *zm_map_push(size_t page_size, char **buf)
{
	struct zm_thread *t = &zm_self;
	unsigned n = t->nmaps;

	if (zm_unlikely(n >= ZM_POOL_MAX_MAPS)) {
		errno = EBUSY;
		return NULL;
	}
	if (buf) {
		/* Only this slot's buffer may be replaced: the others may be
		 * handed out right now. */
		if (zm_unlikely(t->buflen[n] < page_size)) {
			char *b = realloc(t->buf[n], page_size);

			if (!b) {
				errno = ENOMEM;
				return NULL;
			}
			if (!t->registered)
				zm_thread_register();  /* so the buffer is freed at exit */
			t->buf[n] = b;
			t->buflen[n] = page_size;
		}
		*buf = t->buf[n];
	}
	t->nmaps = n + 1;
	return &t->slot[n];
}
