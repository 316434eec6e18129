/*
 * Slots: the array indexed by page number, the per-slot lock, and emptying
 * slots (release, discard).
 *
 * The array is reserved as address space (zmi_os_reserve: it reads as zero
 * and costs memory only where touched), so a store as large as a big
 * zram disk costs nothing until pages are written; a bitmap of the
 * chunks ever written lets walks skip the rest without paging it in.
 * 8 bytes a slot, one word shared with the pool (its owner word): the
 * object's location and the slot's info (length, kind, idle bit, lock);
 * see store_internal.h.  Non-zero fill words of same-filled pages, and
 * where a written-back page is, sit in a second array, reserved and
 * touched the same way.
 *
 * The slot lock is a spin bit.  It is held for a slot swap (a few
 * instructions) or a decompression (a few microseconds at most), never
 * across a system call that can block, and only threads on the same slot
 * ever wait for it, so waiting spins with a pause for about that long and
 * then yields, like zmi_lock.  A read from the backing file is made with
 * the slot BUSY instead (writeback.c); those waiting for it sleep on the
 * store's busy_cond.
 *
 * Lock order: see store_internal.h; this file takes slot locks only, one
 * at a time.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "base/cpu.h"
#include "store/store_internal.h"

/* Spins before yielding: ~200 pauses is about one decompression of a
 * page, the longest the lock is held; beyond that the holder was
 * probably preempted. */
#define SLOT_SPINS 200

int zmi_store_slots_alloc(struct zm_store *s)
{
	if (zmi_lazy_init(&s->slot_arr, s->nr_pages, sizeof(uint64_t)) ||
	    zmi_lazy_init(&s->same_arr, s->nr_pages, sizeof(uint64_t)))
		return -ENOMEM;
	s->slots = s->slot_arr.base;
	s->same_val = s->same_arr.base;
	return 0;
}

void zmi_store_slots_free(struct zm_store *s)
{
	zmi_lazy_fini(&s->slot_arr);
	zmi_lazy_fini(&s->same_arr);
	s->slots = NULL;
	s->same_val = NULL;
}

void zmi_store_slot_lock_slow(uint64_t *w)
{
	const uint64_t lock = (uint64_t)SLOT_LOCK << SLOT_INFO_SHIFT;

	for (;;) {
		for (int i = 0; i < SLOT_SPINS; i++) {
			if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & lock) &&
			    !(__atomic_fetch_or(w, lock, __ATOMIC_ACQUIRE) & lock))
				return;
			zmi_cpu_relax();
		}
		sched_yield();
	}
}

void zmi_store_slot_wait(struct zm_store *s, uint64_t index)
{
	/* the reader clears BUSY before it takes busy_lock to broadcast: a
	 * waiter that saw BUSY under busy_lock is waiting by then */
	pthread_mutex_lock(&s->busy_lock);
	while (slot_busy(word_info(__atomic_load_n(&s->slots[index], __ATOMIC_ACQUIRE))))
		pthread_cond_wait(&s->busy_cond, &s->busy_lock);
	pthread_mutex_unlock(&s->busy_lock);
}

void zmi_store_slot_wake(struct zm_store *s)
{
	pthread_mutex_lock(&s->busy_lock);
	pthread_cond_broadcast(&s->busy_cond);
	pthread_mutex_unlock(&s->busy_lock);
}

bool zmi_store_slot_set_same(struct zm_store *s, uint64_t index, uint64_t word)
{
	if (!word)
		return false;
	zmi_lazy_mark(&s->same_arr, index);
	s->same_val[index] = word;
	return true;
}

uint32_t zmi_store_slot_len(const struct zm_store *s, uint64_t index, uint32_t info)
{
	if (info & SLOT_POOL)
		return slot_pool_len(info);
	switch ((info & SLOT_SUB_MASK) >> SLOT_SUB_SHIFT) {
	case SUB_HUGE:
		return (uint32_t)s->page_size;
	case SUB_FILE:
		return (uint32_t)(s->same_val[index] & FILE_LEN_MASK);
	default:
		return 0;
	}
}

int (*zmi_store_pool_fault)(int op, uint64_t index);

static int pool_fault(int op, uint64_t index)
{
	int (*f)(int, uint64_t) = __atomic_load_n(&zmi_store_pool_fault, __ATOMIC_RELAXED);

	return f ? f(op, index) : 0;
}

/* The pool refused a call on a key the slot says it owns (a pool
 * corrupted, or its object freed behind the store's back): never carry
 * on as if it had not, or the slot would name an object it does not
 * own. */
static int pool_error(struct zm_store *s, const char *call, uint64_t index, int rc)
{
	zmi_store_count(zmi_store_thread_stripe(s), C_POOL_ERRORS, 1);
	zmi_log("store: %s of page %llu failed (%d)", call, (unsigned long long)index, rc);
	return -EIO;
}

int zmi_store_slot_bind(struct zm_store *s, zm_handle_t h, uint64_t index)
{
	int rc = pool_fault('b', index);

	if (!rc)
		rc = zm_pool_bind(s->pool, h, index);
	return zmi_unlikely(rc) ? pool_error(s, "zm_pool_bind", index, rc) : 0;
}

int zmi_store_slot_swap(struct zm_store *s, uint64_t index, uint32_t old, uint32_t old_len,
			zm_handle_t h)
{
	if (zmi_unlikely(zmi_store_slot_free_object(s, index, old))) {
		/* the pool kept the old object: so does the slot */
		zmi_store_slot_unlock(s, index, old, old);
		return -EIO;
	}
	if (h && zmi_unlikely(zmi_store_slot_bind(s, h, index))) {
		/* the old content is gone and the new has no key: empty */
		zmi_store_slot_unlock(s, index, old, ZM_STORE_SLOT_EMPTY);
		zmi_store_slot_release(s, old, old_len);
		return -EIO;
	}
	return 0;
}

int zmi_store_slot_put(struct zm_store *s, uint64_t index, uint32_t old, uint32_t old_len,
		       const void *buf, size_t size)
{
	bool in_pool = slot_in_pool(old);
	int rc;

	if (zmi_unlikely(__atomic_load_n(&zmi_store_pool_fault, __ATOMIC_RELAXED))) {
		/* the seam says what the free and the bind do: the calls
		 * one at a time, as the pool makes them */
		zm_handle_t h = zm_pool_alloc(s->pool, size);

		if (!h)
			return -ENOMEM;
		if (zm_pool_write(s->pool, h, buf, size)) {
			zm_pool_free(s->pool, h);
			zmi_store_slot_unlock(s, index, old, old);
			return -EIO;
		}
		if (zmi_store_slot_swap(s, index, old, old_len, h)) {
			zm_pool_free(s->pool, h);
			return -EIO;
		}
		return 0;
	}
	rc = zm_pool_put_key(s->pool, index, buf, size);
	if (zmi_likely(!rc)) {
		/* a unit's page or a page on file: its old content was not
		 * the key's, and goes now that the new one is there */
		if (!in_pool)
			zmi_store_slot_free_object(s, index, old);
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	pool_error(s, "zm_pool_put_key", index, rc);
	if (!in_pool || zm_pool_key_handle(s->pool, index)) {
		zmi_store_slot_unlock(s, index, old, old);
	} else {
		/* the old object went, the new one did not come: empty */
		zmi_store_slot_unlock(s, index, old, ZM_STORE_SLOT_EMPTY);
		zmi_store_slot_release(s, old, old_len);
	}
	return -EIO;
}

int zmi_store_slot_free_object(struct zm_store *s, uint64_t index, uint32_t info)
{
	unsigned kind = slot_kind(info);
	int rc;

	if (kind == ZM_STORE_SLOT_POOL || kind == ZM_STORE_SLOT_HUGE) {
		rc = pool_fault('f', index);
		if (!rc)
			rc = zm_pool_free_key(s->pool, index);
		if (zmi_unlikely(rc))
			return pool_error(s, "zm_pool_free_key", index, rc);
	} else if (kind == ZM_STORE_SLOT_UNIT) {
		return zmi_store_unit_leave(s, index);
	} else if (kind == ZM_STORE_SLOT_FILE && !s->destroying && zmi_store_has_file(s)) {
		uint64_t rec = s->same_val[index];

		zmi_store_backing_free(s, index, file_off(rec), rec & FILE_LEN_MASK);
	}
	return 0;
}

bool zmi_store_slot_unchanged(struct zm_store *s, uint64_t index, uint32_t now, uint32_t info,
			      const void *copy, uint32_t len)
{
	zm_handle_t h;
	const void *p;
	bool same;

	if ((now & ~SLOT_IDLE) != (info & ~SLOT_IDLE) || !slot_in_pool(now))
		return false;
	h = zmi_store_slot_handle(s, index);
	p = zm_pool_map(s->pool, h, ZM_MAP_RO);
	if (!p)
		return false;
	same = !memcmp(p, copy, len);
	zm_pool_unmap(s->pool, h);
	return same;
}

bool zmi_store_slot_walk(struct zm_store *s, uint64_t *cursor, uint64_t *visited,
			 uint64_t max_visit, uint64_t *index)
{
	uint64_t i = *cursor < s->nr_pages ? *cursor : 0;

	while (*visited < s->nr_pages && *visited < max_visit) {
		uint64_t next = zmi_store_slot_next_touched(s, i, s->nr_pages);

		if (next >= s->nr_pages) {
			/* the rest was never written: round to the start */
			*visited += s->nr_pages - i;
			i = 0;
			continue;
		}
		*visited += next - i + 1;
		i = next + 1 == s->nr_pages ? 0 : next + 1;
		if (slot_cold(word_info(__atomic_load_n(&s->slots[next], __ATOMIC_RELAXED)))) {
			*cursor = i;
			*index = next;
			return true;
		}
	}
	*cursor = i;
	return false;
}

int zmi_store_slot_clear(struct zm_store *s, uint64_t index)
{
	uint32_t info = zmi_store_slot_lock_ready(s, index);
	uint32_t len = zmi_store_slot_len(s, index, info);

	if (zmi_store_slot_free_object(s, index, info)) {
		zmi_store_slot_unlock(s, index, info, info);
		return -EIO;
	}
	zmi_store_slot_unlock(s, index, info, ZM_STORE_SLOT_EMPTY);
	zmi_store_slot_release(s, info, len);
	return 0;
}

void zmi_store_slot_release(struct zm_store *s, uint32_t info, uint32_t len)
{
	if (info)
		zmi_store_account(s, zmi_store_thread_stripe(s), info, len, -1);
}

int zm_store_discard(struct zm_store *s, uint64_t index, uint64_t count)
{
	int rc = 0;

	if (!s || index > s->nr_pages || count > s->nr_pages - index) {
		zmi_bad_input("zm_store_discard: no store, or range %llu+%llu beyond it",
			     (unsigned long long)index, (unsigned long long)count);
		return -EINVAL;
	}
	if (s->unit_pages > 1)
		zmi_store_unit_begin(s);
	for (uint64_t i = zmi_store_slot_next_touched(s, index, index + count); i < index + count;
	     i = zmi_store_slot_next_touched(s, i + 1, index + count)) {
		/* Unlocked peek: an empty slot stays empty unless a put races
		 * with this discard, and either order is a correct outcome. */
		if ((word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED)) & ~SLOT_LOCK) &&
		    zmi_store_slot_clear(s, i))
			rc = -EIO;  /* that page stays; the others go */
	}
	zmi_store_count(zmi_store_thread_stripe(s), C_DISCARDS, (int64_t)count);
	if (s->unit_pages > 1)
		zmi_store_unit_flush(s);
	return rc;
}

int zm_store_slot_info(struct zm_store *s, uint64_t index, unsigned *kind,
		       zm_handle_t *handle, size_t *len)
{
	uint32_t info, n;
	uint64_t h = 0;

	if (!s || index >= s->nr_pages)
		return -EINVAL;
	info = zmi_store_slot_lock(s, index);
	if (slot_kind(info) == ZM_STORE_SLOT_SAME)
		h = zmi_store_slot_same_word(s, index, info);
	else if (slot_in_pool(info))
		h = zmi_store_slot_handle(s, index);
	n = zmi_store_slot_len(s, index, info);
	if (slot_kind(info) == ZM_STORE_SLOT_UNIT) {
		struct zmi_store_unit *u = zmi_store_slot_unit(s, index);

		zmi_store_unit_lock(u); /* a recompression changes len under it */
		n = u->len;
		zmi_store_unit_unlock(u);
	}
	zmi_store_slot_unlock(s, index, info, info);
	if (kind)
		*kind = slot_kind(info);
	if (handle)
		*handle = h;
	if (len)
		*len = n;
	return 0;
}
