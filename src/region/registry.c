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
 * change); every 100 ms it also looks at every region by itself.  It
 * evicts a region from its high watermark down to its low one in chunks
 * of 32 pages, holding reg_lock only for a chunk, so a destroy waits a
 * chunk at most and never for a region it is removing.
 *
 * The fault threads serve the faults of ZM_REGION_WAIT regions: one per
 * CPU the process may run on (at most MAX_FAULT_THREADS), each bound to
 * its CPU, all polling every WAIT region's userfaultfd.  A fault wakes
 * them all; the one on the faulting thread's CPU runs at once (the
 * faulting thread sleeps), reads the fault and serves it, and the others
 * find nothing to read.  So a fault costs two context switches on one
 * CPU, not a wake-up of another, idle one: on a virtual machine an idle
 * CPU takes tens of microseconds to wake (docs/region.md).  They serve
 * under serve_lock's read side, so that a destroy, which takes its write
 * side once the region is off the list, never frees a region one of them
 * is serving; they never evict but to make room for the fault in hand,
 * and never take reg_lock while they serve, so a fault never waits for
 * an eviction chunk of another region.
 *
 * Lock order: reg_lock, then serve_lock, then a region's reclaim lock,
 * then page locks (region_internal.h).
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/os.h"
#include "base/worker.h"
#include "region/region_internal.h"

#define CHUNK 32           /* pages evicted per hold of reg_lock */
#define PERIOD_MS 100      /* the thread's look at every region */
#define MAX_POLL 1024      /* ZM_REGION_WAIT regions a fault thread polls */
#define MAX_FAULT_THREADS 16 /* one per CPU, up to this many */

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

/* The fault threads (above). */
struct fthread {
	pthread_t tid;
	int cpu;                   /* bound to it, or -1 */
	int wake_fd;               /* eventfd: the WAIT list changed, or stop */
	int stop;                  /* atomic */
};
static pthread_rwlock_t serve_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct fthread *fthr[MAX_FAULT_THREADS]; /* reg_lock */
static unsigned nr_fthr;           /* reg_lock */
static unsigned nr_wait;           /* reg_lock: live ZM_REGION_WAIT regions */
static unsigned wait_gen;          /* atomic: bumped when the WAIT list changes */
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
			if (zmi_region_fault(r, pg, write, true)) {
				/* the page cannot come back (-EIO: its copy was
				 * on a file this process cannot read, or lost):
				 * as in the default mode, the process is stopped
				 * with SIGBUS rather than left retrying the
				 * access for ever */
				zmi_log_error("zm_region: page %llu of the region at %p could "
					      "not be brought back: the program cannot go on",
					      (unsigned long long)pg, (void *)r->base);
				kill(getpid(), SIGBUS);
				zmi_region_uffd_wake(r->uffd, zmi_region_page_addr(r, pg),
						     r->page_size);
			}
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
	struct pollfd pfd;

	on_thread = true;
	zmi_in_lib = 1; /* base/os.h: never given region memory */
	while (!__atomic_load_n(&me->stop, __ATOMIC_ACQUIRE)) {
		uint64_t v;
		bool more;

		pfd.fd = kick_fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, PERIOD_MS) < 0 && errno != EINTR)
			break;
		if (pfd.revents & POLLIN && read(kick_fd, &v, sizeof(v)) < 0) {
			/* raced with another reader: nothing to do */
		}
		do {
			more = false;
			pthread_mutex_lock(&reg_lock);
			for (struct zmi_region *r = live; r; r = r->next_live) {
				__atomic_store_n(&r->kicked, 0, __ATOMIC_RELEASE);
				more |= reclaim_chunk(r);
			}
			pthread_mutex_unlock(&reg_lock);
		} while (more && !__atomic_load_n(&me->stop, __ATOMIC_ACQUIRE));
	}
	return NULL;
}

/* ---- the fault threads ---- */

static void *fault_main(void *arg)
{
	struct fthread *me = arg;
	struct pollfd pfd[MAX_POLL + 1];
	struct zmi_region *polled[MAX_POLL + 1];
	unsigned seen = ~0u;
	nfds_t nfd = 1;

	on_thread = true; /* admission makes room itself (fault.c) */
	zmi_in_lib = 1;
	if (me->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(me->cpu, &set);
		/* refused (a cgroup's cpuset changed): it serves from
		 * wherever it runs, only slower */
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	pfd[0].fd = me->wake_fd;
	pfd[0].events = POLLIN;
	while (!__atomic_load_n(&me->stop, __ATOMIC_ACQUIRE)) {
		unsigned g = __atomic_load_n(&wait_gen, __ATOMIC_ACQUIRE);
		uint64_t v;

		if (g != seen) {
			pthread_mutex_lock(&reg_lock);
			nfd = 1;
			for (struct zmi_region *r = live; r && nfd <= MAX_POLL; r = r->next_live)
				if (r->flags & ZM_REGION_WAIT) {
					polled[nfd] = r;
					pfd[nfd].fd = r->uffd;
					pfd[nfd++].events = POLLIN;
				}
			seen = __atomic_load_n(&wait_gen, __ATOMIC_ACQUIRE);
			pthread_mutex_unlock(&reg_lock);
		}
		if (poll(pfd, nfd, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN && read(me->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing: the counter was read already */
		}
		pthread_rwlock_rdlock(&serve_lock);
		/* a region removed since the poll set was made is not
		 * served: its destroy waits for this read side, and the
		 * list is made again first */
		if (__atomic_load_n(&wait_gen, __ATOMIC_ACQUIRE) == seen)
			for (nfds_t i = 1; i < nfd; i++)
				if (pfd[i].revents & POLLIN)
					serve_uffd(polled[i]);
		pthread_rwlock_unlock(&serve_lock);
	}
	return NULL;
}

static void fault_wake(struct fthread *t)
{
	uint64_t one = 1;

	if (write(t->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: it wakes anyway */
	}
}

/* reg_lock held: start the fault threads, one per CPU the process may
 * use.  0 or -errno. */
static int fault_threads_start(void)
{
	cpu_set_t set;
	int ncpu = 0, cpus[MAX_FAULT_THREADS];

	if (!sched_getaffinity(0, sizeof(set), &set)) {
		for (int c = 0; c < CPU_SETSIZE && ncpu < MAX_FAULT_THREADS; c++)
			if (CPU_ISSET(c, &set))
				cpus[ncpu++] = c;
	}
	if (!ncpu)
		cpus[ncpu++] = -1; /* unknown: one thread, unbound */
	for (int i = 0; i < ncpu; i++) {
		struct fthread *t = calloc(1, sizeof(*t));
		if (!t)
			return nr_fthr ? 0 : -ENOMEM;
		t->cpu = ncpu > 1 ? cpus[i] : -1;
		t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (t->wake_fd < 0 || pthread_create(&t->tid, NULL, fault_main, t)) {
			if (t->wake_fd >= 0)
				close(t->wake_fd);
			free(t);
			return nr_fthr ? 0 : -ENOMEM;
		}
		fthr[nr_fthr++] = t;
	}
	return 0;
}

/* Stop and join the fault threads taken off the list (no lock held). */
static void fault_threads_join(struct fthread **t, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		__atomic_store_n(&t[i]->stop, 1, __ATOMIC_RELEASE);
		fault_wake(t[i]);
		pthread_join(t[i]->tid, NULL);
		close(t[i]->wake_fd);
		free(t[i]);
	}
}

/* ---- fork ---- */

/* The child has one thread, the one that forked.  A region without
 * ZM_REGION_INHERIT is not the child's to work on: its bookkeeping here
 * is a copy, its memory is not mapped here (MADV_DONTFORK) and its
 * userfaultfd still acts on the parent's memory, so it leaves the live
 * list (it stays in the registry, for the -ECHILD of calls on it, until
 * the child's destroy).  An inheriting region is quiet at the fork
 * (prepare: no eviction chunk, no fault being served, no call on it in
 * flight) and the child takes it over (zmi_region_adopt). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
	pthread_rwlock_wrlock(&serve_lock);
	for (struct zmi_region *r = live; r; r = r->next_live)
		if (r->flags & ZM_REGION_INHERIT) {
			pthread_rwlock_wrlock(&r->call_lock);
			pthread_mutex_lock(&r->reclaim_lock);
		}
}

static void fork_parent(void)
{
	for (struct zmi_region *r = live; r; r = r->next_live)
		if (r->flags & ZM_REGION_INHERIT) {
			pthread_mutex_unlock(&r->reclaim_lock);
			pthread_rwlock_unlock(&r->call_lock);
		}
	pthread_rwlock_unlock(&serve_lock);
	pthread_mutex_unlock(&reg_lock);
}

static void fork_child(void)
{
	struct zmi_region *keep = NULL, *next;
	unsigned n = 0;

	zmi_in_lib++;
	thr = NULL;
	/* the parent's fault threads are not here; their descriptors are */
	for (unsigned i = 0; i < nr_fthr; i++) {
		close(fthr[i]->wake_fd);
		free(fthr[i]);
	}
	nr_fthr = 0;
	nr_wait = 0;
	for (struct zmi_region *r = live; r; r = next) {
		next = r->next_live;
		if (!(r->flags & ZM_REGION_INHERIT))
			continue;
		pthread_mutex_unlock(&r->reclaim_lock);
		zmi_region_rwlock_init(&r->call_lock); /* held by prepare: see there */
		/* a region the child cannot take over stays a copy, as a
		 * region that does not inherit (-ECHILD) */
		if (zmi_region_adopt(r))
			continue;
		r->next_live = keep;
		keep = r;
		n++;
		nr_wait += (r->flags & ZM_REGION_WAIT) != 0;
	}
	live = keep;
	nr_live = n;
	gen++;
	__atomic_add_fetch(&wait_gen, 1, __ATOMIC_RELEASE);
	/* a lookup in flight in another thread at the fork (a fault's, a
	 * pin's) never ends here: publish() must not wait for it */
	__atomic_store_n(&readers, 0, __ATOMIC_SEQ_CST);
	zmi_region_rwlock_init(&serve_lock);
	if (n) {
		/* the threads of the regions kept: failing that, the
		 * regions stay usable up to their limit (no eviction) */
		struct rthread *t = calloc(1, sizeof(*t));
		if (t && !pthread_create(&t->tid, NULL, thread_main, t))
			thr = t;
		else
			free(t);
		if (nr_wait)
			fault_threads_start();
	}
	pthread_mutex_unlock(&reg_lock);
	zmi_in_lib--;
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
	zmi_region_rwlock_init(&serve_lock);
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
	if ((r->flags & ZM_REGION_WAIT) && !nr_fthr && (rc = fault_threads_start())) {
		publish(NULL, r);
		goto out;
	}
	r->next_live = live;
	live = r;
	nr_live++;
	gen++;
	if (r->flags & ZM_REGION_WAIT) {
		nr_wait++;
		__atomic_add_fetch(&wait_gen, 1, __ATOMIC_RELEASE);
		for (unsigned i = 0; i < nr_fthr; i++)
			fault_wake(fthr[i]);
	}
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

void zmi_region_unregister(struct zmi_region *r)
{
	struct rthread *stop = NULL;
	struct fthread *fstop[MAX_FAULT_THREADS];
	unsigned nfstop = 0;
	uint64_t one = 1;

	pthread_mutex_lock(&reg_lock);
	for (struct zmi_region **p = &live; *p; p = &(*p)->next_live)
		if (*p == r) {
			*p = r->next_live;
			nr_live--;
			if (r->flags & ZM_REGION_WAIT)
				nr_wait--;
			break;
		}
	while (publish(NULL, r))
		sched_yield(); /* no memory for the new array: try again */
	gen++;
	if (r->flags & ZM_REGION_WAIT) {
		/* off the fault threads' lists: the ones serving it now are
		 * waited for; the others make their lists again first */
		__atomic_add_fetch(&wait_gen, 1, __ATOMIC_RELEASE);
		for (unsigned i = 0; i < nr_fthr; i++)
			fault_wake(fthr[i]);
		pthread_rwlock_wrlock(&serve_lock);
		pthread_rwlock_unlock(&serve_lock);
		if (!nr_wait) {
			for (unsigned i = 0; i < nr_fthr; i++)
				fstop[nfstop++] = fthr[i];
			nr_fthr = 0;
		}
	}
	if (!nr_live && thr) {
		stop = thr;
		thr = NULL;
		__atomic_store_n(&stop->stop, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&reg_lock);
	fault_threads_join(fstop, nfstop);
	if (stop) {
		if (write(kick_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the thread wakes anyway */
		}
		pthread_join(stop->tid, NULL);
		free(stop);
	}
}
