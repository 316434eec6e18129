/*
 * A program run under libzmem-run.so (LD_PRELOAD) by test_preload.sh with
 * a small resident limit, so that its heap really is compressed while it
 * checks it.  Each case is one argument; it prints "ok CASE" or what went
 * wrong and exits 1.  Seeded: --seed N (printed) replays a run.
 *
 *   malloc    blocks of every size, 1 byte to 4 MiB, a cookie in each,
 *             churned (freed and allocated again), all checked
 *   calloc    zeroed, also in memory given back by free before
 *   realloc   content kept, growing and shrinking
 *   align     posix_memalign, aligned_alloc, memalign, valloc
 *   mmap      mmap, munmap (whole, head, tail, middle), mremap (grow,
 *             move), madvise(DONTNEED) reading zeros, mprotect NONE then
 *             RW keeping content
 *   io        read(2), fread, pread into buffers that were compressed,
 *             write(2) and fwrite from them: no EFAULT, right bytes
 *   threads   4 threads allocating and freeing with cookies
 *   fork      the child checks its copy of the heap, the parent its own
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t seed;

static uint64_t rnd(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define FAIL(...) do { printf("FAIL %s:%d: ", __func__, __LINE__); printf(__VA_ARGS__); \
		       printf(" (seed %llu)\n", (unsigned long long)seed); exit(1); } while (0)

/* a block's bytes: a function of its tag and offset, never all zero */
static void fill(unsigned char *p, size_t n, uint64_t tag)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(tag * 131 + i * 7 + (i >> 12) + 1);
}

static size_t check(const unsigned char *p, size_t n, uint64_t tag)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(tag * 131 + i * 7 + (i >> 12) + 1))
			return i + 1;
	return 0;
}

struct blk { unsigned char *p; size_t n; uint64_t tag; };

static size_t rand_size(uint64_t *s)
{
	/* every size class: 1 B .. 4 MiB, log-uniform */
	unsigned bits = (unsigned)(rnd(s) % 23);

	return 1 + (size_t)(rnd(s) % (1ull << bits));
}

static int case_malloc(void)
{
	enum { N = 3000, ROUNDS = 4 };
	static struct blk b[N];
	uint64_t s = seed;

	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < N; i++) {
			if (b[i].p && rnd(&s) % 2)
				continue;
			if (b[i].p) {
				size_t bad = check(b[i].p, b[i].n, b[i].tag);
				if (bad)
					FAIL("block %d (%zu bytes) byte %zu wrong", i, b[i].n, bad - 1);
				free(b[i].p);
			}
			b[i].n = rand_size(&s);
			b[i].tag = rnd(&s);
			b[i].p = malloc(b[i].n);
			if (!b[i].p)
				FAIL("malloc(%zu) failed", b[i].n);
			if (malloc_usable_size(b[i].p) < b[i].n)
				FAIL("usable size %zu < %zu", malloc_usable_size(b[i].p), b[i].n);
			fill(b[i].p, b[i].n, b[i].tag);
		}
	}
	for (int i = 0; i < N; i++) {
		size_t bad = check(b[i].p, b[i].n, b[i].tag);
		if (bad)
			FAIL("block %d (%zu bytes) byte %zu wrong at the end", i, b[i].n, bad - 1);
		free(b[i].p);
	}
	return 0;
}

static int case_calloc(void)
{
	uint64_t s = seed;

	for (int i = 0; i < 2000; i++) {
		size_t n = rand_size(&s);
		unsigned char *d = malloc(n), *p;

		fill(d, n, 7);
		free(d); /* its memory comes back dirty to calloc */
		p = calloc(1, n);
		if (!p)
			FAIL("calloc(%zu) failed", n);
		for (size_t j = 0; j < n; j++)
			if (p[j])
				FAIL("calloc(%zu) byte %zu is %d", n, j, p[j]);
		fill(p, n, 1);
		free(p);
	}
	volatile size_t huge = SIZE_MAX / 2;
	if (calloc(huge, 4) || errno != ENOMEM)
		FAIL("calloc overflow not refused");
	return 0;
}

static int case_realloc(void)
{
	uint64_t s = seed;

	for (int i = 0; i < 300; i++) {
		size_t n = rand_size(&s), m = rand_size(&s);
		unsigned char *p = malloc(n);

		fill(p, n, (uint64_t)i);
		p = realloc(p, m);
		if (!p)
			FAIL("realloc to %zu failed", m);
		if (check(p, n < m ? n : m, (uint64_t)i))
			FAIL("realloc %zu -> %zu lost content", n, m);
		free(p);
	}
	return 0;
}

static int case_align(void)
{
	for (size_t a = sizeof(void *); a <= (1u << 22); a <<= 1) {
		void *p = NULL, *q, *r, *v;

		if (posix_memalign(&p, a, 100 + a / 2) || (uintptr_t)p % a)
			FAIL("posix_memalign(%zu) gave %p", a, p);
		q = aligned_alloc(a, a * 2);
		r = memalign(a, 33);
		if (!q || (uintptr_t)q % a || !r || (uintptr_t)r % a)
			FAIL("aligned_alloc/memalign(%zu): %p %p", a, q, r);
		memset(p, 1, 100 + a / 2);
		memset(q, 2, a * 2);
		memset(r, 3, 33);
		free(p);
		free(q);
		free(r);
		v = valloc(5000);
		if (!v || (uintptr_t)v % 4096)
			FAIL("valloc gave %p", v);
		free(v);
	}
	{
		void *p;
		if (posix_memalign(&p, 3, 10) != EINVAL)
			FAIL("posix_memalign(3) not EINVAL");
	}
	return 0;
}

static int case_mmap(void)
{
	size_t pg = 4096, n = 256 * pg;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *q, *r;

	if (p == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	for (size_t i = 0; i < n; i++)
		if (p[i])
			FAIL("fresh mmap not zero at %zu", i);
	fill(p, n, 11);
	/* a partial munmap: the head, the tail, one page in the middle */
	if (munmap(p, 4 * pg) || munmap(p + n - 4 * pg, 4 * pg) || munmap(p + 100 * pg, pg))
		FAIL("partial munmap: %s", strerror(errno));
	for (size_t i = 4 * pg; i < 100 * pg; i++)
		if (p[i] != (unsigned char)(11 * 131 + i * 7 + (i >> 12) + 1))
			FAIL("partial munmap lost the rest at %zu", i);
	/* madvise DONTNEED reads zeros after */
	if (madvise(p + 10 * pg, 2 * pg, MADV_DONTNEED))
		FAIL("madvise: %s", strerror(errno));
	for (size_t i = 0; i < 2 * pg; i++)
		if (p[10 * pg + i])
			FAIL("DONTNEED page not zero");
	if (p[12 * pg] != (unsigned char)(11 * 131 + 12 * pg * 7 + 12 + 1))
		FAIL("DONTNEED dropped a page beside");
	/* mprotect NONE then RW keeps content */
	if (mprotect(p + 20 * pg, 8 * pg, PROT_NONE) || mprotect(p + 20 * pg, 8 * pg, PROT_READ | PROT_WRITE))
		FAIL("mprotect: %s", strerror(errno));
	for (size_t i = 20 * pg; i < 28 * pg; i++)
		if (p[i] != (unsigned char)(11 * 131 + i * 7 + (i >> 12) + 1))
			FAIL("mprotect lost content at %zu", i);
	if (munmap(p + 4 * pg, 96 * pg) || munmap(p + 101 * pg, n - 105 * pg))
		FAIL("munmap rest: %s", strerror(errno));
	/* mremap: grow (in place or moved), content kept */
	q = mmap(NULL, 64 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = mmap(NULL, 64 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(q, 64 * pg, 5);
	fill(r, 64 * pg, 6);
	q = mremap(q, 64 * pg, 4096 * pg, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		FAIL("mremap: %s", strerror(errno));
	if (check(q, 64 * pg, 5) || check(r, 64 * pg, 6))
		FAIL("mremap lost content");
	for (size_t i = 64 * pg; i < 4096 * pg; i += pg)
		if (q[i])
			FAIL("mremap's new part not zero");
	fill(q, 4096 * pg, 8);
	q = mremap(q, 4096 * pg, 32 * pg, 0);
	if (q == MAP_FAILED || check(q, 32 * pg, 8))
		FAIL("mremap shrink");
	munmap(q, 32 * pg);
	munmap(r, 64 * pg);
	/* reservation then commit, as V8 does */
	p = mmap(NULL, 1024 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED || mprotect(p, 64 * pg, PROT_READ | PROT_WRITE))
		FAIL("reserve/commit: %s", strerror(errno));
	fill(p, 64 * pg, 3);
	if (mmap(p, 64 * pg, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != p ||
	    mprotect(p, 64 * pg, PROT_READ | PROT_WRITE))
		FAIL("decommit/commit: %s", strerror(errno));
	for (size_t i = 0; i < 64 * pg; i++)
		if (p[i])
			FAIL("decommitted page not zero");
	munmap(p, 1024 * pg);
	return 0;
}

static int case_io(void)
{
	enum { N = 64, SZ = 256 << 10 };
	static unsigned char *buf[N];
	char path[] = "/tmp/zmem-run-io.XXXXXX";
	int fd = mkstemp(path);
	FILE *f;

	if (fd < 0)
		FAIL("mkstemp");
	unlink(path);
	/* write(2) from buffers that were compressed since they were filled */
	for (int i = 0; i < N; i++) {
		buf[i] = malloc(SZ);
		fill(buf[i], SZ, (uint64_t)i);
	}
	for (int i = 0; i < N; i++)
		if (write(fd, buf[i], SZ) != SZ)
			FAIL("write %d: %s", i, strerror(errno));
	/* read(2) into buffers that were compressed (filled with junk, then
	 * pushed out by the others) */
	for (int i = 0; i < N; i++)
		memset(buf[i], 0xa5, SZ);
	if (lseek(fd, 0, SEEK_SET))
		FAIL("lseek");
	for (int i = 0; i < N; i++) {
		ssize_t got = read(fd, buf[i], SZ);
		if (got != SZ)
			FAIL("read %d: %zd %s", i, got, strerror(errno));
	}
	for (int i = 0; i < N; i++)
		if (check(buf[i], SZ, (uint64_t)i))
			FAIL("read back %d wrong", i);
	/* pread, and stdio, whose buffers are the heap's too */
	memset(buf[0], 0, SZ);
	if (pread(fd, buf[0], SZ, (off_t)SZ * 3) != SZ || check(buf[0], SZ, 3))
		FAIL("pread");
	f = fdopen(fd, "r+");
	if (!f || fseek(f, 0, SEEK_SET))
		FAIL("fdopen");
	for (int i = 0; i < N; i++)
		memset(buf[i], 0x5a, SZ);
	for (int i = 0; i < N; i++)
		if (fread(buf[i], 1, SZ, f) != SZ)
			FAIL("fread %d", i);
	for (int i = 0; i < N; i++)
		if (check(buf[i], SZ, (uint64_t)i))
			FAIL("fread back %d wrong", i);
	rewind(f);
	for (int i = N - 1; i >= 0; i--)
		if (fwrite(buf[i], 1, SZ, f) != SZ)
			FAIL("fwrite %d", i);
	fflush(f);
	if (pread(fd, buf[0], SZ, 0) != SZ || check(buf[0], SZ, N - 1))
		FAIL("fwrite wrote wrong bytes");
	fclose(f);
	for (int i = 0; i < N; i++)
		free(buf[i]);
	return 0;
}

static void *worker(void *arg)
{
	uint64_t s = seed ^ (uintptr_t)arg;
	struct blk b[500] = { 0 };

	for (int r = 0; r < 20000; r++) {
		int i = (int)(rnd(&s) % 500);

		if (b[i].p) {
			if (check(b[i].p, b[i].n, b[i].tag))
				FAIL("thread %d block %d wrong", (int)(uintptr_t)arg, i);
			free(b[i].p);
		}
		b[i].n = 1 + (size_t)(rnd(&s) % (rnd(&s) % 8 ? 512 : 65536));
		b[i].tag = rnd(&s);
		b[i].p = malloc(b[i].n);
		fill(b[i].p, b[i].n, b[i].tag);
	}
	for (int i = 0; i < 500; i++) {
		if (b[i].p && check(b[i].p, b[i].n, b[i].tag))
			FAIL("thread block %d wrong at the end", i);
		free(b[i].p);
	}
	return NULL;
}

static int case_threads(void)
{
	pthread_t t[4];

	for (uintptr_t i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int case_fork(void)
{
	enum { N = 200, SZ = 64 << 10 };
	static unsigned char *b[N];
	int st;
	pid_t pid;

	for (int i = 0; i < N; i++) {
		b[i] = malloc(SZ);
		fill(b[i], SZ, (uint64_t)i);
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < N; i++) {
			if (check(b[i], SZ, (uint64_t)i))
				_exit(2);
			fill(b[i], SZ, (uint64_t)i + 1000); /* its own copy */
		}
		for (int i = 0; i < 100; i++)
			free(malloc(1000));
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		FAIL("fork/wait");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("the child found its heap wrong (status %#x)", st);
	for (int i = 0; i < N; i++)
		if (check(b[i], SZ, (uint64_t)i))
			FAIL("the child's writes reached the parent (block %d)", i);
	return 0;
}

/* A file mapped with MAP_FIXED over a reservation, as V8 maps its
 * builtins' code over its code range: the file's bytes there, the
 * calls on them passed to the kernel, and the reservation's other pages
 * kept right through the heap's evictions around it. */
static int case_foreign(void)
{
	size_t pg = 4096, n = 512 * pg;
	char path[] = "/tmp/zmem-heap-foreign.XXXXXX";
	int fd = mkstemp(path);
	unsigned char *p, *f, *q;

	if (fd < 0)
		FAIL("mkstemp: %s", strerror(errno));
	unlink(path);
	for (size_t i = 0; i < 16 * pg; i++)
		if (write(fd, &(unsigned char){ (unsigned char)(i * 13 + 1) }, 1) != 1)
			FAIL("write: %s", strerror(errno));
	p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED || mprotect(p, n, PROT_READ | PROT_WRITE))
		FAIL("reserve: %s", strerror(errno));
	fill(p, n, 21);
	f = mmap(p + 100 * pg, 16 * pg, PROT_READ | PROT_EXEC, MAP_FIXED | MAP_PRIVATE, fd, 0);
	if (f != p + 100 * pg)
		FAIL("file over the reservation: %s", f == MAP_FAILED ? strerror(errno) : "moved");
	for (size_t i = 0; i < 16 * pg; i++)
		if (f[i] != (unsigned char)(i * 13 + 1))
			FAIL("the file's byte %zu", i);
	/* the rest of the reservation as it was, all of it evicted and back */
	q = malloc(8 << 20); /* heap churn: pushes pages out at a small limit */
	if (!q)
		FAIL("malloc");
	fill(q, 8 << 20, 22);
	if (check(p, 100 * pg, 21))
		FAIL("the reservation before the file");
	for (size_t i = 116 * pg; i < n; i++)
		if (p[i] != (unsigned char)(21 * 131 + i * 7 + (i >> 12) + 1))
			FAIL("the reservation after the file, at %zu", i);
	if (mprotect(f, 16 * pg, PROT_READ) || madvise(f, 16 * pg, MADV_DONTNEED))
		FAIL("calls on the file's pages: %s", strerror(errno));
	if (f[5] != 5 * 13 + 1)
		FAIL("the file's page after DONTNEED");
	free(q);
	if (munmap(p, n))
		FAIL("munmap: %s", strerror(errno));
	close(fd);
	return 0;
}

static const struct { const char *name; int (*fn)(void); } cases[] = {
	{ "foreign", case_foreign },
	{ "malloc", case_malloc }, { "calloc", case_calloc }, { "realloc", case_realloc },
	{ "align", case_align }, { "mmap", case_mmap }, { "io", case_io },
	{ "threads", case_threads }, { "fork", case_fork },
};

int main(int argc, char **argv)
{
	int i = 1;

	seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	if (argc > 2 && !strcmp(argv[1], "--seed")) {
		seed = strtoull(argv[2], NULL, 0);
		i = 3;
	}
	printf("# seed %llu\n", (unsigned long long)seed);
	for (; i < argc; i++) {
		size_t c;

		for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			if (!strcmp(argv[i], cases[c].name))
				break;
		if (c == sizeof(cases) / sizeof(cases[0])) {
			printf("unknown case %s\n", argv[i]);
			return 2;
		}
		cases[c].fn();
		printf("ok %s\n", argv[i]);
		fflush(stdout);
	}
	return 0;
}
