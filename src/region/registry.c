/*
 * The process-wide parts of the region layer: the registry of regions by
 * address (read by the SIGBUS handler) and the region thread.
 *
 * The registry is a sorted array of regions, replaced whole on every
 * create and destroy (copy, insert or remove, publish) under reg_lock.
 * The handler reads the published array with no lock: it counts itself
 * in `readers` around its binary search, and an old array is freed only
 * once no reader is counted, so a search never reads freed memory.  (A
 * region itself outlives every fault on it: destroying a region another
 * thread still touches is the caller's error, region.h.)
 *
 * The region thread: one per process, started with the first region,
 * ended with the last.  It sleeps in poll(2) on an eventfd (kicked by a
 * fault that took a region past its high watermark, or by a limit
 * change) and on the userfaultfds of ZM_REGION_WAIT regions, whose faults
 * it serves; every 100 ms it also looks at every region by itself.  It
 * evicts a region from its high watermark down to its low one in chunks
 * of 32 pages, holding reg_lock only for a chunk, so a destroy waits a
 * chunk at most and never for a region it is removing.
 *
 * Lock order: reg_lock, then a region's reclaim lock, then page locks
 * (region_internal.h).
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/os.h"
#include "base/worker.h"
#include "region/region_internal.h"

#define CHUNK 32           /* pages evicted per hold of reg_lock */
#define PERIOD_MS 100      /* the thread's look at every region */
#define MAX_POLL 1024      /* ZM_REGION_WAIT regions the thread polls */

struct snapshot {
	size_t n;
	struct zmi_region *r[];
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct snapshot *snap;      /* published; atomic */
static unsigned readers;           /* atomic: handlers inside a search */
static struct zmi_region *live;    /* reg_lock */
static unsigned nr_live;           /* reg_lock */
static int kick_fd = -1;           /* eventfd, made once */
static unsigned gen;               /* reg_lock: bumped on every change */

struct rthread {
	pthread_t tid;
	int stop;                  /* atomic */
};
static struct rthread *thr;        /* reg_lock: the running thread's */
static __thread bool on_thread __attribute__((tls_model("initial-exec")));

bool zmi_region_on_thread(void)
{
	return on_thread;
}

struct zmi_region *zmi_region_find(const void *addr)
{
	struct zmi_region *found = NULL;
	struct snapshot *s;
	size_t lo, hi;

	__atomic_add_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	s = __atomic_load_n(&snap, __ATOMIC_SEQ_CST);
	if (s) {
		lo = 0;
		hi = s->n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			struct zmi_region *r = s->r[mid];
			if ((const char *)addr < r->base)
				hi = mid;
			else if ((const char *)addr >= r->base + r->size)
				lo = mid + 1;
			else {
				found = r;
				break;
			}
		}
	}
	__atomic_sub_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	return found;
}

struct zmi_region *zmi_region_find_from(const void *from, const void *end)
{
	struct zmi_region *found = NULL;
	struct snapshot *s;
	size_t lo = 0, hi;

	__atomic_add_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	s = __atomic_load_n(&snap, __ATOMIC_SEQ_CST);
	if (s) {
		/* the first region ending after from */
		hi = s->n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (s->r[mid]->base + s->r[mid]->size <= (const char *)from)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < s->n && s->r[lo]->base < (const char *)end)
			found = s->r[lo];
	}
	__atomic_sub_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	return found;
}

void zmi_region_kick(struct zmi_region *r)
{
	uint64_t one = 1;

	if (__atomic_exchange_n(&r->kicked, 1, __ATOMIC_ACQ_REL))
		return;
	if (kick_fd >= 0 && write(kick_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the thread is awake anyway */
	}
}

/* reg_lock held: publish a new array, wait for the old one's readers. */
static int publish(struct zmi_region *add, struct zmi_region *del)
{
	struct snapshot *old = snap, *s;
	size_t n = old ? old->n : 0, j = 0;
	bool added = !add;

	s = malloc(sizeof(*s) + (n + 1) * sizeof(s->r[0]));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct zmi_region *r = old->r[i];
		if (r == del)
			continue;
		if (!added && add->base < r->base) {
			s->r[j++] = add;
			added = true;
		}
		s->r[j++] = r;
	}
	if (!added)
		s->r[j++] = add;
	s->n = j;
	__atomic_store_n(&snap, s, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&readers, __ATOMIC_SEQ_CST))
		sched_yield();
	free(old);
	return 0;
}

/* ---- the thread ---- */

static void serve_uffd(struct zmi_region *r)
{
	struct uffd_msg msg[16];
	ssize_t n;

	while ((n = read(r->uffd, msg, sizeof(msg))) > 0) {
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++) {
			uint64_t a, pg;
			bool write;
			if (msg[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			a = msg[i].arg.pagefault.address;
			if (a < (uintptr_t)r->base || a >= (uintptr_t)r->base + r->size)
				continue;
			pg = (a - (uintptr_t)r->base) >> r->page_shift;
			write = msg[i].arg.pagefault.flags &
				(UFFD_PAGEFAULT_FLAG_WRITE | UFFD_PAGEFAULT_FLAG_WP);
			if (zmi_region_fault(r, pg, write, true))
				zmi_uffd_wake(r->uffd, zmi_page_addr(r, pg), r->page_size);
		}
	}
}

/* reg_lock held.  One chunk of work on r; true if more is left. */
static bool reclaim_chunk(struct zmi_region *r)
{
	uint64_t res = __atomic_load_n(&r->resident, __ATOMIC_ACQUIRE);
	uint64_t lim = __atomic_load_n(&r->limit, __ATOMIC_ACQUIRE);
	uint64_t low = __atomic_load_n(&r->low, __ATOMIC_RELAXED), n, got;

	if (!lim || res <= __atomic_load_n(&r->high, __ATOMIC_RELAXED) ||
	    (__atomic_load_n(&r->stuck, __ATOMIC_RELAXED) && res <= lim))
		return false;
	n = res - low;
	if (n > CHUNK)
		n = CHUNK;
	got = zmi_region_evict(r, n);
	return got == n && res - got > low;
}

static void *thread_main(void *arg)
{
	struct rthread *me = arg;
	struct pollfd pfd[MAX_POLL + 1];
	struct zmi_region *polled[MAX_POLL + 1];
	unsigned seen_gen = ~0u;
	nfds_t nfd = 1;

	on_thread = true;
	zmi_in_lib = 1; /* base/os.h: never given region memory */
	while (!__atomic_load_n(&me->stop, __ATOMIC_ACQUIRE)) {
		uint64_t v;
		bool more;

		pthread_mutex_lock(&reg_lock);
		if (seen_gen != gen) {
			nfd = 1;
			for (struct zmi_region *r = live; r && nfd <= MAX_POLL; r = r->next_live)
				if (r->flags & ZM_REGION_WAIT) {
					polled[nfd] = r;
					pfd[nfd].fd = r->uffd;
					pfd[nfd++].events = POLLIN;
				}
			seen_gen = gen;
		}
		pthread_mutex_unlock(&reg_lock);
		pfd[0].fd = kick_fd;
		pfd[0].events = POLLIN;
		if (poll(pfd, nfd, PERIOD_MS) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN && read(kick_fd, &v, sizeof(v)) < 0) {
			/* raced with another reader: nothing to do */
		}
		do {
			more = false;
			pthread_mutex_lock(&reg_lock);
			if (seen_gen == gen)
				for (nfds_t i = 1; i < nfd; i++)
					if (pfd[i].revents & POLLIN)
						serve_uffd(polled[i]);
			for (struct zmi_region *r = live; r; r = r->next_live) {
				__atomic_store_n(&r->kicked, 0, __ATOMIC_RELEASE);
				more |= reclaim_chunk(r);
				if (seen_gen == gen)
					for (nfds_t i = 1; i < nfd; i++)
						serve_uffd(polled[i]);
			}
			pthread_mutex_unlock(&reg_lock);
		} while (more && !__atomic_load_n(&me->stop, __ATOMIC_ACQUIRE));
	}
	return NULL;
}

/* ---- fork: a child has no region thread ---- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

static void fork_child(void)
{
	/* The parent's regions are not the child's to work on: their
	 * bookkeeping here is a copy, their memory is not mapped here
	 * (MADV_DONTFORK), and their userfaultfds still act on the parent's
	 * memory.  A thread the child starts for regions of its own must not
	 * evict theirs nor read their faults: off the live list (they stay
	 * in the registry, for the -ECHILD of calls on them, until the
	 * child's destroy). */
	thr = NULL;
	live = NULL;
	nr_live = 0;
	gen++;
	/* a lookup in flight in another thread at the fork (a fault's, a
	 * pin's) never ends here: publish() must not wait for it */
	__atomic_store_n(&readers, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&reg_lock);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_rc;

static void init_once(void)
{
	kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (kick_fd < 0) {
		once_rc = -errno;
		return;
	}
	zmi_fork_hook(fork_prepare, fork_parent, fork_child);
}

int zmi_region_register(struct zmi_region *r)
{
	int rc;

	pthread_once(&once, init_once);
	if (once_rc)
		return once_rc;
	pthread_mutex_lock(&reg_lock);
	rc = publish(r, NULL);
	if (rc)
		goto out;
	if (!thr) {
		struct rthread *t = calloc(1, sizeof(*t));
		if (!t || pthread_create(&t->tid, NULL, thread_main, t)) {
			free(t);
			publish(NULL, r);
			rc = -ENOMEM;
			goto out;
		}
		thr = t;
	}
	r->next_live = live;
	live = r;
	nr_live++;
	gen++;
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

void zmi_region_unregister(struct zmi_region *r)
{
	struct rthread *stop = NULL;
	uint64_t one = 1;

	pthread_mutex_lock(&reg_lock);
	for (struct zmi_region **p = &live; *p; p = &(*p)->next_live)
		if (*p == r) {
			*p = r->next_live;
			nr_live--;
			break;
		}
	while (publish(NULL, r))
		sched_yield(); /* no memory for the new array: try again */
	gen++;
	if (!nr_live && thr) {
		stop = thr;
		thr = NULL;
		__atomic_store_n(&stop->stop, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&reg_lock);
	if (stop) {
		if (write(kick_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the thread wakes anyway */
		}
		pthread_join(stop->tid, NULL);
		free(stop);
	}
}
