/*
 * The set of live objects, ZM_DEBUG builds only (base/live.h).
 *
 * An open-addressing hash set of addresses, linear probing, deletion by
 * shifting back the entries that follow, at most half full; each entry is
 * the address with the object's kind in its two low bits (objects come
 * from calloc: aligned).  lv.lock is a leaf lock, taken across fork by
 * the library's fork handler (base/worker.c) so that a child finds it
 * free.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "base/live.h"
#include "base/worker.h"

#if ZM_DEBUG >= 1

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

/* Destroyed objects whose memory is held back from malloc, so that their
 * addresses are not handed to new objects at once. */
#define ZMI_LIVE_QUARANTINE 16
#define ZMI_LIVE_POISON 0x6b     /* fills a destroyed object */
#define KIND_MASK ((uintptr_t)3)

static struct {
	pthread_mutex_t lock;
	uintptr_t *set;          /* lock: address | kind, 0 = empty */
	size_t cap, n;           /* lock: cap a power of two, or 0 */
	bool lost;               /* lock: an add found no memory */
	struct { void *p; size_t size; } q[ZMI_LIVE_QUARANTINE];  /* lock */
	unsigned qnext;          /* lock */
} lv = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t lv_once = PTHREAD_ONCE_INIT;

static const char *const kind_name[] = { "?", "pool", "store", "tmem" };

static void fork_prepare(void) { pthread_mutex_lock(&lv.lock); }
static void fork_release(void) { pthread_mutex_unlock(&lv.lock); }
static void once_init(void) { zmi_fork_hook(fork_prepare, fork_release, fork_release); }

static size_t home(uintptr_t a, size_t cap)
{
	return (size_t)(((uint64_t)(a >> 4) * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The index of a's entry, or of the empty entry where it would go. lock */
static size_t find(uintptr_t a)
{
	size_t i = home(a, lv.cap);

	while (lv.set[i] && (lv.set[i] & ~KIND_MASK) != a)
		i = (i + 1) & (lv.cap - 1);
	return i;
}

/* Room for one more entry, at most half full.  lock */
static bool grow(void)
{
	size_t cap = lv.cap ? lv.cap * 2 : 64, ocap = lv.cap;
	uintptr_t *old = lv.set, *set;

	if ((lv.n + 1) * 2 <= lv.cap)
		return true;
	set = calloc(cap, sizeof(*set));
	if (!set)
		return false;
	lv.set = set, lv.cap = cap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i])
			lv.set[find(old[i] & ~KIND_MASK)] = old[i];
	free(old);
	return true;
}

/* Empty entry i, moving back the entries after it that would no longer
 * be found.  lock */
static void del(size_t i)
{
	size_t mask = lv.cap - 1, j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!lv.set[j])
			break;
		k = home(lv.set[j] & ~KIND_MASK, lv.cap);
		/* the entry at j stays if its home lies cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		lv.set[i] = lv.set[j];
		i = j;
	}
	lv.set[i] = 0;
	lv.n--;
}

void zmi_live_add(const void *obj, enum zmi_live_kind kind)
{
	uintptr_t a = (uintptr_t)obj;

	ZM_ASSERT(obj && !(a & KIND_MASK));
	pthread_once(&lv_once, once_init);
	pthread_mutex_lock(&lv.lock);
	if (grow()) {
		lv.set[find(a)] = a | (uintptr_t)kind;
		lv.n++;
	} else {
		lv.lost = true;
	}
	pthread_mutex_unlock(&lv.lock);
}

bool zmi_live_take(const void *obj, enum zmi_live_kind kind, const char *op)
{
	uintptr_t a = (uintptr_t)obj, e = 0;
	bool lost;

	pthread_mutex_lock(&lv.lock);
	if (lv.cap) {
		size_t i = find(a);

		e = lv.set[i];
		if (e && (e & KIND_MASK) == (uintptr_t)kind)
			del(i);
	}
	lost = lv.lost;
	pthread_mutex_unlock(&lv.lock);
	if (e && (e & KIND_MASK) == (uintptr_t)kind)
		return true;
	if (e)
		zmi_bad_input("%s: %p is a live %s, not a %s: left alone", op, obj,
			      kind_name[e & KIND_MASK], kind_name[kind]);
	else if (lost)
		return true;   /* it may be one the set could not hold */
	else
		zmi_bad_input("%s: %s %p is not live (destroyed already, or never "
			      "created): left alone", op, kind_name[kind], obj);
	return false;
}

void zmi_live_free(void *obj, size_t size)
{
	void *old;
	size_t osize;

	memset(obj, ZMI_LIVE_POISON, size);
	poison(obj, size);
	pthread_mutex_lock(&lv.lock);
	old = lv.q[lv.qnext].p;
	osize = lv.q[lv.qnext].size;
	lv.q[lv.qnext].p = obj;
	lv.q[lv.qnext].size = size;
	lv.qnext = (lv.qnext + 1) % ZMI_LIVE_QUARANTINE;
	pthread_mutex_unlock(&lv.lock);
	if (old) {
		unpoison(old, osize);
		free(old);
	}
}

#else
/* release builds: everything is inline in base/live.h */
typedef int zmi_live_unused;
#endif
