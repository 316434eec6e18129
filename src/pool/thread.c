/*
 * Per-thread state of the pool layer: map slots and copy buffers, hazard
 * pointers, and the registry that lets a compactor see every thread's
 * hazards (see pool_internal.h for the protocol).
 *
 * Lock order: threads_lock is a leaf (nothing else is taken under it).
 * It protects the registry list; a thread's record is written by that
 * thread only (hazards with relaxed atomics, read by compactors).
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/os.h"
#include "base/worker.h"
#include "pool/pool_internal.h"

__thread struct zmi_pool_thread zmi_pool_self __attribute__((tls_model("initial-exec")));
unsigned zmi_pool_threads_numbered;
bool zmi_pool_readers_light;

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zmi_pool_thread *threads;
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void thread_exit(void *unused)
{
	struct zmi_pool_thread *t = &zmi_pool_self;

	pthread_mutex_lock(&threads_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		threads = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&threads_lock);
	for (int i = 0; i < ZM_POOL_MAX_MAPS; i++) {
		free(t->buf[i]);
		t->buf[i] = NULL;
		t->buflen[i] = 0;
	}
	t->registered = false;
}

/* fork: threads_lock is held across it.  In the child only the
 * forking thread exists: the registry keeps its record alone, so that
 * hazards the other threads had published (they never unpublish them
 * there) keep no zspage from being compacted.  The expedited membarrier
 * is registered again: the child is a new process to the kernel, and its
 * readers, fence-free, count on it once it makes threads of its own. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&threads_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&threads_lock);
}

static void fork_child(void)
{
	struct zmi_pool_thread *t = &zmi_pool_self;

	threads = NULL;
	if (t->registered) {
		t->prev = t->next = NULL;
		threads = t;
	}
	if (zmi_pool_readers_light &&
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
		zmi_pool_readers_light = false;
	pthread_mutex_unlock(&threads_lock);
}

static void once_init(void)
{
	pthread_key_create(&thread_key, thread_exit);
	zmi_fork_hook(fork_prepare, fork_parent, fork_child);
	/* Readers go fence-free only if the expedited private membarrier
	 * can be registered; otherwise every reader fences. */
	zmi_pool_readers_light = zmi_os_membarrier_register() == 0;
#ifdef __SANITIZE_THREAD__
	zmi_pool_readers_light = false;  /* TSan cannot see the syscall's ordering */
#endif
}

void zmi_pool_thread_register(void)
{
	struct zmi_pool_thread *t = &zmi_pool_self;

	pthread_once(&thread_once, once_init);
	pthread_mutex_lock(&threads_lock);
	t->prev = NULL;
	t->next = threads;
	if (threads)
		threads->prev = t;
	threads = t;
	pthread_mutex_unlock(&threads_lock);
	pthread_setspecific(thread_key, t);
	t->registered = true;
}

void zmi_pool_heavy_barrier(void)
{
	pthread_once(&thread_once, once_init);
#ifdef __SANITIZE_THREAD__
	static int dummy;

	__atomic_fetch_add(&dummy, 1, __ATOMIC_SEQ_CST);  /* TSan: no fences */
#else
	if (!zmi_pool_readers_light || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

bool zmi_pool_hazard_find(const void *p)
{
	bool found = false;

	pthread_mutex_lock(&threads_lock);
	for (struct zmi_pool_thread *t = threads; t && !found; t = t->next)
		for (int i = 0; i < ZM_HAZARDS; i++)
			if (__atomic_load_n(&t->hazard[i], __ATOMIC_ACQUIRE) == p)
				found = true;
	pthread_mutex_unlock(&threads_lock);
	return found;
}

struct zmi_pool_map_slot *zmi_pool_map_push(size_t page_size, char **buf)
{
	struct zmi_pool_thread *t = &zmi_pool_self;
	unsigned n = t->nmaps;

	if (zmi_unlikely(n >= ZM_POOL_MAX_MAPS)) {
		errno = EBUSY;
		return NULL;
	}
	if (buf) {
		/* Only this slot's buffer may be replaced: the others may be
		 * handed out right now. */
		if (zmi_unlikely(t->buflen[n] < page_size)) {
			char *b = realloc(t->buf[n], page_size);

			if (!b) {
				errno = ENOMEM;
				return NULL;
			}
			if (!t->registered)
				zmi_pool_thread_register();  /* so the buffer is freed at exit */
			t->buf[n] = b;
			t->buflen[n] = page_size;
		}
		*buf = t->buf[n];
	}
	t->nmaps = n + 1;
	return &t->slot[n];
}
