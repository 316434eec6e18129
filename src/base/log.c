/*
 * The library's messages, and the version.  The only place the library
 * writes to a stream: by default stderr, or the caller's function
 * (zm_set_log), or nowhere.
 *
 * The sink is read without a lock: zm_set_log() is documented as set-up,
 * done before other threads use the library.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include <zmem/common.h>

#define STR_(x) #x
#define STR(x) STR_(x)

unsigned zm_version(void)
{
	return ZMEM_VERSION_NUMBER;
}

const char *zm_version_string(void)
{
	return STR(ZMEM_VERSION_MAJOR) "." STR(ZMEM_VERSION_MINOR) "." STR(ZMEM_VERSION_PATCH);
}

static void to_stderr(void *arg, enum zm_log_level level, const char *msg)
{
	(void)arg, (void)level;
	fprintf(stderr, "zmem: %s\n", msg);
}

enum sink_state { SINK_UNSET, SINK_SET };
static enum sink_state sink_state;  /* UNSET: stderr unless ZMEM_LOG=off */
static zm_log_fn *sink;
static void *sink_arg;

void zm_set_log(zm_log_fn *fn, void *arg)
{
	sink = fn;
	sink_arg = arg;
	sink_state = SINK_SET;
}

void zm_set_log_stderr(void)
{
	zm_set_log(to_stderr, NULL);
}

static zm_log_fn *current_sink(void)
{
	const char *env;

	if (sink_state == SINK_SET)
		return sink;
	env = getenv("ZMEM_LOG");
	if (env && (!strcmp(env, "off") || !strcmp(env, "0") || !strcmp(env, "none")))
		return NULL;
	return to_stderr;
}

void zmi_log_at(enum zm_log_level level, const char *fmt, ...)
{
	zm_log_fn *fn = current_sink();
	char buf[512];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fn(fn == to_stderr ? NULL : sink_arg, level, buf);
}
