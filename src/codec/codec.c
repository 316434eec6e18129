/*
 * Codecs by name: parse "name[:level]", pick the backend, check every
 * argument once, then dispatch.  Backends live one per file and see only
 * valid input (see codec_internal.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec_internal.h"

/* Every backend of this build; the first is the default. */
static const struct zmi_codec_ops *const backends[] = {
	&zmi_codec_lz4_ops,
	&zmi_codec_zstd_ops,
#ifdef ZM_HAVE_LZO
	&zmi_codec_lzo_ops,
#endif
	&zmi_codec_none_ops,
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

/* Names known to zmem but not compiled into this build. */
static const char *const missing[] = {
#ifndef ZM_HAVE_LZO
	"lzo",
#endif
	NULL,
};

static const char *const names[] = {
	"lz4", "zstd",
#ifdef ZM_HAVE_LZO
	"lzo",
#endif
	"none", NULL,
};

const char *const *zm_codec_list(void)
{
	return names;
}

/* Split "zstd:19" into base name and level; 0 or -EINVAL. */
static int parse_name(const char *name, char *base, int *level)
{
	const char *colon = strchr(name, ':');
	size_t n = colon ? (size_t)(colon - name) : strlen(name);
	char *end;
	long v;

	if (n >= ZM_CODEC_NAME_MAX)
		return -EINVAL;
	memcpy(base, name, n);
	base[n] = '\0';
	*level = 0;
	if (!colon)
		return 0;
	errno = 0;
	v = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || v < INT_MIN || v > INT_MAX)
		return -EINVAL;
	*level = (int)v;
	return 0;
}

static const struct zmi_codec_ops *find(const char *base)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (!strcmp(base, backends[i]->name))
			return backends[i];
	return NULL;
}

int zm_codec_create(const char *name, int level, struct zm_codec **out)
{
	char base[ZM_CODEC_NAME_MAX];
	const struct zmi_codec_ops *ops;
	struct zm_codec *c;
	int name_level, eff, rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!name || !*name)
		name = backends[0]->name;
	if (parse_name(name, base, &name_level)) {
		zmi_bad_input("codec: bad name '%.40s'", name);
		return -EINVAL;
	}
	if (name_level && level && name_level != level) {
		zmi_bad_input("codec: level %d given, name says '%s'", level, name);
		return -EINVAL;
	}
	if (name_level)
		level = name_level;
	ops = find(base);
	if (!ops) {
		for (size_t i = 0; missing[i]; i++)
			if (!strcmp(base, missing[i]))
				return -EOPNOTSUPP;
		zmi_bad_input("codec: unknown codec '%s'", base);
		return -EINVAL;
	}
	if (ops->setup && (rc = ops->setup()) != 0)
		return rc;
	rc = ops->level(level, &eff);
	if (rc) {
		zmi_bad_input("codec: %s does not take level %d", ops->name, level);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ops = ops;
	c->level = eff;
	*out = c;
	return 0;
}

void zm_codec_destroy(struct zm_codec *c)
{
	if (!c)
		return;
	zmi_codec_ws_detach_all(c);
	free(c);
}

static inline bool bad_len(size_t len)
{
	return len == 0 || len > ZM_CODEC_MAX_LEN;
}

int zm_codec_compress(struct zm_codec *c, const void *src, size_t len,
		      void *dst, size_t dst_cap)
{
	struct zmi_codec_ws *ws = NULL;

	if (zmi_unlikely(!c || !src || !dst || bad_len(len)))
		return -EINVAL;
	if (zmi_unlikely(dst_cap == 0))
		return -ENOSPC;
	if (dst_cap > ZM_CODEC_MAX_LEN)
		dst_cap = ZM_CODEC_MAX_LEN;
	if (c->ops->needs_ws && !(ws = zmi_codec_ws_get(c)))
		return -ENOMEM;
	return c->ops->compress(c, ws, src, len, dst, dst_cap);
}

int zm_codec_decompress(struct zm_codec *c, const void *src, size_t len,
			void *dst, size_t dst_len)
{
	struct zmi_codec_ws *ws = NULL;

	if (zmi_unlikely(!c || !src || !dst || bad_len(len) || bad_len(dst_len)))
		return -EINVAL;
	if (c->ops->needs_ws && !(ws = zmi_codec_ws_get(c)))
		return -ENOMEM;
	return c->ops->decompress(c, ws, src, len, dst, dst_len);
}

size_t zm_codec_bound(const struct zm_codec *c, size_t len)
{
	if (!c || len > ZM_CODEC_MAX_LEN)
		return 0;
	return c->ops->bound(len);
}

const char *zm_codec_name(const struct zm_codec *c)
{
	return c ? c->ops->name : NULL;
}

int zm_codec_level(const struct zm_codec *c)
{
	return c ? c->level : -EINVAL;
}
