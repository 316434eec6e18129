/*
 * Slots: the array indexed by page number, the per-slot lock, and emptying
 * slots (release, discard).
 *
 * The array is reserved as address space (zm_os_reserve: it reads as zero
 * and costs memory only where touched), so a store as large as a big
 * zram disk costs nothing until pages are written; a bitmap of the
 * chunks ever written lets walks skip the rest without paging it in.
 * 8 bytes a slot, one word shared with the pool (its owner word): the
 * object's location and the slot's info (length, kind, lock); see
 * store_internal.h.  Non-zero fill words of same-filled pages sit in a
 * second array, reserved and touched the same way.
 *
 * The slot lock is a spin bit.  It is held for a slot swap (a few
 * instructions) or a decompression (a few microseconds at most), and only
 * threads on the same slot ever wait for it, so waiting spins with a pause
 * for about that long and then yields, like zm_lock.
 *
 * Lock order: see store_internal.h; this file takes slot locks only, one
 * at a time.
 */
#include <errno.h>
#include <sched.h>

#include "base/os.h"
#include "store/store_internal.h"

/* Spins before yielding: ~200 pauses is about one decompression of a
 * page, the longest the lock is held; beyond that the holder was
 * probably preempted. */
#define SLOT_SPINS 200

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

int zm_slots_alloc(struct zm_store *s)
{
	size_t os_page = zm_os_page_size();
	uint64_t chunks = (s->nr_pages + ZM_SLOT_CHUNK - 1) / ZM_SLOT_CHUNK;
	uint64_t same_pages;

	s->slots_bytes = round_up((size_t)s->nr_pages * sizeof(uint64_t), os_page);
	s->slots = zm_os_reserve(s->slots_bytes, os_page);
	s->same_val = zm_os_reserve(s->slots_bytes, os_page);
	same_pages = s->slots_bytes / os_page;
	s->same_map_bytes = round_up((size_t)(same_pages + 63) / 64 * sizeof(uint64_t), os_page);
	s->same_map = zm_os_reserve(s->same_map_bytes, os_page);
	s->touched_bytes = round_up((size_t)(chunks + 63) / 64 * sizeof(uint64_t), os_page);
	s->touched = zm_os_reserve(s->touched_bytes, os_page);
	return s->slots && s->same_val && s->same_map && s->touched ? 0 : -ENOMEM;
}

void zm_slots_free(struct zm_store *s)
{
	zm_os_release(s->slots, s->slots_bytes);
	zm_os_release(s->same_val, s->slots_bytes);
	zm_os_release(s->same_map, s->same_map_bytes);
	zm_os_release(s->touched, s->touched_bytes);
	s->slots = NULL;
	s->same_val = NULL;
	s->same_map = NULL;
	s->touched = NULL;
}

uint64_t zm_slot_next_touched(const struct zm_store *s, uint64_t i, uint64_t end)
{
	while (i < end) {
		uint64_t chunk = i / ZM_SLOT_CHUNK;
		uint64_t w = __atomic_load_n(&s->touched[chunk / 64], __ATOMIC_RELAXED) >>
			     (chunk % 64);

		if (w & 1)
			return i;
		/* the next set bit of this word, or the next word */
		chunk = w ? chunk + (uint64_t)__builtin_ctzll(w) : (chunk / 64 + 1) * 64;
		i = chunk * ZM_SLOT_CHUNK;
	}
	return end;
}

void zm_slot_lock_slow(uint64_t *w)
{
	const uint64_t lock = (uint64_t)SLOT_LOCK << SLOT_INFO_SHIFT;

	for (;;) {
		for (int i = 0; i < SLOT_SPINS; i++) {
			if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & lock) &&
			    !(__atomic_fetch_or(w, lock, __ATOMIC_ACQUIRE) & lock))
				return;
			__builtin_ia32_pause();
		}
		sched_yield();
	}
}

uint32_t zm_slot_set_same(struct zm_store *s, uint64_t index, uint64_t word)
{
	uint64_t page, bit, *m;

	if (!word)
		return 0;
	page = index * sizeof(uint64_t) / zm_os_page_size();
	bit = 1ull << (page % 64);
	m = &s->same_map[page / 64];
	if (!(__atomic_load_n(m, __ATOMIC_RELAXED) & bit) &&
	    !(__atomic_fetch_or(m, bit, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_add(&s->same_touched, 1, __ATOMIC_RELAXED);
	s->same_val[index] = word;
	return 1;
}

uint32_t zm_slot_empty(struct zm_store *s, uint64_t index, uint32_t info)
{
	unsigned kind = slot_kind(info);
	int rc;

	if (kind == ZM_STORE_SLOT_POOL || kind == ZM_STORE_SLOT_HUGE) {
		rc = zm_pool_free_key(s->pool, index);
		ZM_ASSERT(rc == 0);
		(void)rc;
	}
	return ZM_STORE_SLOT_EMPTY;
}

void zm_slot_release(struct zm_store *s, uint32_t info)
{
	unsigned kind = slot_kind(info);

	if (kind == ZM_STORE_SLOT_EMPTY)
		return;
	zm_account(s, zm_stripe(s), info, -1);
	if (kind != ZM_STORE_SLOT_SAME)
		zm_limit_uncharge(s, slot_len(info));
}

int zm_store_discard(struct zm_store *s, uint64_t index, uint64_t count)
{
	if (!s || index > s->nr_pages || count > s->nr_pages - index) {
		zm_bad_input("zm_store_discard: range %llu+%llu beyond the store",
			     (unsigned long long)index, (unsigned long long)count);
		return -EINVAL;
	}
	for (uint64_t i = zm_slot_next_touched(s, index, index + count); i < index + count;
	     i = zm_slot_next_touched(s, i + 1, index + count)) {
		uint32_t info;

		/* Unlocked peek: an empty slot stays empty unless a put races
		 * with this discard, and either order is a correct outcome. */
		if (!(word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED)) & ~SLOT_LOCK))
			continue;
		info = zm_slot_lock(s, i);
		zm_slot_unlock(s, i, info, zm_slot_empty(s, i, info));
		zm_slot_release(s, info);
	}
	zm_count(zm_stripe(s), C_DISCARDS, (int64_t)count);
	return 0;
}

int zm_store_slot_info(struct zm_store *s, uint64_t index, unsigned *kind,
		       zm_handle_t *handle, size_t *len)
{
	uint32_t info;
	uint64_t h = 0;

	if (!s || index >= s->nr_pages)
		return -EINVAL;
	info = zm_slot_lock(s, index);
	if (slot_kind(info) == ZM_STORE_SLOT_SAME)
		h = zm_slot_same_word(s, index, info);
	else if (slot_kind(info) != ZM_STORE_SLOT_EMPTY)
		h = zm_slot_handle(s, index);
	zm_slot_unlock(s, index, info, info);
	if (kind)
		*kind = slot_kind(info);
	if (handle)
		*handle = h;
	if (len)
		*len = slot_kind(info) == ZM_STORE_SLOT_SAME ? 0 : slot_len(info);
	return 0;
}
