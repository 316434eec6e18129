/*
 * The background worker: one thread per process that runs every pool's
 * automatic compaction (and any other periodic work of the library).
 *
 * A user of it embeds a struct zmi_work, fills fn, arg and period_ms, and
 * registers it with zmi_worker_add().  The worker calls fn(arg) when the
 * item is kicked (zmi_worker_kick: an atomic flag, and a signal only when
 * the flag changes) and, if period_ms is not 0, at least every period_ms
 * milliseconds.  One item's callback never runs twice at once; callbacks
 * of different items run one after another on the one thread.
 *
 * The thread starts on the first registration and ends by itself when no
 * item is registered.  zmi_worker_del() returns once the item's callback
 * is not running and will not run again; a long callback should look at
 * zmi_worker_stopping() between steps and return early when it says so.
 *
 * fork: the prepare handler waits for the running callback to return
 * (holding the worker's lock, so that no other starts), the child finds no
 * worker thread and no callback running, and starts a thread again on its
 * next need (its registered items stay registered).
 *
 * Callers: zmi_worker_add() and zmi_worker_del() with no lock held that a
 * callback takes (del waits for the callback), never from a callback;
 * zmi_worker_kick() from anywhere, under any lock (the worker's lock is a
 * leaf).  See worker.c for the lock order.
 */
#ifndef ZM_BASE_WORKER_H
#define ZM_BASE_WORKER_H

#include <stdbool.h>
#include <stdint.h>

struct zmi_work {
	void (*fn)(void *arg);     /* set before zmi_worker_add */
	void *arg;
	unsigned period_ms;        /* 0: only when kicked */
	/* the worker's */
	int kicked;                /* atomic */
	int stop;                  /* atomic: zmi_worker_del is waiting (the
				      worker calls the item no more) */
	bool registered;           /* worker lock */
	bool running;              /* worker lock: fn is being called */
	uint64_t due;              /* worker lock: next periodic call (ns) */
	struct zmi_work *next, *prev; /* worker lock */
};

/* Register w (no-op if it is already); starts the thread if there is
 * none.  0 or -ENOMEM (no thread could be started: w is not registered). */
int zmi_worker_add(struct zmi_work *w);
/* Unregister w (no-op if it is not), waiting for its running callback. */
void zmi_worker_del(struct zmi_work *w);
/* Ask for a call of w's callback soon.  Cheap when already asked. */
void zmi_worker_kick(struct zmi_work *w);
/* Start the thread if items are registered and none runs (a child after
 * fork has none): one relaxed load when it runs.  Any lock may be held. */
void zmi_worker_ensure(void);
/* For a callback: should it return now (its item is being unregistered,
 * or the process is forking)? */
bool zmi_worker_stopping(const struct zmi_work *w);
/* The library's fork handlers: the worker's own (above), then each
 * layer's registry lock, in a fixed order (worker.c).  Call once per
 * layer (from its pthread_once); at most ZMI_FORK_HOOKS of them. */
#define ZMI_FORK_HOOKS 8
void zmi_fork_hook(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* Threads the worker runs now (0 or 1; for tests and statistics). */
unsigned zmi_worker_threads(void);

#endif
