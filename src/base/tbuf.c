/*
 * The per-thread scratch buffer (tbuf.h).
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/debug.h"
#include "base/tbuf.h"

static __thread char *tls_buf;
static __thread size_t tls_cap;
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_thread_exit(void *unused)
{
	free(tls_buf);
	tls_buf = NULL;
	tls_cap = 0;
}

static void buf_key_init(void)
{
	pthread_key_create(&buf_key, buf_thread_exit);
}

char *zmi_thread_buf(size_t size)
{
	char *b;

	if (zmi_likely(tls_cap >= size))
		return tls_buf;
	b = realloc(tls_buf, size);
	if (!b)
		return NULL;
	pthread_once(&buf_once, buf_key_init);
	tls_buf = b;
	tls_cap = size;
	pthread_setspecific(buf_key, b); /* non-NULL: the destructor runs */
	return b;
}

