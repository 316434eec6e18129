/*
 * Structures a caller allocates can grow: the public headers pass the
 * caller's sizeof to the library (a macro around each call, so that a
 * binary built against older headers passes its older, smaller size).
 *
 * The rule, the same as Linux's for extensible system call arguments:
 *   - a caller's struct smaller than the first published layout is
 *     refused (-EINVAL);
 *   - into the library: fields the caller's struct lacks read as 0 (the
 *     default); a larger struct (newer headers, older library) is
 *     accepted when every byte the library does not know is 0, else
 *     refused with -E2BIG;
 *   - out of the library: the library writes the fields both know and
 *     zeroes the caller's fields it does not know.
 * Fields are only ever added at the end.
 */
#ifndef ZM_BASE_ABI_H
#define ZM_BASE_ABI_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The size of type up to and including member: a published layout's end. */
#define zmi_size_upto(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

/* Copy the caller's src (size bytes; NULL = all defaults) into dst, the
 * library's struct of known bytes.  0, -EINVAL or -E2BIG. */
static inline int zmi_struct_in(void *dst, size_t known, const void *src, size_t size,
				size_t min)
{
	memset(dst, 0, known);
	if (!src)
		return 0;
	if (size < min)
		return -EINVAL;
	for (size_t i = known; i < size; i++)
		if (((const unsigned char *)src)[i])
			return -E2BIG;
	memcpy(dst, src, size < known ? size : known);
	return 0;
}

/* Copy the library's src (known bytes) out to the caller's dst of size
 * bytes.  0, or -EINVAL for a NULL or too small dst. */
static inline int zmi_struct_out(void *dst, size_t size, size_t min, const void *src,
				 size_t known)
{
	if (!dst || size < min)
		return -EINVAL;
	memcpy(dst, src, size < known ? size : known);
	if (size > known)
		memset((char *)dst + known, 0, size - known);
	return 0;
}

#endif
