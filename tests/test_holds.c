/*
 * How long locks are held: the records of the longest holds that debug
 * builds keep (zm_lock_hold, common.h; src/base/lock.h).
 *
 * Nothing here asserts that anything was fast: a hold made to last at
 * least some time must be recorded as at least that long, and the
 * function that took the lock must be named; the machine adds only to
 * such figures.
 */
#define ZMEM_ADVANCED  /* zm_lock_hold */
#include <errno.h>

#include "testutil.h"
#include "base/lock.h"
#include <zmem/common.h>

#if ZM_DEBUG >= 1
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Hold l for at least ns. */
static void hold_for(zmi_lock_t *l, uint64_t ns)
{
	uint64_t t0;

	zmi_lock(l);
	t0 = now_ns();
	while (now_ns() - t0 < ns)
		;
	zmi_unlock(l);
}
#endif

static void test_lock_hold_recorded(void **st)
{
	struct zm_lock_hold h;
	zmi_lock_t a, b;

	(void)st;
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, NULL), -EINVAL);
	assert_int_equal(zm_lock_hold(ZM_LOCK_KINDS, &h), -EINVAL);
#if ZM_DEBUG >= 1
	zmi_lock_init(&a);
	zmi_lock_init_kind(&b, ZMI_LOCK_ZONE);
	zm_lock_hold_reset();
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns == 0 && h.site == NULL && h.over_10us == 0 && h.over_100us == 0);
	hold_for(&a, 300000);
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns >= 250000);
	assert_string_equal(h.site, "hold_for");
	assert_true(h.over_10us >= 1 && h.over_100us >= 1);
	/* a kind of its own: the other's record is not this one's */
	assert_int_equal(zm_lock_hold(ZM_LOCK_ZONE, &h), 0);
	assert_true(h.over_100us == 0 || h.max_ns >= 100000);
	hold_for(&b, 150000);
	assert_int_equal(zm_lock_hold(ZM_LOCK_ZONE, &h), 0);
	assert_true(h.max_ns >= 120000 && h.over_100us >= 1);
	/* trylock names its caller too */
	zm_lock_hold_reset();
	assert_true(zmi_trylock(&a));
	{
		uint64_t t0 = now_ns();

		while (now_ns() - t0 < 200000)
			;
	}
	zmi_unlock(&a);
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_string_equal(h.site, "test_lock_hold_recorded");
	assert_true(h.max_ns >= 150000);
	zm_lock_hold_reset();
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns == 0 && h.site == NULL);
	zmi_lock_destroy(&a);
	zmi_lock_destroy(&b);
#else
	(void)a, (void)b;
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), -EOPNOTSUPP);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_hold_recorded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
