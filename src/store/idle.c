/*
 * Idle tracking: which pages have not been accessed lately, and since
 * when, for recompression and writeback to pick from.
 *
 * zram's semantics: a mark sets every page's idle bit, and any access
 * (put, get) clears it.  The bit lives in the slot (store_internal.h) and
 * costs the hot paths nothing.  What a bit cannot say is how long a page
 * has been idle; zram keeps an access time per slot for that, which the
 * hot paths would have to write on every access (a second cache line).
 * Here the marks date the pages instead: each mark gets a number (mod
 * 256) and its time, and a page that a mark finds without its idle bit
 * (accessed since the mark before) gets that mark's number in a byte
 * beside its slot, its age.  A page whose idle bit is set has not been
 * accessed since the mark its age names.  So
 *
 *     idle for at least T  =  idle bit set  and  mark_ns[age] <= now - T,
 *
 * to the resolution of the marks: exact at the marks, and a page idle
 * for T between two marks is seen at the next one.
 *
 * The byte is written only by marks, under the slot lock, and read only
 * with the idle bit, under the slot lock.  Numbers wrap after 256 marks:
 * each mark moves a page still dated by the number it is about to reuse
 * to the oldest number left, so a page idle for more than 255 marks is
 * dated 255 marks back (younger than it is, never older).
 *
 * Pages of units (unit.c) are marked and dated as single pages are, each
 * by its own slot: a get of one clears its bit only.  Recompression and
 * writeback take a unit whole when all its pages still in it are picked
 * (writeback.c, recompress.c); a unit on file is not counted idle (as a
 * page on file is not marked).
 *
 * Locks: mark_lock (one mark at a time) -> slot locks, one at a time.
 */
#include <errno.h>
#include <time.h>

#include "base/os.h"
#include "store/store_internal.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int zmi_store_idle_init(struct zm_store *s)
{
	if (zmi_lazy_init(&s->age_arr, s->nr_pages, 1))
		return -ENOMEM;
	s->age = s->age_arr.base;
	return 0;
}

void zmi_store_idle_fini(struct zm_store *s)
{
	if (!s->age)
		return;
	zmi_lazy_fini(&s->age_arr);
	s->age = NULL;
}

uint64_t zmi_store_idle_sweep(struct zm_store *s, unsigned min_age_ms, uint64_t *idle)
{
	uint64_t now, cutoff, n = 0;
	uint8_t e;

	pthread_mutex_lock(&s->mark_lock);
	e = (uint8_t)(__atomic_load_n(&s->epoch, __ATOMIC_RELAXED) + 1);
	now = now_ns();
	cutoff = now - (uint64_t)min_age_ms * 1000000ull;
	if (cutoff > now)
		cutoff = 0;
	__atomic_store_n(&s->mark_ns[e], now, __ATOMIC_RELAXED);
	__atomic_store_n(&s->epoch, e, __ATOMIC_RELEASE);
	for (uint64_t i = zmi_store_slot_next_touched(s, 0, s->nr_pages); i < s->nr_pages;
	     i = zmi_store_slot_next_touched(s, i + 1, s->nr_pages)) {
		uint32_t info;

		/* unlocked peek: pages come and go while a mark runs, and
		 * one that arrives just after it was passed is simply not
		 * marked, as if it had come after the mark */
		if (!slot_cold(word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED))))
			continue;
		info = zmi_store_slot_lock(s, i);
		if (!slot_cold(info)) {
			zmi_store_slot_unlock(s, i, info, info);
			continue;
		}
		if (!(info & SLOT_IDLE)) {
			zmi_lazy_mark(&s->age_arr, i);
			s->age[i] = e;
		} else if (s->age[i] == e) {
			/* dated by the number this mark reuses: make it the
			 * oldest left */
			s->age[i] = (uint8_t)(e + 1);
		}
		n += zmi_store_pick(s, i, info | SLOT_IDLE, ZM_STORE_PICK_IDLE, cutoff);
		zmi_store_slot_unlock(s, i, info, info | SLOT_IDLE);
	}
	__atomic_store_n(&s->idle_count, n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->mark_lock);
	if (idle)
		*idle = n;
	return cutoff;
}

bool zmi_store_pick(const struct zm_store *s, uint64_t index, uint32_t info, unsigned which,
		    uint64_t cutoff_ns)
{
	bool huge = !(info & SLOT_POOL);

	if (slot_is_unit(info)) {
		/* a page of a unit in memory: never huge; a unit on file has
		 * nothing left to pick (its flag is read without the unit's
		 * lock: a choice, which the caller checks again) */
		if (__atomic_load_n(&zmi_store_slot_unit(s, index)->file, __ATOMIC_RELAXED) ||
		    (which & (ZM_STORE_PICK_HUGE | ZM_STORE_PICK_INCOMPRESSIBLE)))
			return false;
		huge = false;
	} else if (!slot_in_pool(info)) {
		return false;
	}
	if ((which & ZM_STORE_PICK_HUGE) && !huge)
		return false;
	if ((which & ZM_STORE_PICK_INCOMPRESSIBLE) && !(huge && (info & SLOT_FLAG)))
		return false;
	if (which & ZM_STORE_PICK_IDLE)
		return (info & SLOT_IDLE) &&
		       __atomic_load_n(&s->mark_ns[s->age[index]], __ATOMIC_RELAXED) <= cutoff_ns;
	return true;
}

long zm_store_mark_idle(struct zm_store *s, unsigned min_age_ms)
{
	uint64_t n;

	if (!s) {
		zmi_bad_input("zm_store_mark_idle: no store");
		return -EINVAL;
	}
	__atomic_store_n(&s->idle_cutoff_ns, zmi_store_idle_sweep(s, min_age_ms, &n),
			 __ATOMIC_RELAXED);
	return (long)n;
}
