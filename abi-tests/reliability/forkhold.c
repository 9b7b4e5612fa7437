/*
 * forkhold.c - fork while another thread is inside a call on the same gdr_t.
 *
 * A thread's driver call is held in the middle (this program defines ioctl() itself, which comes
 * before the emulator's in symbol lookup, and holds the call of one chosen thread until released;
 * the real call then goes on to the emulator through RTLD_NEXT). While it is held, the main
 * thread forks. The child's calls on the parent's gdr_t must fail at once with EACCES, whatever
 * state the held call left the gdr_t's locks in: the thread holding them does not exist in the
 * child. A child that does not finish within CHILD_TIMEOUT seconds is stuck.
 *
 * Case 1: the held call is gdr_driver_get_version (GET_VERSION ioctl) on g.
 * Case 2: the held call is gdr_close on g with a buffer pinned (its UNPIN_BUFFER ioctl).
 * In each case the child calls gdr_driver_get_version, gdr_pin_buffer_v2 and gdr_close on g.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gpu.h"

#define CHILD_TIMEOUT 10

typedef int (*ioctl_fn)(int, unsigned long, void *);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t hold_thread;
static int hold_armed, held, released;

/* Every ioctl of the process comes here first. */
int ioctl(int fd, unsigned long req, ...)
{
    static ioctl_fn next;
    va_list ap;
    void *arg;
    va_start(ap, req);
    arg = va_arg(ap, void *);
    va_end(ap);
    if (next == NULL)
        next = (ioctl_fn)(uintptr_t)dlsym(RTLD_NEXT, "ioctl");
    pthread_mutex_lock(&mu);
    if (hold_armed && pthread_equal(pthread_self(), hold_thread)) {
        hold_armed = 0;
        held = 1;
        pthread_cond_broadcast(&cv);
        while (!released)
            pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    return next(fd, req, arg);
}

struct job {
    gdr_t g;
    int kind; /* 1: driver version, 2: close */
    int rc;
};

static void *holder(void *p)
{
    struct job *j = p;
    int major, minor;
    j->rc = j->kind == 1 ? gdr_driver_get_version(j->g, &major, &minor) : gdr_close(j->g);
    return NULL;
}

static void run_case(int kind, unsigned long base)
{
    struct job j;
    pthread_t t;
    gdr_mh_t mh;
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    REQUIRE(gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &mh) == 0);
    j.g = g;
    j.kind = kind;
    j.rc = -1;
    pthread_mutex_lock(&mu);
    held = released = 0;
    hold_armed = 1;
    REQUIRE(pthread_create(&t, NULL, holder, &j) == 0);
    hold_thread = t;
    while (!held)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    /* The holder is inside the library, in its driver call. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int major, minor, bad = 0;
        gdr_mh_t out;
        alarm(CHILD_TIMEOUT);
        bad |= (gdr_driver_get_version(g, &major, &minor) != EACCES) << 0;
        bad |= (gdr_pin_buffer_v2(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &out) != EACCES) << 1;
        bad |= (gdr_close(g) != EACCES) << 2;
        _exit(bad);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        printf("case %d: the child was stuck in the library (killed by signal %d after %d s)\n",
               kind, WTERMSIG(status), CHILD_TIMEOUT);
    else if (WEXITSTATUS(status))
        printf("case %d: the child's calls returned other than EACCES (mask %#x)\n", kind,
               WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    CHECK_EQ(j.rc, 0);
    if (kind == 1) {
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
        CHECK_EQ(gdr_close(g), 0);
    }
}

int main(void)
{
    gpu_init();
    unsigned long base = gpu_aligned(gpu_alloc(4 * GPU_PAGE_SIZE));
    run_case(1, base);
    run_case(2, base);
    return check_done("forkhold");
}
