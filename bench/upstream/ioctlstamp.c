/*
 * ioctlstamp.c - a preloadable `ioctl` that notes when the last driver call began and ended,
 * for apiab's split of a call's time (before its driver call, in it, after it).
 *
 * Preloaded ahead of the emulator (LD_PRELOAD="ioctlstamp.so libcuda.so.1"), it is the `ioctl`
 * every library resolves, and it passes each call on to the next definition in the search
 * order (the emulator's, or the C library's over a real gdrdrv). apiab finds the two stamps
 * with dlsym(RTLD_DEFAULT) and reads them after a call that makes exactly one ioctl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>

#include "timing.h"

/* CLOCK_MONOTONIC ns at the entry to and the return from the last ioctl. */
double ioctlstamp_enter, ioctlstamp_exit;

/* The next `ioctl` in the search order, found once, before the program runs. */
static int (*next)(int, unsigned long, void *);

__attribute__((constructor)) static void find_next(void)
{
    *(void **)&next = dlsym(RTLD_NEXT, "ioctl");
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    double enter = now_ns();
    int rc = next(fd, request, arg);
    int saved = errno;
    ioctlstamp_exit = now_ns();
    ioctlstamp_enter = enter;
    errno = saved;
    return rc;
}
