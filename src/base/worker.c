/*
 * The background worker (worker.h): one thread for the process, started
 * on the first registration, ending by itself when no item is registered,
 * calling each item's callback when it is kicked or its period is due.
 *
 * Lock order (outer first):
 *
 *   (callback's own locks: a pool's compact_lock -> class locks -> ...)
 *   any lock of the free path (a class lock)  ->  wk.lock
 *
 * wk.lock is a leaf: no other lock is taken while it is held, and it is
 * never held while a callback runs.  A callback therefore may take any
 * lock but wk.lock, and zmi_worker_kick() may be called under any lock.
 * zmi_worker_del() waits (on wk.done, dropping wk.lock) for the item's
 * running callback; its caller must hold no lock that callback takes (a
 * pool drops compact_lock first), and a callback never calls it, so the
 * wait cannot close a cycle.  The fork prepare handler is the only other
 * waiter: it holds wk.lock across fork() after waiting on wk.done until no
 * callback runs (and wk.forking keeps new ones from starting), so that the
 * child finds no callback half done and none of the locks callbacks take
 * held by the worker thread, which does not exist in the child.
 *
 * Fork: one pthread_atfork handler for the whole library, here, so that
 * the order is fixed: the worker's prepare first (it waits for the
 * running callback, which may take the other layers' registry locks:
 * thread.c's, for hazards), then the hooks of the other layers in the
 * order they came (zmi_fork_hook: each takes its registry lock), all
 * with wk.lock held; parent and child in the reverse order.  Separate
 * pthread_atfork registrations run in the reverse of the order they were
 * made, which depends on which layer a program met first, and a registry
 * lock taken before the worker's wait deadlocked against the callback.
 *
 * wk.lock guards the item list, each item's registered/running/due,
 * wk.alive and wk.forking.  The thread is detached: nothing ever joins
 * it, so nothing in a child waits for the parent's thread.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "base/debug.h"
#include "base/os.h"
#include "base/worker.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;       /* the thread waits here for work */
	pthread_cond_t done;       /* a callback returned */
	struct zmi_work *head, *tail;
	unsigned nitems;
	bool alive;                /* a thread runs (or is starting) */
	bool forking;              /* prepare handler: start no callback */
	pthread_once_t once;
	/* the other layers' fork handlers (zmi_fork_hook), called after the
	 * worker's own prepare, before its parent and child */
	struct zmi_fork_hook {
		void (*prepare)(void), (*parent)(void), (*child)(void);
	} hook[ZMI_FORK_HOOKS];
	unsigned nhooks;
} wk = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
};

static void cond_init(pthread_cond_t *c)
{
	pthread_condattr_t at;

	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(c, &at);
	pthread_condattr_destroy(&at);
}

static void atfork_prepare(void)
{
	unsigned n;

	pthread_mutex_lock(&wk.lock);
	__atomic_store_n(&wk.forking, true, __ATOMIC_RELAXED);
	for (;;) {
		bool busy = false;

		for (struct zmi_work *w = wk.head; w; w = w->next)
			busy |= w->running;
		if (!busy)
			break;
		pthread_cond_wait(&wk.done, &wk.lock);
	}
	n = __atomic_load_n(&wk.nhooks, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		wk.hook[i].prepare();
}

static void atfork_parent(void)
{
	for (unsigned i = wk.nhooks; i-- > 0;)
		wk.hook[i].parent();
	__atomic_store_n(&wk.forking, false, __ATOMIC_RELAXED);
	pthread_cond_signal(&wk.wake);
	pthread_mutex_unlock(&wk.lock);
}

/* The child has one thread, the one that forked: no worker, no callback
 * running (prepare saw to it).  The condition variables may remember
 * waiters of the parent: made afresh. */
static void atfork_child(void)
{
	for (unsigned i = wk.nhooks; i-- > 0;)
		wk.hook[i].child();
	__atomic_store_n(&wk.forking, false, __ATOMIC_RELAXED);
	__atomic_store_n(&wk.alive, false, __ATOMIC_RELAXED);
	cond_init(&wk.wake);
	cond_init(&wk.done);
	pthread_mutex_unlock(&wk.lock);
}

static void once_init(void)
{
	cond_init(&wk.wake);
	cond_init(&wk.done);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void zmi_fork_hook(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
	pthread_once(&wk.once, once_init);
	pthread_mutex_lock(&wk.lock);
	if (wk.nhooks < ZMI_FORK_HOOKS) {
		wk.hook[wk.nhooks] = (struct zmi_fork_hook){ prepare, parent, child };
		__atomic_store_n(&wk.nhooks, wk.nhooks + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&wk.lock);
}

static void list_del(struct zmi_work *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		wk.head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		wk.tail = w->prev;
	w->next = w->prev = NULL;
}

static void list_add_tail(struct zmi_work *w)
{
	w->next = NULL;
	w->prev = wk.tail;
	if (wk.tail)
		wk.tail->next = w;
	else
		wk.head = w;
	wk.tail = w;
}

/* The item to call now (kicked or due), or NULL and *wait_until the
 * earliest due time (UINT64_MAX: none).  wk.lock held.
 *
 * An item being unregistered (stop set) is never picked, and its due time
 * does not wake the thread.  zmi_worker_del() must wait for the call that
 * runs when it sets stop, and for nothing more: the thread keeps wk.lock
 * from the end of a call through the next pick(), so a stopping item
 * kicked during its call would be called again before the waiter could
 * look, and one kicked in every call would keep the stop waiting for
 * ever. */
static struct zmi_work *pick(uint64_t now, uint64_t *wait_until)
{
	uint64_t next = UINT64_MAX;

	for (struct zmi_work *w = wk.head; w; w = w->next) {
		if (w->running || __atomic_load_n(&w->stop, __ATOMIC_RELAXED))
			continue;
		if (__atomic_load_n(&w->kicked, __ATOMIC_ACQUIRE) ||
		    (w->period_ms && w->due <= now))
			return w;
		if (w->period_ms && w->due < next)
			next = w->due;
	}
	*wait_until = next;
	return NULL;
}

static void *worker_main(void *unused)
{
	zmi_in_lib = 1; /* base/os.h: never given region memory */
	pthread_mutex_lock(&wk.lock);
	for (;;) {
		uint64_t now = zmi_os_now_ns(), until;
		struct zmi_work *w;

		if (!wk.nitems)
			break;
		w = wk.forking ? NULL : pick(now, &until);
		if (!w) {
			if (wk.forking || until == UINT64_MAX) {
				pthread_cond_wait(&wk.wake, &wk.lock);
			} else {
				struct timespec ts = {
					.tv_sec = (time_t)(until / 1000000000u),
					.tv_nsec = (long)(until % 1000000000u),
				};

				pthread_cond_timedwait(&wk.wake, &wk.lock, &ts);
			}
			continue;
		}
		w->running = true;
		/* the next in line first: no item starves the others */
		list_del(w);
		list_add_tail(w);
		pthread_mutex_unlock(&wk.lock);
		__atomic_store_n(&w->kicked, 0, __ATOMIC_RELEASE);
		w->fn(w->arg);
		pthread_mutex_lock(&wk.lock);
		w->running = false;
		w->due = zmi_os_now_ns() + (uint64_t)w->period_ms * 1000000u;
		pthread_cond_broadcast(&wk.done);
	}
	__atomic_store_n(&wk.alive, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&wk.lock);
	return NULL;
}

/* Start the thread if none runs and there is work.  wk.lock held. */
static int start_locked(void)
{
	pthread_attr_t at;
	pthread_t t;
	int rc;

	if (wk.alive || !wk.nitems)
		return 0;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &at, worker_main, NULL);
	pthread_attr_destroy(&at);
	if (rc)
		return -ENOMEM;
	__atomic_store_n(&wk.alive, true, __ATOMIC_RELAXED);
	return 0;
}

int zmi_worker_add(struct zmi_work *w)
{
	int rc = 0;

	pthread_once(&wk.once, once_init);
	pthread_mutex_lock(&wk.lock);
	if (!w->registered) {
		__atomic_store_n(&w->stop, 0, __ATOMIC_RELAXED);
		w->running = false;
		w->due = zmi_os_now_ns() + (uint64_t)w->period_ms * 1000000u;
		list_add_tail(w);
		w->registered = true;
		wk.nitems++;
		rc = start_locked();
		if (rc) {
			list_del(w);
			w->registered = false;
			wk.nitems--;
		}
	}
	pthread_cond_signal(&wk.wake);
	pthread_mutex_unlock(&wk.lock);
	return rc;
}

void zmi_worker_del(struct zmi_work *w)
{
	pthread_once(&wk.once, once_init);
	pthread_mutex_lock(&wk.lock);
	if (w->registered) {
		__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
		while (w->running)
			pthread_cond_wait(&wk.done, &wk.lock);
		list_del(w);
		w->registered = false;
		wk.nitems--;
		/* the thread ends itself when this was the last item */
		pthread_cond_signal(&wk.wake);
	}
	pthread_mutex_unlock(&wk.lock);
}

void zmi_worker_kick(struct zmi_work *w)
{
	/* already asked, and a thread will see it (after a fork the flag
	 * may be set with no thread in the child: then start one) */
	if (__atomic_exchange_n(&w->kicked, 1, __ATOMIC_ACQ_REL) &&
	    zmi_likely(__atomic_load_n(&wk.alive, __ATOMIC_RELAXED)))
		return;
	pthread_once(&wk.once, once_init);
	pthread_mutex_lock(&wk.lock);
	/* after a fork the child has no thread: the first kick starts one */
	if (w->registered)
		start_locked();
	pthread_cond_signal(&wk.wake);
	pthread_mutex_unlock(&wk.lock);
}

void zmi_worker_ensure(void)
{
	if (zmi_likely(__atomic_load_n(&wk.alive, __ATOMIC_RELAXED)))
		return;
	pthread_once(&wk.once, once_init);
	pthread_mutex_lock(&wk.lock);
	start_locked();
	pthread_mutex_unlock(&wk.lock);
}

bool zmi_worker_stopping(const struct zmi_work *w)
{
	return __atomic_load_n(&w->stop, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&wk.forking, __ATOMIC_RELAXED);
}

unsigned zmi_worker_threads(void)
{
	unsigned n;

	pthread_mutex_lock(&wk.lock);
	n = wk.alive;
	pthread_mutex_unlock(&wk.lock);
	return n;
}
