/* Lazy arrays (lazy.h). */
#include <errno.h>

#include "base/lazy.h"
#include "base/os.h"

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

int zmi_lazy_init(struct zmi_lazy *a, uint64_t n, size_t elem)
{
	size_t os_page = zmi_os_page_size();
	uint64_t pages;

	*a = (struct zmi_lazy){ 0 };
	a->page_shift = (unsigned)(__builtin_ctzl(os_page) - __builtin_ctzl(elem));
	a->bytes = round_up((size_t)n * elem, os_page);
	pages = a->bytes / os_page;
	a->map_bytes = round_up((size_t)(pages + 63) / 64 * sizeof(uint64_t), os_page);
	a->base = zmi_os_reserve(a->bytes, os_page);
	a->map = zmi_os_reserve(a->map_bytes, os_page);
	if (!a->base || !a->map) {
		zmi_lazy_fini(a);
		return -ENOMEM;
	}
	return 0;
}

void zmi_lazy_fini(struct zmi_lazy *a)
{
	zmi_os_release(a->base, a->bytes);
	zmi_os_release(a->map, a->map_bytes);
	a->base = NULL;
	a->map = NULL;
}

uint64_t zmi_lazy_next(const struct zmi_lazy *a, uint64_t i, uint64_t end)
{
	while (i < end) {
		uint64_t page = i >> a->page_shift;
		uint64_t w = __atomic_load_n(&a->map[page / 64], __ATOMIC_RELAXED) >> (page % 64);

		if (w & 1)
			return i;
		/* the next set bit of this word, or the next word */
		page = w ? page + (uint64_t)__builtin_ctzll(w) : (page / 64 + 1) * 64;
		i = page << a->page_shift;
	}
	return end;
}

uint64_t zmi_lazy_bytes(const struct zmi_lazy *a)
{
	/* the bitmap: as much of it as the array can have marked */
	size_t words = ((a->bytes / zmi_os_page_size()) + 63) / 64;

	return __atomic_load_n(&a->pages, __ATOMIC_RELAXED) * zmi_os_page_size() +
	       words * sizeof(uint64_t);
}
