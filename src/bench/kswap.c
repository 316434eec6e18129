/*
 * The kernel's compressed swap as a benchmark side (kswap.h): a memory
 * cgroup with a limit, and a zram device of our own or a swap file with
 * zswap as the only swap in use at the highest priority.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/kswap.h"
#include "tool/opt.h"

#define SWAP_PRIO 32767              /* above any swap already in use */

int bench_file_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0)
		n = -errno;
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : n < 0 ? (int)n : -EIO;
}

uint64_t bench_file_u64(const char *path)
{
	char buf[64];

	return bench_file_read(path, buf, sizeof(buf)) ? 0 : strtoull(buf, NULL, 10);
}

/* ---- the memory cgroup ------------------------------------------------ */

static int kcg_file(const struct kcgroup *cg, const char *v1, const char *v2, char *path,
		    size_t len)
{
	return snprintf(path, len, "%s/%s", cg->dir, cg->v2 ? v2 : v1) >= (int)len ? -1 : 0;
}

int kcg_set_limit(const struct kcgroup *cg, uint64_t bytes)
{
	char path[320], val[32];

	kcg_file(cg, "memory.limit_in_bytes", "memory.max", path, sizeof(path));
	snprintf(val, sizeof(val), "%llu", (unsigned long long)bytes);
	return bench_file_write(path, val);
}

int kcg_create(struct kcgroup *cg, const char *name, uint64_t limit, char *why, size_t wl)
{
	char buf[256];
	int rc;

	memset(cg, 0, sizeof(*cg));
	if (!access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK)) {
		snprintf(cg->dir, sizeof(cg->dir), "/sys/fs/cgroup/memory/%.64s.%d", name,
			 (int)getpid());
	} else if (!bench_file_read("/sys/fs/cgroup/cgroup.controllers", buf, sizeof(buf)) &&
		   strstr(buf, "memory")) {
		cg->v2 = true;
		bench_file_write("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
		snprintf(cg->dir, sizeof(cg->dir), "/sys/fs/cgroup/%.64s.%d", name, (int)getpid());
	} else {
		snprintf(why, wl, "no memory cgroup controller mounted");
		return -1;
	}
	if (mkdir(cg->dir, 0755) && errno != EEXIST) {
		snprintf(why, wl, "mkdir %.120s: %s", cg->dir, strerror(errno));
		return -1;
	}
	rc = kcg_set_limit(cg, limit);
	if (rc) {
		snprintf(why, wl, "setting the limit of %.120s: %s", cg->dir, strerror(-rc));
		rmdir(cg->dir);
		return -1;
	}
	return 0;
}

void kcg_destroy(struct kcgroup *cg)
{
	for (int i = 0; i < 50 && rmdir(cg->dir) && errno == EBUSY; i++)
		usleep(20000);
}

int kcg_enter(const struct kcgroup *cg, pid_t pid)
{
	char path[320], val[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir);
	snprintf(val, sizeof(val), "%d", (int)pid);
	return bench_file_write(path, val);
}

uint64_t kcg_peak(const struct kcgroup *cg)
{
	char path[320];

	kcg_file(cg, "memory.max_usage_in_bytes", "memory.peak", path, sizeof(path));
	return bench_file_u64(path);
}

uint64_t kcg_usage(const struct kcgroup *cg)
{
	char path[320];

	kcg_file(cg, "memory.usage_in_bytes", "memory.current", path, sizeof(path));
	return bench_file_u64(path);
}

uint64_t kswap_meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	size_t kl = strlen(key);
	uint64_t v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtoull(line + kl + 1, NULL, 10) * 1024;
			break;
		}
	fclose(f);
	return v;
}

/* ---- the swap ------------------------------------------------------- */

/* mkswap PATH, quietly. */
static int mkswap(const char *path)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (!pid) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, 1), dup2(fd, 2);
		execlp("mkswap", "mkswap", path, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -EIO;
}

/* Swap on k's device or file, at the highest priority; 0, or -1 with why. */
static int kswap_on(struct kswap *k, char *why, size_t wl)
{
	int rc = mkswap(k->dev) ? -EIO : 0;

	if (!rc && swapon(k->dev, SWAP_FLAG_PREFER |
			  ((SWAP_PRIO << SWAP_FLAG_PRIO_SHIFT) & SWAP_FLAG_PRIO_MASK)))
		rc = -errno;
	if (rc) {
		snprintf(why, wl, "swapon %s: %s", k->dev, strerror(-rc));
		return -1;
	}
	k->on = true;
	return 0;
}

void kswap_down(struct kswap *k)
{
	char path[128], val[16];

	if (k->on && swapoff(k->dev))
		fprintf(stderr, "zmem %s: warning: swapoff %s: %s\n", cli_cmd, k->dev,
			strerror(errno));
	k->on = false;
	if (k->kind == KSWAP_ZRAM && k->zram_id >= 0) {
		snprintf(path, sizeof(path), "%s/reset", k->sys);
		bench_file_write(path, "1");
		snprintf(val, sizeof(val), "%d", k->zram_id);
		if (bench_file_write("/sys/class/zram-control/hot_remove", val))
			fprintf(stderr, "zmem %s: warning: could not remove %s\n", cli_cmd, k->dev);
		k->zram_id = -1;
	}
	if (k->kind == KSWAP_ZSWAP) {
		if (k->zs_comp[0])
			bench_file_write("/sys/module/zswap/parameters/compressor", k->zs_comp);
		if (k->zs_enabled[0])
			bench_file_write("/sys/module/zswap/parameters/enabled", k->zs_enabled);
		if (k->zs_shrinker[0])
			bench_file_write("/sys/module/zswap/parameters/shrinker_enabled",
					 k->zs_shrinker);
		if (k->dev[0])
			unlink(k->dev);
		k->dev[0] = 0;
	}
}

/* The kernel's name for the codec: "lz4" of "lz4:1". */
static void kernel_codec(const char *codec, char *out, size_t len)
{
	const char *colon = strchr(codec, ':');

	snprintf(out, len, "%.*s", (int)(colon ? (size_t)(colon - codec) : strlen(codec)), codec);
}

static int zram_up(struct kswap *k, const char *codec, size_t bytes, char *why, size_t wl)
{
	char buf[256], path[128], algo[32];

	if (bench_file_read("/sys/class/zram-control/hot_add", buf, sizeof(buf))) {
		snprintf(why, wl, "no /sys/class/zram-control (zram not loaded; try modprobe zram)");
		return -1;
	}
	k->zram_id = atoi(buf);
	snprintf(k->sys, sizeof(k->sys), "/sys/block/zram%d", k->zram_id);
	snprintf(k->dev, sizeof(k->dev), "/dev/zram%d", k->zram_id);
	kernel_codec(codec, algo, sizeof(algo));
	snprintf(path, sizeof(path), "%s/comp_algorithm", k->sys);
	if (bench_file_write(path, algo))
		cli_notice("kernel zram: no %s, its default codec", algo);
	snprintf(path, sizeof(path), "%s/disksize", k->sys);
	snprintf(buf, sizeof(buf), "%zu", bytes);
	if (bench_file_write(path, buf)) {
		snprintf(why, wl, "setting %s failed", path);
		return -1;
	}
	for (int i = 0; i < 100 && access(k->dev, F_OK); i++)
		usleep(10000);  /* udev makes the node */
	return kswap_on(k, why, wl);
}

static int zswap_up(struct kswap *k, const char *codec, const char *dir, size_t bytes,
		    char *why, size_t wl)
{
	char algo[32];
	int fd, rc;

	if (bench_file_read("/sys/module/zswap/parameters/enabled", k->zs_enabled,
			    sizeof(k->zs_enabled))) {
		snprintf(why, wl, "this kernel has no zswap");
		return -1;
	}
	k->zs_enabled[strcspn(k->zs_enabled, "\n")] = 0;
	bench_file_read("/sys/module/zswap/parameters/compressor", k->zs_comp, sizeof(k->zs_comp));
	k->zs_comp[strcspn(k->zs_comp, "\n")] = 0;
	/* the pool is charged to the cgroup: past its share, its coldest
	 * pages go on to the swap file instead of the cgroup running out */
	if (!bench_file_read("/sys/module/zswap/parameters/shrinker_enabled", k->zs_shrinker,
			     sizeof(k->zs_shrinker))) {
		k->zs_shrinker[strcspn(k->zs_shrinker, "\n")] = 0;
		bench_file_write("/sys/module/zswap/parameters/shrinker_enabled", "Y");
	}
	snprintf(k->dev, sizeof(k->dev), "%.200s/zmem-%s-swap.XXXXXX", dir, cli_cmd);
	fd = mkstemp(k->dev);
	if (fd < 0) {
		snprintf(why, wl, "creating a swap file in %.120s: %s", dir, strerror(errno));
		k->dev[0] = 0;
		return -1;
	}
	rc = posix_fallocate(fd, 0, (off_t)bytes);
	close(fd);
	if (rc) {
		snprintf(why, wl, "allocating %zu bytes of swap file: %s", bytes, strerror(rc));
		return -1;
	}
	kernel_codec(codec, algo, sizeof(algo));
	if (bench_file_write("/sys/module/zswap/parameters/compressor", algo))
		cli_notice("kernel zswap: no %s, compressor %s", algo, k->zs_comp);
	if (bench_file_write("/sys/module/zswap/parameters/enabled", "Y")) {
		snprintf(why, wl, "cannot enable zswap");
		return -1;
	}
	return kswap_on(k, why, wl);
}

int kswap_up(struct kswap *k, enum kswap_kind kind, const char *codec, const char *dir,
	     size_t bytes, char *why, size_t wl)
{
	memset(k, 0, sizeof(*k));
	k->kind = kind;
	k->zram_id = -1;
	if (geteuid() != 0) {
		snprintf(why, wl, "needs root (a memory cgroup and swapon)");
		return -1;
	}
	return kind == KSWAP_ZRAM ? zram_up(k, codec, bytes, why, wl) :
				    zswap_up(k, codec, dir, bytes, why, wl);
}

int kswap_zram_mm(const struct kswap *k, uint64_t *v, int n)
{
	char buf[256], path[128], *p = buf, *end;

	snprintf(path, sizeof(path), "%s/mm_stat", k->sys);
	if (k->zram_id < 0 || bench_file_read(path, buf, sizeof(buf)))
		return -1;
	for (int i = 0; i < n; i++, p = end) {
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return -1;
	}
	return 0;
}

/* ---- signals while a side is up -------------------------------------- */

static const int stop_signals[KSWAP_NSTOP] = { SIGINT, SIGTERM, SIGHUP };
static volatile sig_atomic_t stop_signal;

static void note_signal(int sig)
{
	stop_signal = sig;
}

void kswap_signals_hold(struct sigaction old[KSWAP_NSTOP])
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = note_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < KSWAP_NSTOP; i++)
		sigaction(stop_signals[i], &sa, &old[i]);
}

void kswap_signals_release(const struct sigaction old[KSWAP_NSTOP])
{
	for (int i = 0; i < KSWAP_NSTOP; i++)
		sigaction(stop_signals[i], &old[i], NULL);
	if (stop_signal)
		raise(stop_signal);
}

void kswap_signals_child(void)
{
	for (int i = 0; i < KSWAP_NSTOP; i++)
		signal(stop_signals[i], SIG_DFL);
}
