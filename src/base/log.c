/* Messages on stderr; the only place the library writes to a stream. */
#include <stdarg.h>
#include <stdio.h>

#include "base/debug.h"

void zm_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "zmem: %s\n", buf);
}
