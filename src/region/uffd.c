/*
 * The userfaultfd: opening one (with the fallbacks an unprivileged process
 * needs), registering a region with it, and the four ioctls the layer
 * uses.  Every ioctl retries EAGAIN (the kernel answers it while the
 * address space is changing, e.g. during a concurrent mremap or fork).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/debug.h"
#include "region/region_internal.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

static int sys_open(int flags)
{
#ifdef SYS_userfaultfd
	return (int)syscall(SYS_userfaultfd, flags);
#else
	errno = ENOSYS;
	return -1;
#endif
}

int (*zmi_region_uffd_open)(int flags);

static int open_flags(int flags)
{
	int (*f)(int) = __atomic_load_n(&zmi_region_uffd_open, __ATOMIC_RELAXED);
	return f ? f(flags) : sys_open(flags);
}

/* A userfaultfd: the system call, then (refused) the same for user-mode
 * faults only, which vm.unprivileged_userfaultfd = 0 still allows, then
 * /dev/userfaultfd (its permissions are the administrator's grant).
 * wait_mode needs kernel faults too: no user-mode-only fallback. */
static int open_uffd(bool wait_mode)
{
	int base = O_CLOEXEC | O_NONBLOCK, fd, err, dev;

	fd = open_flags(base);
	if (fd >= 0)
		return fd;
	err = errno;
	if (err == ENOSYS) {
		zmi_log_error("zm_region_create: this kernel has no userfaultfd "
			      "(CONFIG_USERFAULTFD)");
		return -ENOSYS;
	}
	if (!wait_mode) {
		fd = open_flags(base | UFFD_USER_MODE_ONLY);
		if (fd >= 0)
			return fd;
	}
	if (__atomic_load_n(&zmi_region_uffd_open, __ATOMIC_RELAXED) == NULL) {
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev >= 0) {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW, base);
			close(dev);
			if (fd >= 0)
				return fd;
		}
	}
	zmi_log_error("zm_region_create: userfaultfd refused (%s): allow it with "
		      "sysctl vm.unprivileged_userfaultfd=1 or read-write access to "
		      "/dev/userfaultfd%s", err == EPERM || err == EACCES ? "no permission"
									   : "error",
		      wait_mode ? " (ZM_REGION_WAIT also needs kernel faults: "
				  "CAP_SYS_PTRACE or the sysctl)" : "");
	return err == ENOSYS ? -ENOSYS : -EPERM;
}

int zmi_region_uffd_setup(void *base, size_t size, bool wait_mode)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)base, .len = size },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	int fd = open_uffd(wait_mode), rc;

	if (fd < 0)
		return fd;
	api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (!wait_mode)
		api.features |= UFFD_FEATURE_SIGBUS;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		rc = errno == EINVAL ? -ENOSYS : -errno;
		zmi_log_error("zm_region_create: userfaultfd lacks %s (Linux 5.7 or later "
			      "is needed)", wait_mode ? "write-protect faults"
						      : "SIGBUS delivery or write-protect faults");
		goto fail;
	}
	if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0) {
		rc = -errno;
		zmi_log_error("zm_region_create: registering %zu bytes with userfaultfd "
			      "failed (errno %d): anonymous write-protection needs Linux 5.7",
			      size, errno);
		if (rc == -EINVAL)
			rc = -ENOSYS;
		goto fail;
	}
	if (!(reg.ioctls & ((uint64_t)1 << _UFFDIO_WRITEPROTECT)) ||
	    !(reg.ioctls & ((uint64_t)1 << _UFFDIO_COPY))) {
		zmi_log_error("zm_region_create: userfaultfd offers no write-protection here");
		rc = -ENOSYS;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

static int uffd_ioctl(int uffd, unsigned long req, void *arg)
{
	for (;;) {
		if (ioctl(uffd, req, arg) == 0)
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

int zmi_region_uffd_copy(int uffd, void *dst, const void *src, size_t len, bool wp, bool wake)
{
	struct uffdio_copy c = {
		.dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = len,
		.mode = (wp ? UFFDIO_COPY_MODE_WP : 0) | (wake ? 0 : UFFDIO_COPY_MODE_DONTWAKE),
	};
	int rc;

	for (;;) {
		c.copy = 0;
		if (ioctl(uffd, UFFDIO_COPY, &c) == 0)
			return 0;
		rc = -errno;
		if (rc == -EAGAIN && c.copy > 0 && (size_t)c.copy < len) {
			/* part copied: go on with the rest */
			c.dst += (uint64_t)c.copy;
			c.src += (uint64_t)c.copy;
			c.len -= (uint64_t)c.copy;
			continue;
		}
		if (rc != -EAGAIN && rc != -EINTR)
			return rc;
	}
}

int zmi_region_uffd_zeropage(int uffd, void *dst, size_t len, bool wake)
{
	struct uffdio_zeropage z = {
		.range = { .start = (uintptr_t)dst, .len = len },
		.mode = wake ? 0 : UFFDIO_ZEROPAGE_MODE_DONTWAKE,
	};
	return uffd_ioctl(uffd, UFFDIO_ZEROPAGE, &z);
}

int zmi_region_uffd_protect(int uffd, void *addr, size_t len, bool wp, bool wake)
{
	struct uffdio_writeprotect w = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = (wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
			(wake || wp ? 0 : UFFDIO_WRITEPROTECT_MODE_DONTWAKE),
	};
	return uffd_ioctl(uffd, UFFDIO_WRITEPROTECT, &w);
}

int zmi_region_uffd_wake(int uffd, void *addr, size_t len)
{
	struct uffdio_range rg = { .start = (uintptr_t)addr, .len = len };
	return uffd_ioctl(uffd, UFFDIO_WAKE, &rg);
}
