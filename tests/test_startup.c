/*
 * What the first pool of a process pays, and where: registering for the
 * expedited private membarrier (which the compactor's barrier needs)
 * takes the kernel a grace period once the process has threads, 13-15 ms
 * here.  It must happen when a pool or a pages instance is created, not
 * inside the first put or map that sets a hazard, or the first trim.  A
 * process of its own (this binary), so that nothing registered it before
 * the tests look.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <zmem/zmem.h>

/* (linux/membarrier.h of Debian 12 has neither: kernel 6.3's query of
 * what the process registered, and the bit it answers for the command) */
#define CMD_GET_REGISTRATIONS (1 << 9)
#define REG_PRIVATE_EXPEDITED (1 << 4)

static long registrations(void)
{
	return syscall(__NR_membarrier, CMD_GET_REGISTRATIONS, 0, 0);
}

static void *idle_thread(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

/* In a child (this process not registered yet): a pages instance alone
 * registers too (its caches' steal runs the barrier). */
static void pages_create_registers(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	if (registrations() < 0) {
		skip();
		return;
	}
	assert_false(registrations() & REG_PRIVATE_EXPEDITED);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct zm_pages *pg = NULL;
		pthread_t t;
		int ok;

		if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
			_exit(2);
		ok = zm_pages_create(NULL, &pg) == 0 &&
		     (registrations() & REG_PRIVATE_EXPEDITED);
		zm_pages_destroy(pg);
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void create_registers(void **state)
{
	struct zm_pool *p = NULL;
	pthread_t t;
	long r = registrations();
	zm_handle_t h;
	void *m;

	(void)state;
	if (r < 0) {
		/* a kernel before 6.3, or a tool that hides the call */
		skip();
		return;
	}
	assert_false(r & REG_PRIVATE_EXPEDITED);  /* a fresh process */
	/* a second thread: what makes the registration slow */
	assert_int_equal(pthread_create(&t, NULL, idle_thread, NULL), 0);
	assert_int_equal(zm_pool_create(&(struct zm_pool_config){ .allocator = "zsmalloc" }, &p),
			 0);
	assert_true(registrations() & REG_PRIVATE_EXPEDITED);
	/* and the pool works as ever */
	h = zm_pool_alloc(p, 100);
	assert_true(h != 0);
	m = zm_pool_map(p, h, ZM_MAP_WO);
	assert_non_null(m);
	memset(m, 0x5a, 100);
	zm_pool_unmap(p, h);
	zm_pool_free(p, h);
	zm_pool_destroy(p);
	pthread_cancel(t);
	pthread_join(t, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pages_create_registers),  /* first: forks unregistered */
		cmocka_unit_test(create_registers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
