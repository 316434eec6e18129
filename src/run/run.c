/*
 * The preload library's start, settings, run thread, fork and exit
 * (preload.h has the rules; alloc.c malloc & co; map.c mmap & co).
 *
 * Start: the library's constructor makes the process's one region (WAIT:
 * the kernel's own accesses to it wait for the fault to be served instead
 * of failing with EFAULT, so read(2) into a compressed buffer is right
 * with no wrapper), loads mimalloc, attaches to the board and starts the
 * run thread.  Whatever is allocated before that, or while it happens on
 * another thread, comes from the system's allocator and is freed there.
 * Anything wrong (a bad setting, no userfaultfd, no mimalloc) is told in
 * one line on stderr, and the program runs uncompressed.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/pool.h>

#include "run/preload.h"
#include "run/run.h"

struct run run = { .lock = PTHREAD_MUTEX_INITIALIZER, .slot = -1 };

/* Serialises publishing: the run thread's and the last one at exit. */
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;
static bool exited;

#define RUN_SPACE_DEFAULT (64ull << 30)
#define RUN_MMAP_MIN_DEFAULT (64u << 10)

void run_say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "zmem run: ");

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, buf, (size_t)n) < 0)
		return;
}

bool run_active(void)
{
	return !zmi_in_lib && __atomic_load_n(&run.state, __ATOMIC_ACQUIRE) == RUN_READY &&
	       !__atomic_load_n(&run.untracked, __ATOMIC_RELAXED);
}

void run_lock(void)
{
	pthread_mutex_lock(&run.lock);
}

void run_unlock(void)
{
	pthread_mutex_unlock(&run.lock);
}

int run_discard(uintptr_t addr, size_t len)
{
	int rc;

	zmi_in_lib++;
	rc = zm_region_discard(run.region, addr - run.base, len);
	zmi_in_lib--;
	return rc;
}

int run_protect(uintptr_t addr, size_t len, int prot)
{
	int rc;

	zmi_in_lib++;
	rc = zm_region_protect(run.region, addr - run.base, len, prot);
	zmi_in_lib--;
	return rc;
}

int run_drop(uintptr_t addr, size_t len, int prot)
{
	int rc = run_discard(addr, len);

	return rc ? rc : run_protect(addr, len, prot);
}

/* ---- settings ---------------------------------------------------------- */

/* "4096", "64K", "1G", "1.5GiB": bytes (units of 1024).  0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "BKMGTP";
	char *end;
	double v;
	const char *u;
	int shift;

	if (!(*s >= '0' && *s <= '9'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || v < 0)
		return -EINVAL;
	if (!*end) {
		shift = 0;
	} else {
		u = strchr(units, end[0] & ~0x20);
		if (!u || !end[0])
			return -EINVAL;
		shift = (int)(u - units) * 10;
		end++;
		if (shift && (*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
			end += 2;
		else if (shift && (*end == 'B' || *end == 'b'))
			end++;
		if (*end)
			return -EINVAL;
	}
	v *= (double)(1ull << shift);
	if (v >= 18446744073709551615.0)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

/* A duration, as zmem serve's --idle-after: 500ms, 30s, 10m, 1h, a bare
 * number is seconds; at least 1 ms, under 49 days. */
static int parse_duration(const char *s, unsigned *ms)
{
	static const struct { const char *suffix; double ms; } units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	char *end;
	double v;

	if (!((*s >= '0' && *s <= '9') || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	for (size_t i = 0; !errno && i < sizeof(units) / sizeof(units[0]); i++) {
		double t = v * units[i].ms;

		if (!strcmp(end, units[i].suffix) && t >= 1 && t < 4294967295.0) {
			*ms = (unsigned)t;
			return 0;
		}
	}
	return -EINVAL;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static int bad(const char *name, const char *value, const char *what)
{
	run_say("%s=%s: %s; running uncompressed", name, value, what);
	return -EINVAL;
}

static int read_config(struct run_config *c)
{
	const char *v;
	uint64_t n;

	memset(c, 0, sizeof(*c));
	c->space = RUN_SPACE_DEFAULT;
	c->mmap_min = RUN_MMAP_MIN_DEFAULT;
	if ((v = env("ZMEM_RUN_RESIDENT"))) {
		size_t len = strlen(v);
		char *end;

		if (v[len - 1] == '%') {
			double p = strtod(v, &end);

			if (end != v + len - 1 || !(p > 0 && p <= 100) || !(*v >= '0' && *v <= '9'))
				return bad("ZMEM_RUN_RESIDENT", v, "not a size or a percentage");
			c->pct_x100 = (unsigned)(p * 100 + 0.5);
			if (!c->pct_x100)
				c->pct_x100 = 1;
		} else if (parse_size(v, &c->resident)) {
			return bad("ZMEM_RUN_RESIDENT", v, "not a size or a percentage");
		}
	}
	if ((v = env("ZMEM_RUN_SPACE")) && (parse_size(v, &c->space) || c->space < (1ull << 30)))
		return bad("ZMEM_RUN_SPACE", v, "not a size of 1G or more");
	if ((v = env("ZMEM_RUN_MMAP_MIN"))) {
		if (parse_size(v, &n))
			return bad("ZMEM_RUN_MMAP_MIN", v, "not a size");
		c->mmap_min = n ? n : 1;
	}
	if ((v = env("ZMEM_RUN_IDLE_AFTER")) && parse_duration(v, &c->idle_after_ms))
		return bad("ZMEM_RUN_IDLE_AFTER", v, "not a duration (500ms, 30s, 10m, 1h)");
	if ((v = env("ZMEM_RUN_UNIT_PAGES"))) {
		char *end;
		unsigned long u = strtoul(v, &end, 10);

		if (*end || !u || u > ZM_STORE_UNIT_MAX || (u & (u - 1)))
			return bad("ZMEM_RUN_UNIT_PAGES", v, "not 1, 2, 4, 8 or 16");
		c->unit_pages = (unsigned)u;
	}
	c->codec = env("ZMEM_RUN_CODEC");
	c->allocator = env("ZMEM_RUN_ALLOCATOR");
	c->recompress = env("ZMEM_RUN_RECOMPRESS");
	c->backing = env("ZMEM_RUN_BACKING");
	c->board = env("ZMEM_RUN_BOARD");
	return 0;
}

static bool codec_ok(const char *name)
{
	struct zm_codec *codec;

	if (zm_codec_create(name, 0, &codec))
		return false;
	zm_codec_destroy(codec);
	return true;
}

/* The store refuses a bad codec or allocator with -EINVAL: name which. */
static void name_store_error(const struct run_config *c, int rc)
{
	const char *const *b = zm_pool_backends();
	bool found = !c->allocator;

	if (c->codec && !codec_ok(c->codec)) {
		bad("ZMEM_RUN_CODEC", c->codec, "unknown codec or bad level");
		return;
	}
	if (c->recompress && !codec_ok(c->recompress)) {
		bad("ZMEM_RUN_RECOMPRESS", c->recompress, "unknown codec or bad level");
		return;
	}
	for (int i = 0; b[i] && !found; i++)
		found = !strcmp(b[i], c->allocator);
	if (!found) {
		bad("ZMEM_RUN_ALLOCATOR", c->allocator, "unknown allocator");
		return;
	}
	run_say("no compressed region (%s); running uncompressed", strerror(-rc));
}

/* ---- the run thread ---------------------------------------------------- */

static uint64_t limit_floor(void)
{
	return (uint64_t)ZM_REGION_MIN_RESIDENT * run.page;
}

static void set_limit(uint64_t bytes)
{
	if (bytes && bytes < limit_floor())
		bytes = limit_floor();
	if (bytes != run.limit_set && !zm_region_set_limit(run.region, bytes))
		run.limit_set = bytes;
}

static void apply(uint32_t cmd, uint64_t arg, const struct zm_region_stats *rs)
{
	switch (cmd) {
	case RUN_CMD_RECLAIM:
		zm_region_reclaim(run.region, arg ? arg : rs->resident_bytes);
		break;
	case RUN_CMD_MEM_LIMIT:
		run.cfg.pct_x100 = arg & RUN_ARG_PCT ? (unsigned)(arg & ~RUN_ARG_PCT) : 0;
		run.cfg.resident = arg & RUN_ARG_PCT ? 0 : arg;
		if (!run.cfg.pct_x100)
			set_limit(run.cfg.resident);
		break;
	case RUN_CMD_UNTRACK:
		run.cfg.pct_x100 = 0;
		run.cfg.resident = 0;
		set_limit(0);
		__atomic_store_n(&run.untracked, true, __ATOMIC_RELAXED);
		break;
	default:
		break;
	}
}

/* Read the region's numbers, follow a percentage limit, publish, apply a
 * command.  With zmi_in_lib raised. */
static void tick(uint32_t state)
{
	struct zm_region_stats rs;
	struct run_proc_stats st = { 0 };
	uint32_t cmd;
	uint64_t arg, heap;

	if (zm_region_stats(run.region, &rs))
		return;
	heap = rs.resident_bytes + rs.pages_stored * rs.page_size;
	if (heap > run.heap_max)
		run.heap_max = heap;
	if (run.cfg.pct_x100 && state == RUN_SLOT_LIVE)
		set_limit(run.heap_max * run.cfg.pct_x100 / 10000);
	st.heap_bytes = heap;
	st.heap_max = run.heap_max;
	st.resident_bytes = rs.resident_bytes;
	st.resident_max = rs.resident_max;
	st.resident_limit = rs.resident_limit;
	st.stored_bytes = rs.stored_bytes;
	st.pool_bytes = rs.pool_bytes;
	st.meta_bytes = rs.meta_bytes;
	st.mmap_bytes = __atomic_load_n(&run.mmap_bytes, __ATOMIC_RELAXED);
	st.faults_first = rs.faults_first;
	st.faults_refault = rs.faults_refault;
	st.faults_wp = rs.faults_wp;
	st.fault_ns = rs.fault_ns;
	st.evictions = rs.evictions;
	st.outside_bytes = __atomic_load_n(&run.outside_bytes, __ATOMIC_RELAXED);
	st.rss_bytes = zmi_os_rss_bytes();
#define MAXOF(f, v) (run.max.f = run.max.f > (v) ? run.max.f : (v))
	st.pool_max = MAXOF(pool_max, st.pool_bytes);
	st.stored_max = MAXOF(stored_max, st.stored_bytes);
	st.meta_max = MAXOF(meta_max, st.meta_bytes);
	st.total_max = MAXOF(total_max, st.resident_bytes + st.pool_bytes + st.meta_bytes);
	st.rss_max = MAXOF(rss_max, st.rss_bytes);
#undef MAXOF
	if (run.board && run.slot >= 0) {
		run_board_publish(run.board, (unsigned)run.slot, &st, state);
		if (state == RUN_SLOT_LIVE && run_board_take_cmd(run.board, (unsigned)run.slot,
								  &cmd, &arg))
			apply(cmd, arg, &rs);
	}
}

static void *run_thread(void *arg)
{
	const struct timespec ts = { 0, RUN_PUBLISH_MS * 1000000l };

	zmi_in_lib = 1; /* base/os.h: never given region memory */
	for (;;) {
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&publish_lock);
		if (!exited)
			tick(RUN_SLOT_LIVE);
		pthread_mutex_unlock(&publish_lock);
	}
	return arg;
}

static void start_thread(void)
{
	sigset_t all, old;

	/* the program's signals are the program's threads' to take */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	run.thread_running = !pthread_create(&run.thread, NULL, run_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (run.thread_running)
		pthread_detach(run.thread);
}

static void claim_slot(int32_t ppid)
{
	run.slot = run.board ? run_board_claim(run.board, getpid(), ppid,
					       program_invocation_short_name) : -1;
}

/* ---- fork and exit ----------------------------------------------------- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&publish_lock);
	run_lock();
}

static void fork_parent(void)
{
	run_unlock();
	pthread_mutex_unlock(&publish_lock);
}

/* The child: its own slot, its own run thread; the locks held across
 * the fork by the forking thread are made new. */
static void fork_child(void)
{
	pthread_mutex_init(&run.lock, NULL);
	pthread_mutex_init(&publish_lock, NULL);
	if (__atomic_load_n(&run.state, __ATOMIC_ACQUIRE) != RUN_READY)
		return;
	zmi_in_lib++;
	run.heap_max = 0;
	memset(&run.max, 0, sizeof(run.max));
	claim_slot(getppid());
	start_thread();
	zmi_in_lib--;
}

__attribute__((destructor)) static void run_exit(void)
{
	if (__atomic_load_n(&run.state, __ATOMIC_ACQUIRE) != RUN_READY)
		return;
	zmi_in_lib++;
	pthread_mutex_lock(&publish_lock);
	if (!exited)
		tick(RUN_SLOT_EXITED);
	exited = true;
	pthread_mutex_unlock(&publish_lock);
	zmi_in_lib--;
}

/* ---- start ------------------------------------------------------------- */

static int make_region(void)
{
	static char backing[4096];
	struct zm_store_config sc = { 0 };
	struct zm_region_config rc = { 0 };
	const struct run_config *c = &run.cfg;
	int err;

	sc.codec = c->codec;
	sc.allocator = c->allocator ? c->allocator : RUN_ALLOCATOR;
	sc.recompress_codec = c->recompress;
	sc.idle_after_ms = c->idle_after_ms;
	sc.unit_pages = c->unit_pages;
	if (c->backing) {
		/* one file a process: the launcher's child has the path, every
		 * other process path.PID */
		bool first = run.board && getppid() == run.board->launcher_pid;

		if (first)
			snprintf(backing, sizeof(backing), "%s", c->backing);
		else
			snprintf(backing, sizeof(backing), "%s.%d", c->backing, (int)getpid());
		sc.backing_path = backing;
	}
	rc.size = c->space;
	rc.resident_limit = c->resident;
	if (c->pct_x100)
		rc.resident_limit = limit_floor();
	/* WAIT: the kernel's own accesses to a compressed page (a read(2)
	 * into it, a futex in it) wait for it instead of failing; INHERIT:
	 * a child of fork keeps its heap; AROUND: a heap filled in order
	 * takes one fault of ours in 16 */
	rc.flags = ZM_REGION_WAIT | ZM_REGION_INHERIT | ZM_REGION_AROUND;
	rc.store = &sc;
	rc.store_size = sizeof(sc);
	err = zm_region_create(&rc, &run.region);
	run.inherit = true;
	if (err == -EPERM || err == -ENOSYS) {
		run_say("no userfaultfd here (%s): running uncompressed", strerror(-err));
		return err;
	}
	if (err) {
		name_store_error(c, err);
		return err;
	}
	run.limit_set = rc.resident_limit;
	return 0;
}

static int start(void)
{
	int err;

	run.page = zmi_os_page_size();
	run_alloc_early();
	if (read_config(&run.cfg) || run_alloc_setup())
		return -EINVAL;
	if (run.cfg.board && (err = run_board_attach(run.cfg.board, &run.board)))
		run_say("ZMEM_RUN_BOARD=%s: %s; running unreported", run.cfg.board,
			err == -EPROTO ? "not a board of this version" : strerror(-err));
	if ((err = make_region()))
		return err;
	if (run_space_init(&run.space, (uintptr_t)zm_region_base(run.region),
			   zm_region_size(run.region), run.page)) {
		zm_region_destroy(run.region);
		return -ENOMEM;
	}
	run.next_chunk = RUN_CHUNK_FIRST;
	run.base = (uintptr_t)zm_region_base(run.region);
	run.size = zm_region_size(run.region);
	claim_slot(0);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	start_thread();
	return 0;
}

__attribute__((constructor)) static void run_start(void)
{
	int expect = RUN_UNINIT;
	int err;

	if (!__atomic_compare_exchange_n(&run.state, &expect, RUN_STARTING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	zmi_in_lib++;
	err = start();
	zmi_in_lib--;
	__atomic_store_n(&run.state, err ? RUN_OFF : RUN_READY, __ATOMIC_RELEASE);
}
