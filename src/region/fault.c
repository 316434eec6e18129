/*
 * Bringing pages in: the fault path, shared by the SIGBUS handler (the
 * faulting thread serves its own fault), the region thread (faults of
 * ZM_REGION_WAIT regions, read from the userfaultfd) and pinning.
 *
 * A fault takes the page's lock and looks at its state:
 *   EMPTY    first touch: a read maps the zero page (costs nothing); a
 *            write maps a zeroed private page, DIRTY
 *   STORED   decode from the store into this thread's buffer and map it:
 *            a read maps it write-protected and keeps the store's copy
 *            (CLEAN); a write maps it writable and drops the copy (DIRTY)
 *   CLEAN    a write to a write-protected page: lift the protection, drop
 *            the store's copy (DIRTY)
 *   ZERO, DIRTY  another thread served it first: nothing to do
 * Why a racing write is never lost: docs/region.md, "Eviction and writes".
 *
 * Admission: a page coming in first reserves its place in r->resident.
 * Past limit + slack the fault waits (off the page's lock) until the
 * region thread has made room, unless eviction is stuck (the store is
 * full), or pins have held the whole limit for PINS_FULL_MS: then the
 * limit gives way rather than hang the program.
 *
 * Everything on the handler's path is async-signal-safe but the store's
 * get (locks of its own slot and pool, which the interrupted code cannot
 * hold: region.h forbids giving unpinned region memory to the library)
 * and a thread's first decode, which may allocate its codec workspace.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/debug.h"
#include "region/region_internal.h"

/* ---- the thread's page buffer ---- */

static __thread char *tls_page __attribute__((tls_model("initial-exec")));
static __thread size_t tls_page_cap __attribute__((tls_model("initial-exec")));
static pthread_key_t page_key;

static void page_free(void *p)
{
	/* the buffer's mapping starts 64 bytes before it, with its size */
	size_t *hdr = (size_t *)p - 8;
	munmap(hdr, hdr[0]);
}

/* The key's destructor, at the thread's exit.  Another destructor that
 * runs after it may touch region memory and fault: the thread then
 * makes a new buffer (set again, so freed by a later round of
 * destructors) instead of decoding into the one unmapped here. */
static void page_dtor(void *p)
{
	if (p == tls_page) {
		tls_page = NULL;
		tls_page_cap = 0;
	}
	page_free(p);
}

/* The calling thread's buffer of at least size bytes (mmap: no malloc on
 * the handler's path), or NULL. */
static char *thread_page(size_t size)
{
	size_t total;
	size_t *hdr;

	if (tls_page_cap >= size)
		return tls_page;
	total = size + 64;
	hdr = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hdr == MAP_FAILED)
		return NULL;
	hdr[0] = total;
	if (tls_page)
		page_free(tls_page);
	tls_page = (char *)(hdr + 8);
	tls_page_cap = size;
	pthread_setspecific(page_key, tls_page); /* page_dtor unmaps it */
	return tls_page;
}

/* ---- admission ---- */

static void futex_wait_ms(uint32_t *w, uint32_t val, unsigned ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000 };
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void note_max(struct zmi_region *r, uint64_t n)
{
	uint64_t m = __atomic_load_n(&r->resident_max, __ATOMIC_RELAXED);

	while (n > m && !__atomic_compare_exchange_n(&r->resident_max, &m, n, true,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* How long a fault waits for room while pins hold the whole limit
 * before it goes on over the limit: pins of system calls end in
 * microseconds; a program that pins its whole limit for longer must not
 * hang its other threads. */
#define PINS_FULL_MS 100

/* Reserve a resident page.  Returns true if it waited. */
static bool admit(struct zmi_region *r)
{
	bool waited = false;
	uint64_t n, lim;
	uint32_t full;

	for (;;) {
		n = __atomic_add_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
		lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED);
		if (!lim)
			break;
		if (n > __atomic_load_n(&r->high, __ATOMIC_RELAXED))
			zmi_region_kick(r);
		if (n <= lim + __atomic_load_n(&r->slack, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&r->stuck, __ATOMIC_RELAXED) ||
		    ((full = __atomic_load_n(&r->pins_full_ms, __ATOMIC_RELAXED)) &&
		     zmi_region_ms(r) - full >= PINS_FULL_MS))
			break;
		/* full: give the place back and wait for room */
		__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
		waited = true;
		if (zmi_region_on_thread()) {
			/* the region thread serving a ZM_REGION_WAIT fault
			 * makes the room itself; a round that found nothing
			 * to evict (pages busy in another thread's reclaim)
			 * is tried again after a yield: eviction sets stuck
			 * and pins_full_ms itself when nothing ever will go */
			if (!zmi_region_evict(r, 16))
				sched_yield();
			continue;
		}
		uint32_t seq = __atomic_load_n(&r->room_seq, __ATOMIC_ACQUIRE);
		__atomic_add_fetch(&r->room_waiters, 1, __ATOMIC_ACQ_REL);
		if (__atomic_load_n(&r->resident, __ATOMIC_ACQUIRE) >= lim +
		    __atomic_load_n(&r->slack, __ATOMIC_RELAXED)) {
			zmi_region_kick(r);
			futex_wait_ms(&r->room_seq, seq, 10);
		}
		__atomic_sub_fetch(&r->room_waiters, 1, __ATOMIC_ACQ_REL);
	}
	note_max(r, n);
	return waited;
}

static void unadmit(struct zmi_region *r)
{
	__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
}

/* ---- serving a fault ---- */

static void note_latency(struct zmi_region *r, uint64_t t0)
{
	uint64_t ns = zmi_region_now_ns() - t0;
	unsigned b = ns ? 63 - (unsigned)__builtin_clzll(ns) : 0;

	if (b >= ZM_REGION_HIST_BUCKETS)
		b = ZM_REGION_HIST_BUCKETS - 1;
	__atomic_fetch_add(&r->hist[b], 1, __ATOMIC_RELAXED);
	zmi_region_count(r, RC_FAULT_NS, ns);
}

static const char zero_page[65536] __attribute__((aligned(4096)));

static bool is_zeros(const void *p, size_t len)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i])
			return false;
	return true;
}

/* Bring page pg in, its lock held and its place admitted; w: its word.
 * Sets *w to the new state.  0 or -errno. */
static int fill(struct zmi_region *r, uint64_t pg, uint32_t *w, bool write, bool wake)
{
	void *addr = zmi_region_page_addr(r, pg);
	size_t ps = r->page_size;
	uint64_t hw = __atomic_load_n(&r->hw_pages, __ATOMIC_RELAXED);
	uint32_t now_ms;
	bool young;
	char *buf;
	int rc;

	while (pg >= hw && !__atomic_compare_exchange_n(&r->hw_pages, &hw, pg + 1, true,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (rp_kind(*w) == RP_EMPTY) {
		if (write) {
			const void *src = zero_page;
			if (ps > sizeof(zero_page)) {
				if (!(buf = thread_page(ps)))
					return -ENOMEM;
				memset(buf, 0, ps);
				src = buf;
			}
			rc = zmi_region_uffd_copy(r->uffd, addr, src, ps, false, wake);
			*w = (*w & ~RP_KIND_MASK) | RP_DIRTY;
		} else {
			rc = zmi_region_uffd_zeropage(r->uffd, addr, ps, wake);
			*w = (*w & ~RP_KIND_MASK) | RP_ZERO;
		}
		if (rc)
			return rc;
		zmi_region_count(r, RC_FIRST, 1);
		zmi_region_policy_admit(r, pg, false);
		return 0;
	}
	/* STORED: a page that was written after its last read refault is
	 * taken as written now (RPF_WRITER) */
	write |= r->pages[pg].flags & RPF_WRITER;
	if (!(buf = thread_page(ps)))
		return -ENOMEM;
	rc = zm_store_get(r->store, pg, buf);
	if (rc)
		return rc;
	if (!write && is_zeros(buf, ps)) {
		/* zeros read back cost nothing, as they did before the
		 * eviction: the shared zero page, as a first read maps it */
		rc = zmi_region_uffd_zeropage(r->uffd, addr, ps, wake);
		if (rc)
			return rc;
		zm_store_discard(r->store, pg, 1);
		*w = (*w & ~RP_KIND_MASK) | RP_ZERO;
	} else if ((rc = zmi_region_uffd_copy(r->uffd, addr, buf, ps, !write, wake))) {
		return rc;
	} else if (write) {
		zm_store_discard(r->store, pg, 1);
		*w = (*w & ~RP_KIND_MASK) | RP_DIRTY;
	} else {
		*w = (*w & ~RP_KIND_MASK) | RP_CLEAN;
	}
	now_ms = zmi_region_ms(r);
	young = (uint16_t)(now_ms / 16 - r->pages[pg].evict_t) < (r->cold_age_ms + 15) / 16;
	zmi_region_count(r, RC_REFAULT, 1);
	if (young)
		zmi_region_count(r, RC_YOUNG, 1);
	zmi_region_policy_admit(r, pg, true);
	return 0;
}

/* Make a CLEAN page writable: lift the protection, drop the copy. */
static int make_dirty(struct zmi_region *r, uint64_t pg, uint32_t *w, bool wake)
{
	int rc = zmi_region_uffd_protect(r->uffd, zmi_region_page_addr(r, pg), r->page_size,
					 false, wake);

	if (rc)
		return rc;
	zm_store_discard(r->store, pg, 1);
	*w = (*w & ~RP_KIND_MASK) | RP_DIRTY;
	r->pages[pg].flags |= RPF_WRITER;
	return 0;
}

/* Fault-around (ZM_REGION_AROUND): a first touch of page pg that follows a resident page
 * (memory being filled in order: a heap, an arena, an array growing) also
 * maps the next EMPTY pages, up to AROUND in all, as zeros in one
 * UFFDIO_ZEROPAGE; another first touch, while the region is below its low
 * watermark (or has no limit), the rest of its aligned block of AROUND.  They cost no memory until written, and a write then
 * takes the kernel's own fault (a fresh page), not a trip through the
 * library: filling memory in order costs one fault of ours in AROUND.
 * They count as resident (ZERO, as a first read maps them), and only as
 * many as fit under the high watermark are taken, without waiting. */
#define AROUND 16

static void fault_around(struct zmi_region *r, uint64_t pg)
{
	uint64_t first = pg + 1, end = pg + AROUND, n = 0, lim, res, high;
	uint32_t w[AROUND];

	lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED);
	if (!pg || !rp_resident(__atomic_load_n(&r->pages[pg - 1].word, __ATOMIC_RELAXED))) {
		/* not in order: the rest of the page's aligned block of AROUND,
		 * while memory is plentiful (no limit, or below the low mark):
		 * an allocator fills its blocks in pieces, not page after
		 * page from its start */
		if (lim && __atomic_load_n(&r->resident, __ATOMIC_RELAXED) >=
			   __atomic_load_n(&r->low, __ATOMIC_RELAXED))
			return;
		end = (pg | (AROUND - 1)) + 1;
	}
	if (end > r->nr_pages)
		end = r->nr_pages;
	/* trylocks only: pg's lock is dropped, and these are taken in
	 * order (region_internal.h) */
	for (uint64_t q = first; q < end; q++) {
		if (!zmi_region_page_trylock(r, q, &w[n]))
			break;
		if (rp_kind(w[n]) != RP_EMPTY || (w[n] & RP_NOREAD)) {
			zmi_region_page_unlock(r, q, w[n]);
			break;
		}
		n++;
	}
	if (!n)
		return;
	res = __atomic_add_fetch(&r->resident, n, __ATOMIC_ACQ_REL);
	high = __atomic_load_n(&r->high, __ATOMIC_RELAXED);
	if (lim && res > high) {
		uint64_t over = res - high < n ? res - high : n;
		__atomic_sub_fetch(&r->resident, over, __ATOMIC_ACQ_REL);
		while (over--) {
			n--;
			zmi_region_page_unlock(r, first + n, w[n]);
		}
	}
	if (n && zmi_region_uffd_zeropage(r->uffd, zmi_region_page_addr(r, first),
					  n << r->page_shift, false)) {
		/* cannot happen on pages that are EMPTY and locked: left so */
		__atomic_sub_fetch(&r->resident, n, __ATOMIC_ACQ_REL);
		for (uint64_t i = 0; i < n; i++)
			zmi_region_page_unlock(r, first + i, w[i]);
		return;
	}
	if (n)
		note_max(r, res);
	for (uint64_t i = 0; i < n; i++) {
		zmi_region_policy_admit(r, first + i, false);
		zmi_region_page_unlock(r, first + i, (w[i] & ~RP_KIND_MASK) | RP_ZERO);
	}
	if (n) {
		uint64_t hw = __atomic_load_n(&r->hw_pages, __ATOMIC_RELAXED);
		while (first + n > hw &&
		       !__atomic_compare_exchange_n(&r->hw_pages, &hw, first + n, true,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		zmi_region_count(r, RC_AROUND, n);
	}
}

/* Read-ahead (ZM_REGION_AROUND): a refault right where a sequential
 * reader's next fault would be (r->seq_next: the page after the last
 * refault, or after its read-ahead) also brings back the next STORED
 * pages, up to AHEAD, as a read would (clean, their copies kept; a page
 * marked RPF_WRITER writable).  A heap scanned in order (a garbage
 * collector's sweep, an array walked) then takes one fault in AHEAD+1;
 * pages brought back and not used leave again for the price of an
 * unmap.  Not counted as refaults (the policy learns from those): as
 * pages_around.  Only as many as fit under the high watermark. */
#define AHEAD 8

static void read_ahead(struct zmi_region *r, uint64_t pg)
{
	uint64_t expect = __atomic_load_n(&r->seq_next, __ATOMIC_RELAXED), q, n = 0;
	char *buf;

	if (pg != expect && pg != expect + 1) {
		__atomic_store_n(&r->seq_next, pg + 1, __ATOMIC_RELAXED);
		return;
	}
	buf = thread_page(r->page_size);
	for (q = pg + 1; buf && q < r->nr_pages && q <= pg + AHEAD; q++) {
		uint32_t w;
		bool write;
		void *addr = zmi_region_page_addr(r, q);
		uint64_t res;
		if (!zmi_region_page_trylock(r, q, &w))
			break;
		if (rp_kind(w) != RP_STORED || (w & RP_NOREAD)) {
			zmi_region_page_unlock(r, q, w);
			break;
		}
		res = __atomic_add_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
		if (__atomic_load_n(&r->limit, __ATOMIC_RELAXED) &&
		    res > __atomic_load_n(&r->high, __ATOMIC_RELAXED)) {
			__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
			zmi_region_page_unlock(r, q, w);
			break;
		}
		write = r->pages[q].flags & RPF_WRITER;
		if (zm_store_get(r->store, q, buf) ||
		    zmi_region_uffd_copy(r->uffd, addr, buf, r->page_size, !write, false)) {
			__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
			zmi_region_page_unlock(r, q, w);
			break;
		}
		if (write)
			zm_store_discard(r->store, q, 1);
		note_max(r, res);
		zmi_region_policy_admit(r, q, false);
		zmi_region_page_unlock(r, q, (w & ~RP_KIND_MASK) | (write ? RP_DIRTY : RP_CLEAN));
		n++;
	}
	__atomic_store_n(&r->seq_next, q, __ATOMIC_RELAXED);
	if (n)
		zmi_region_count(r, RC_AROUND, n);
}

static int serve(struct zmi_region *r, uint64_t pg, bool write, bool from_thread,
		 unsigned pins)
{
	bool first_touch = false, refault = false;
	uint64_t t0 = zmi_region_now_ns();
	bool admitted = false, waited = false, counted = false;
	uint32_t w;
	int rc = 0;

	if (!rp_resident(__atomic_load_n(&r->pages[pg].word, __ATOMIC_RELAXED))) {
		waited = admit(r);
		admitted = true;
	}
	for (;;) {
		w = zmi_region_page_lock(r, pg, &waited);
		if (rp_resident(w) || admitted)
			break;
		/* it left between the look and the lock: admit it first */
		zmi_region_page_unlock(r, pg, w);
		waited |= admit(r);
		admitted = true;
	}
	/* a ZM_REGION_WAIT fault's thread is woken once the page's state and
	 * lists are right and its lock is dropped, not by the ioctl that maps
	 * it: woken early, it could ask for an eviction of a page not yet
	 * listed */
	switch (rp_kind(w)) {
	case RP_EMPTY:
		first_touch = true;
		/* fall through */
	case RP_STORED:
		refault = !first_touch;
		rc = fill(r, pg, &w, write, false);
		if (rc)
			break; /* its place is given back below, once */
		admitted = false;
		counted = true;
		break;
	case RP_CLEAN:
		if (write) {
			rc = make_dirty(r, pg, &w, false);
			if (!rc)
				zmi_region_count(r, RC_WP, 1);
			counted = true;
		}
		break;
	default: /* served by another thread meanwhile */
		break;
	}
	if (admitted)
		unadmit(r);
	if (!rc && pins) {
		if (rp_pins(w) > RP_PIN_MAX - pins)
			rc = -EOVERFLOW; /* brought in, but not pinned */
		else
			w += pins << RP_PIN_SHIFT;
	}
	zmi_region_page_unlock(r, pg, w);
	if (from_thread)
		zmi_region_uffd_wake(r->uffd, zmi_region_page_addr(r, pg), r->page_size);
	if (first_touch && !rc && (r->flags & ZM_REGION_AROUND))
		fault_around(r, pg);
	if (refault && !rc && (r->flags & ZM_REGION_AROUND))
		read_ahead(r, pg);
	if (waited)
		zmi_region_count(r, RC_WAITS, 1);
	/* a page a pin brought in is a fault as well: counted by kind in
	 * fill() and make_dirty's caller, so in the histogram too */
	if (counted)
		note_latency(r, t0);
	return rc;
}

int zmi_region_fault(struct zmi_region *r, uint64_t pg, bool write, bool from_thread)
{
	return serve(r, pg, write, from_thread, 0);
}

int zmi_region_make_present(struct zmi_region *r, uint64_t pg, bool write, unsigned pins)
{
	return serve(r, pg, write, false, pins);
}

/* ---- the SIGBUS handler ---- */

static struct sigaction old_bus;

/* Was the access a write?  Where the context does not say, a read: the
 * page is then mapped write-protected and a write takes a second fault. */
static bool fault_is_write(void *uctx)
{
#if defined(__x86_64__)
	const ucontext_t *uc = uctx;
	return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#elif defined(__aarch64__)
	const ucontext_t *uc = uctx;
	const unsigned char *p = (const unsigned char *)uc->uc_mcontext.__reserved;
	const unsigned char *end = p + sizeof(uc->uc_mcontext.__reserved);

	while (p + 8 <= end) {
		uint32_t magic, size;
		memcpy(&magic, p, 4);
		memcpy(&size, p + 4, 4);
		if (!magic || size < 8)
			break;
		if (magic == 0x45535201 && size >= 16) { /* ESR_MAGIC */
			uint64_t esr;
			memcpy(&esr, p + 8, 8);
			return (esr >> 6) & 1; /* WnR */
		}
		p += size;
	}
	return false;
#else
	(void)uctx;
	return false;
#endif
}

static void chain(int sig, siginfo_t *si, void *uctx)
{
	if (old_bus.sa_flags & SA_SIGINFO) {
		if (old_bus.sa_sigaction) {
			old_bus.sa_sigaction(sig, si, uctx);
			return;
		}
	} else if (old_bus.sa_handler != SIG_DFL && old_bus.sa_handler != SIG_IGN) {
		old_bus.sa_handler(sig);
		return;
	}
	/* the default: let the access repeat and kill the process */
	signal(SIGBUS, SIG_DFL);
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	struct zmi_region *r = si->si_code == BUS_ADRERR ? zmi_region_find(si->si_addr) : NULL;

	if (!r) {
		chain(sig, si, uctx);
	} else {
		uint64_t pg = (uint64_t)((char *)si->si_addr - r->base) >> r->page_shift;
		int rc = zmi_region_fault(r, pg, fault_is_write(uctx), false);
		if (rc) {
			zmi_log_error("zm_region: page %llu of the region at %p could not be "
				      "brought back (errno %d): the program cannot go on",
				      (unsigned long long)pg, (void *)r->base, -rc);
			signal(SIGBUS, SIG_DFL);
		}
	}
	errno = saved;
}

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;

static void key_init(void)
{
	pthread_key_create(&page_key, page_dtor);
}

/* Install the handler, unless it is there: at every create, so that a
 * handler set over ours since (a test harness's, a program's) is chained
 * to and ours comes first again.  The one we replace is the one we chain
 * to. */
int zmi_region_signals_init(void)
{
	struct sigaction sa, cur;
	int rc = 0;

	pthread_once(&key_once, key_init);
	pthread_mutex_lock(&sig_lock);
	if (sigaction(SIGBUS, NULL, &cur)) {
		rc = -errno;
	} else if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
		/* The program's asynchronous signals wait until the fault is
		 * served: a handler of theirs that touched region memory in
		 * the middle of it would fault on the same thread, decode
		 * into the same buffer (the page being served would be
		 * mapped with the other's bytes) or wait for a page lock the
		 * thread holds.  Synchronous ones stay open: blocked, they
		 * kill the process. */
		sigfillset(&sa.sa_mask);
		sigdelset(&sa.sa_mask, SIGBUS);
		sigdelset(&sa.sa_mask, SIGSEGV);
		sigdelset(&sa.sa_mask, SIGILL);
		sigdelset(&sa.sa_mask, SIGFPE);
		sigdelset(&sa.sa_mask, SIGTRAP);
		sigdelset(&sa.sa_mask, SIGSYS);
		old_bus = cur;
		if (sigaction(SIGBUS, &sa, NULL))
			rc = -errno;
	}
	pthread_mutex_unlock(&sig_lock);
	/* the creating thread's buffer now, off the handler's path */
	if (!rc && !thread_page(4096))
		rc = -ENOMEM;
	return rc;
}
