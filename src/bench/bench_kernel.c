/*
 * zmem bench --kernel: the same pages through the Linux kernel's zram, for
 * a row to compare with.
 *
 * Only a zram device nobody uses is touched: /sys/block/zram0 must exist
 * (the module loaded; bench never loads it), we must be root, the device
 * must be unconfigured (disksize 0), not swap, not mounted, not held by
 * another device, and we must be able to open it exclusively.  Then:
 * comp_algorithm is set to the bench's codec where zram has it, disksize
 * to the data's size; the pages are written with O_DIRECT (so the page
 * cache keeps no copy), mm_stat is read, the pages are written again
 * (overwrites, as the store's "put" pass) and read back and compared, and
 * the device is reset, whatever happened in between.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/benchmarks.h"

#define ZRAM_SYS "/sys/block/zram0"
#define ZRAM_DEV "/dev/zram0"
#define IO_CHUNK (1u << 20) /* bytes per O_DIRECT write/read */

int bench_file_read(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int sys_read(const char *attr, char *buf, size_t cap)
{
	char path[128];

	snprintf(path, sizeof(path), ZRAM_SYS "/%s", attr);
	return bench_file_read(path, buf, cap);
}

static int sys_write(const char *attr, const char *val)
{
	char path[128];
	size_t len = strlen(val);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), ZRAM_SYS "/%s", attr);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		n = -errno;
	close(fd);
	return n == (ssize_t)len ? 0 : n < 0 ? (int)n : -EIO;
}

/* Does file (a /proc table) mention the device? */
static int listed_in(const char *file)
{
	char line[512];
	FILE *f = fopen(file, "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, ZRAM_DEV) || strstr(line, "/zram0 ");
	fclose(f);
	return found;
}

/* Is another block device (dm, md, loop) built on it? */
static int held(void)
{
	DIR *dir = opendir(ZRAM_SYS "/holders");
	struct dirent *e;
	int n = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static int why(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* The checks; 0 if the device may be used. */
static int usable(size_t ps, char *w, size_t wl)
{
	char buf[256];
	int fd;

	if (access(ZRAM_SYS, F_OK))
		return why(w, wl, "no " ZRAM_SYS " (zram not loaded; try modprobe zram)");
	if (geteuid() != 0)
		return why(w, wl, "not root");
	if ((size_t)sysconf(_SC_PAGESIZE) != ps)
		return why(w, wl, "zram stores %ld-byte pages, the bench uses %zu",
			   sysconf(_SC_PAGESIZE), ps);
	if (sys_read("disksize", buf, sizeof(buf)))
		return why(w, wl, "cannot read " ZRAM_SYS "/disksize");
	if (strtoull(buf, NULL, 10) != 0)
		return why(w, wl, ZRAM_DEV " is in use (disksize %llu): left alone",
			   strtoull(buf, NULL, 10));
	if (listed_in("/proc/swaps"))
		return why(w, wl, ZRAM_DEV " is a swap device: left alone");
	if (listed_in("/proc/mounts"))
		return why(w, wl, ZRAM_DEV " is mounted: left alone");
	if (held())
		return why(w, wl, ZRAM_DEV " is held by another device: left alone");
	fd = open(ZRAM_DEV, O_RDONLY | O_EXCL);
	if (fd < 0)
		return why(w, wl, "cannot open " ZRAM_DEV " exclusively: %s", strerror(errno));
	close(fd);
	return 0;
}

/* The kernel's name for our codec, if it has it. */
static void set_algorithm(const char *codec, char *note, size_t nl)
{
	char avail[256], want[32];
	const char *colon = strchr(codec, ':');
	size_t n = colon ? (size_t)(colon - codec) : strlen(codec);

	snprintf(want, sizeof(want), "%.*s", (int)n, codec);
	if (sys_read("comp_algorithm", avail, sizeof(avail)) == 0 && strstr(avail, want) &&
	    sys_write("comp_algorithm", want) == 0) {
		snprintf(note, nl, "%s", want);
		return;
	}
	snprintf(note, nl, "default (%s not available)", want);
}

static double transfer(int fd, uint8_t *buf, size_t len, uint8_t *bounce, bool wr)
{
	uint64_t t0 = cli_now_ns();

	for (size_t off = 0; off < len; off += IO_CHUNK) {
		size_t n = len - off < IO_CHUNK ? len - off : IO_CHUNK;
		ssize_t k;

		if (wr)
			memcpy(bounce, buf + off, n);
		k = wr ? pwrite(fd, bounce, n, (off_t)off) : pread(fd, bounce, n, (off_t)off);
		if (k != (ssize_t)n)
			return -1;
		if (!wr)
			memcpy(buf + off, bounce, n);
	}
	if (wr && fsync(fd))
		return -1;
	return (double)len / ((double)(cli_now_ns() - t0) / 1e9) / 1e6;
}

int bench_kernel(const struct bench_data *d, size_t ps, const char *codec,
		 struct bench_row *row, char *w, size_t wl)
{
	char buf[256], algo[64];
	uint8_t *bounce = NULL, *back = NULL;
	int fd = -1, rc = -1;
	unsigned long long v[9] = { 0 };
	int nv;

	if (usable(ps, w, wl))
		return -1;
	set_algorithm(codec, algo, sizeof(algo));
	snprintf(buf, sizeof(buf), "%zu", d->len);
	if (sys_write("disksize", buf)) {
		why(w, wl, "setting disksize failed");
		goto reset;
	}
	fd = open(ZRAM_DEV, O_RDWR | O_DIRECT | O_EXCL);
	if (fd < 0) {
		why(w, wl, "opening " ZRAM_DEV ": %s", strerror(errno));
		goto reset;
	}
	if (posix_memalign((void **)&bounce, 4096, IO_CHUNK) ||
	    !(back = malloc(d->len))) {
		why(w, wl, "out of memory");
		goto reset;
	}
	memset(row, 0, sizeof(*row));
	snprintf(row->allocator, sizeof(row->allocator), "zram(kernel)");
	snprintf(row->codec, sizeof(row->codec), "%.31s", algo);
	snprintf(row->data, sizeof(row->data), "%s", d->name);
	row->kernel = true;
	row->fill_MBps = transfer(fd, d->buf, d->len, bounce, true);
	if (row->fill_MBps < 0) {
		why(w, wl, "writing " ZRAM_DEV ": %s", strerror(errno));
		goto reset;
	}
	if (sys_read("mm_stat", buf, sizeof(buf))) {
		why(w, wl, "reading mm_stat failed");
		goto reset;
	}
	nv = sscanf(buf, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		    &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
	if (nv < 8) {
		why(w, wl, "mm_stat has %d fields", nv);
		goto reset;
	}
	row->put_MBps = transfer(fd, d->buf, d->len, bounce, true);
	row->get_MBps = transfer(fd, back, d->len, bounce, false);
	row->verified = row->get_MBps > 0 && !memcmp(back, d->buf, d->len);
	for (int i = 0; i < 9; i++)
		row->mm_stat[i] = v[i];
	row->pages = d->len / ps;
	row->orig_bytes = v[0];
	row->compr_bytes = v[1];
	row->pool_bytes = v[2];
	row->pool_pages = v[2] / ps;
	row->same_pages = v[5];
	row->huge_pages = v[7];
	rc = 0;
reset:
	if (fd >= 0)
		close(fd);
	if (sys_write("reset", "1")) {
		fprintf(stderr, "zmem bench: warning: could not reset " ZRAM_DEV "\n");
	}
	free(bounce);
	free(back);
	return rc;
}
