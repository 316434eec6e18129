/*
 * Slots: the array indexed by page number, the per-slot lock, and emptying
 * slots (release, discard).
 *
 * The array is reserved as address space (zm_os_reserve: it reads as zero
 * and costs memory only where touched), so a store as large as a big
 * zram disk costs nothing until pages are written; a bitmap of the
 * chunks ever written lets walks skip the rest without paging it in.
 * 12 bytes a slot: an info word (length, kind, and the slot's lock in its
 * top bit) and the handle or same-filled word; see store_internal.h.
 *
 * The slot lock is a spin bit.  It is held for a slot swap (a few
 * instructions) or a decompression (a few microseconds at most), and only
 * threads on the same slot ever wait for it, so waiting spins with a pause
 * for about that long and then yields, like zm_lock.
 *
 * Lock order: see store_internal.h; this file takes slot locks only, one
 * at a time, and calls zm_free after dropping them.
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

	s->slots_bytes = round_up((size_t)s->nr_pages * sizeof(struct zm_slot), os_page);
	s->slots = zm_os_reserve(s->slots_bytes, os_page);
	s->touched_bytes = round_up((size_t)(chunks + 63) / 64 * sizeof(uint64_t), os_page);
	s->touched = zm_os_reserve(s->touched_bytes, os_page);
	return s->slots && s->touched ? 0 : -ENOMEM;
}

void zm_slots_free(struct zm_store *s)
{
	zm_os_release(s->slots, s->slots_bytes);
	zm_os_release(s->touched, s->touched_bytes);
	s->slots = NULL;
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

void zm_slot_lock_slow(struct zm_slot *slot)
{
	for (;;) {
		for (int i = 0; i < SLOT_SPINS; i++) {
			if (!(__atomic_load_n(&slot->info, __ATOMIC_RELAXED) & SLOT_LOCK) &&
			    !(__atomic_fetch_or(&slot->info, SLOT_LOCK, __ATOMIC_ACQUIRE) &
			      SLOT_LOCK))
				return;
			__builtin_ia32_pause();
		}
		sched_yield();
	}
}

void zm_slot_release(struct zm_store *s, uint64_t handle, uint32_t info)
{
	unsigned kind = slot_kind(info);
	int rc;

	if (kind == ZM_STORE_SLOT_EMPTY)
		return;
	zm_account(s, zm_stripe(s), info, -1);
	if (kind == ZM_STORE_SLOT_SAME)
		return;
	rc = zm_free(s->pool, handle);
	ZM_ASSERT(rc == 0);
	(void)rc;
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
		struct zm_slot *slot = &s->slots[i];
		uint32_t info;
		uint64_t h;

		/* Unlocked peek: an empty slot stays empty unless a put races
		 * with this discard, and either order is a correct outcome. */
		if (!(__atomic_load_n(&slot->info, __ATOMIC_RELAXED) & ~SLOT_LOCK))
			continue;
		info = zm_slot_lock(slot);
		h = slot_handle(slot);
		slot_set_handle(slot, 0);
		zm_slot_unlock(slot, ZM_STORE_SLOT_EMPTY);
		zm_slot_release(s, h, info);
	}
	zm_count(zm_stripe(s), C_DISCARDS, (int64_t)count);
	return 0;
}

int zm_store_slot_info(struct zm_store *s, uint64_t index, unsigned *kind,
		       zm_handle_t *handle, size_t *len)
{
	struct zm_slot *slot;
	uint32_t info;
	uint64_t h;

	if (!s || index >= s->nr_pages)
		return -EINVAL;
	slot = &s->slots[index];
	info = zm_slot_lock(slot);
	h = slot_handle(slot);
	zm_slot_unlock(slot, info);
	if (kind)
		*kind = slot_kind(info);
	if (handle)
		*handle = slot_kind(info) == ZM_STORE_SLOT_EMPTY ? 0 : h;
	if (len)
		*len = slot_len(info);
	return 0;
}
