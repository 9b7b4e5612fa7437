/* Cases about processes and threads: fork, fds passed over sockets, per-process GPUs. */
#include "sim.h"

/* D.11: a forked child may not use the parent's file and has none of its mappings. */
int t_fork_child(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h, h2;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h2), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    REQUIRE(p != MAP_FAILED);
    p[0] = 42;
    uint64_t before = counters().ioctls;
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct gdrdrv_get_version_params v;
        if (xioctl(fd, GDRDRV_IOC_GET_VERSION, &v) != EACCES)
            _exit(10);
        /* ownership is checked before the request */
        if (xioctl(fd, _IOWR(GDRDRV_IOCTL_TYPE, 9, uint64_t), &v) != EACCES)
            _exit(11);
        if (pin_v1(fd, d, GPU_PAGE, 0, 0, NULL) != EACCES || unpin(fd, h) != EACCES)
            _exit(12);
        if (map(fd, h2, GPU_PAGE) != MAP_FAILED || errno != EACCES)
            _exit(13);
        if (probe(p, 0, NULL) != SIGSEGV)
            _exit(14);
        if (close(fd) != 0) /* does not release the parent's file */
            _exit(15);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    CHECK_EQ(counters().ioctls, before + 4); /* the child's ioctls reached the driver */
    unsigned char v = 0;
    CHECK_EQ(probe(p, 0, &v), 0);
    CHECK_EQ(v, 42);
    struct gdrdrv_get_info_params i;
    CHECK_EQ(info_v1(fd, h, &i), 0);
    CHECK_EQ(counters().live_pins, 2);
    close(fd);
    return CASE_PASS;
}

/* D.12: an fd received over a unix socket is refused. */
int t_scm_rights(void)
{
    SKIP_IF(device_blocked());
    int sv[2];
    REQUIRE_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char byte;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {&byte, 1};
        struct msghdr m = {0};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf;
        m.msg_controllen = sizeof(cbuf);
        if (recvmsg(sv[1], &m, 0) != 1)
            _exit(20);
        int fd;
        memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
        struct gdrdrv_get_version_params v;
        if (xioctl(fd, GDRDRV_IOC_GET_VERSION, &v) != EACCES)
            _exit(21);
        struct termios t;
        if (xioctl(fd, TCGETS, &t) != EINVAL)
            _exit(22);
        if (map(fd, 0, GPU_PAGE) != MAP_FAILED || errno != EACCES)
            _exit(23);
        _exit(0);
    }
    int fd = dev_open();
    REQUIRE(fd >= 0);
    char byte = 'x';
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = {&byte, 1};
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof(cbuf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    CHECK_EQ(sendmsg(sv[0], &m, 0), 1);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    struct gdrdrv_get_version_params v;
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), 0); /* still fine for the opener */
    close(fd);
    return CASE_PASS;
}

/* D.15: pins, maps, unmaps and unpins from several threads at once. */
static int thread_fd;
static CUdeviceptr thread_buf;

static void *worker(void *arg)
{
    (void)arg;
    for (int k = 0; k < 200; k++) {
        uint64_t h;
        if (pin_v1(thread_fd, thread_buf, 4 * GPU_PAGE, 0, 0, &h))
            return (void *)1;
        volatile unsigned char *p = map(thread_fd, h, 4 * GPU_PAGE);
        if (p == MAP_FAILED)
            return (void *)2;
        p[k] = (unsigned char)k;
        if (p[k] != (unsigned char)k)
            return (void *)3;
        if (munmap((void *)p, 4 * GPU_PAGE) || unpin(thread_fd, h))
            return (void *)4;
    }
    return NULL;
}

int t_threads(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw;
    thread_buf = dalloc_aligned(4 * GPU_PAGE, &raw);
    thread_fd = dev_open();
    REQUIRE(thread_fd >= 0);
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        REQUIRE_EQ(pthread_create(&t[k], NULL, worker, NULL), 0);
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(t[k], &r);
        CHECK(r == NULL);
    }
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.live_mappings, 0);
    close(thread_fd);
    return CASE_PASS;
}

/* Forks while other threads keep calling into the emulator (so that some wait for its locks
 * at the moment of the fork): each child must then use the emulator at once. */
static volatile int busy_stop;
static int busy_fd;

static void *busy_worker(void *arg)
{
    (void)arg;
    struct gdrdrv_get_version_params v;
    for (unsigned n = 0; !busy_stop; n++) {
        if (xioctl(busy_fd, GDRDRV_IOC_GET_VERSION, &v) != 0)
            return (void *)1;
        if (n % 16 == 0 && gdrsim_set_fail("") != 0) /* the fault-injection lock */
            return (void *)2;
    }
    return NULL;
}

int t_fork_busy(void)
{
    SKIP_IF(device_blocked());
    SKIP_IF(getenv("GDRSIM_FAIL") != NULL);
    busy_fd = dev_open();
    REQUIRE(busy_fd >= 0);
    busy_stop = 0;
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        REQUIRE_EQ(pthread_create(&t[k], NULL, busy_worker, NULL), 0);
    int bad = 0;
    for (int round = 0; round < 40 && !bad; round++) {
        usleep(1000);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10); /* a hang ends in SIGALRM */
            struct gdrdrv_get_version_params v;
            int fd = dev_open();
            if (fd < 0 || xioctl(fd, GDRDRV_IOC_GET_VERSION, &v) != 0 || close(fd) != 0)
                _exit(1);
            if (gdrsim_set_fail("") != 0)
                _exit(2);
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "    fork round %d: child status %#x\n", round, st);
            bad = 1;
        }
    }
    busy_stop = 1;
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(t[k], &r);
        CHECK(r == NULL);
    }
    CHECK_EQ(bad, 0);
    close(busy_fd);
    return CASE_PASS;
}

/* Each process has its own fake GPU: a child forked before cuInit gets another one. */
int t_fork_before_init(void)
{
    SKIP_IF(getenv("GDRSIM_FAIL") != NULL);
    int go[2], done[2];
    REQUIRE_EQ(pipe(go), 0);
    REQUIRE_EQ(pipe(done), 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    cuda_up();
    CUdeviceptr d = dalloc(4096);
    if (pid == 0) {
        char c;
        if (read(go[0], &c, 1) != 1) /* the parent has written its memory */
            _exit(1);
        if (cuMemsetD8(d, 0xc0, 4096) != CUDA_SUCCESS)
            _exit(2);
        write(done[1], &d, sizeof(d));
        _exit(0);
    }
    CU(cuMemsetD8(d, 0x0a, 4096));
    CHECK_EQ(write(go[1], "x", 1), 1);
    CUdeviceptr cd;
    CHECK_EQ(read(done[0], &cd, sizeof(cd)), sizeof(cd));
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsigned char v;
    CU(cuMemcpyDtoH(&v, d, 1));
    CHECK_EQ(v, 0x0a); /* the child wrote its own GPU's memory, not ours */
    return CASE_PASS;
}

/* A child that never initialised CUDA cannot pin the parent's memory. */
int t_pin_foreign_memory(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = dev_open();
        _exit(pin_v1(fd, d, GPU_PAGE, 0, 0, NULL) == EINVAL ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return CASE_PASS;
}
