/*
 * Where the pages are: the first slot in a range that holds a page, for
 * callers that report allocation (zmem serve's NBD block status, tools
 * that copy only what is stored).
 *
 * Stretches of the slot array never written (the lazy array's bitmap,
 * base/lazy.h) are skipped a bitmap word -- 2^15 slots of a 4 KiB OS
 * page's 512 each -- at a time, without being read, so a sparse store of
 * any size answers in microseconds.  Written stretches are read a slot
 * word at a time, without the slot lock: a slot's kind bits change only
 * under its lock, and one relaxed load sees them as some put, discard or
 * create left them.  The answer may be stale as soon as it is returned,
 * which a reader racing with writers gets from any order anyway.
 */
#include <errno.h>

#include "store/store_internal.h"

static inline bool slot_used(const struct zm_store *s, uint64_t i)
{
	uint32_t info = word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED));

	return slot_kind(info) != ZM_STORE_SLOT_EMPTY;
}

int zm_store_next_used(struct zm_store *s, uint64_t from, uint64_t end, uint64_t *next)
{
	uint64_t i, per_page;

	if (!s || !next) {
		zmi_bad_input("zm_store_next_used: NULL argument");
		return -EINVAL;
	}
	per_page = 1ull << s->slot_arr.page_shift;  /* slots an OS page holds */
	if (end > s->nr_pages)
		end = s->nr_pages;
	for (i = zmi_store_slot_next_touched(s, from, end); i < end;
	     i = zmi_store_slot_next_touched(s, i, end)) {
		/* a written OS page of slots: read each */
		uint64_t stop = (i | (per_page - 1)) + 1;

		if (stop > end)
			stop = end;
		for (; i < stop; i++)
			if (slot_used(s, i)) {
				*next = i;
				return 0;
			}
	}
	*next = end;
	return 0;
}
