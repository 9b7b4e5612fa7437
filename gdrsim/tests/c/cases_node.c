/* Cases of the emulated node as the stat family sees it (GDRSIM_DEVICE_NODE,
 * GDRSIM_DEVICE_MAJOR, GDRSIM_DEVICE_MODE, GDRSIM_NO_DEVICE), and of opening each kind. */
#include "sim.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

/* What the settings say the node is. */
struct want {
    int err;           /* errno of stat, 0 when the node exists */
    unsigned mode;     /* st_mode, type included */
    unsigned major;    /* major of st_rdev */
};

static struct want wanted(void)
{
    struct want w = {0, 0, 0};
    if (env_is("GDRSIM_NO_DEVICE", "1")) {
        w.err = ENOENT;
        return w;
    }
    const char *m = getenv("GDRSIM_DEVICE_MODE");
    unsigned perms = m ? (unsigned)strtoul(m, NULL, 8) : 0666;
    const char *mj = getenv("GDRSIM_DEVICE_MAJOR");
    unsigned major = mj ? (unsigned)strtoul(mj, NULL, 10) : 237;
    if (env_is("GDRSIM_DEVICE_NODE", "file")) {
        w.mode = S_IFREG | perms;
        return w;
    }
    if (env_is("GDRSIM_DEVICE_NODE", "stale"))
        major = major == 4095 ? 4094 : major + 1;
    w.mode = S_IFCHR | perms;
    w.major = major;
    return w;
}

/* The checks every stat-like answer must pass: the call's return value r and buffer fields. */
static int matches(const char *how, int r, unsigned mode, unsigned major, unsigned minor,
                   unsigned uid, long long size)
{
    struct want w = wanted();
    if (w.err) {
        if (r == -1 && errno == w.err)
            return 1;
        fprintf(stderr, "    %s: got %d (errno %d), want ENOENT\n", how, r, errno);
        return 0;
    }
    if (r == 0 && mode == w.mode && major == w.major && minor == 0 && uid == 0 && size == 0)
        return 1;
    fprintf(stderr, "    %s: got %d mode %o rdev %u:%u uid %u size %lld, want mode %o major %u\n",
            how, r, mode, major, minor, uid, size, w.mode, w.major);
    return 0;
}

/* Makes the call first (argument evaluation order is unspecified), then checks the buffer. */
#define ST_OK(how, call, sb)                                                                  \
    ({                                                                                        \
        int r_ = (call);                                                                      \
        matches(how, r_, (sb).st_mode, major((sb).st_rdev), minor((sb).st_rdev), (sb).st_uid, \
                (long long)(sb).st_size);                                                     \
    })

/* stat through a pointer, so that the compiler lets a test pass it null arguments. */
static int (*volatile stat_call)(const char *, struct stat *) = stat;

typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*xstat64_fn)(int, const char *, struct stat64 *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
typedef int (*fxstatat64_fn)(int, int, const char *, struct stat64 *, int);

/* Every entry point of the stat family answers for /dev/gdrdrv as the settings say. */
int t_node_stat(void)
{
    const char *dev = "/dev/gdrdrv";
    struct stat sb;
    struct stat64 sb64;
    struct statx sx;
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("stat", stat(dev, &sb), sb));
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("lstat", lstat(dev, &sb), sb));
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("fstatat", fstatat(AT_FDCWD, dev, &sb, 0), sb));
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("fstatat nofollow", fstatat(-1, dev, &sb, AT_SYMLINK_NOFOLLOW), sb));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("stat64", stat64(dev, &sb64), sb64));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("lstat64", lstat64(dev, &sb64), sb64));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("fstatat64", fstatat64(AT_FDCWD, dev, &sb64, 0), sb64));
    memset(&sx, 0xa5, sizeof(sx));
    int r = statx(AT_FDCWD, dev, 0, STATX_BASIC_STATS, &sx);
    CHECK(matches("statx", r, sx.stx_mode, sx.stx_rdev_major, sx.stx_rdev_minor, sx.stx_uid,
                  (long long)sx.stx_size));
    if (r == 0)
        CHECK_EQ(sx.stx_mask & STATX_BASIC_STATS, STATX_BASIC_STATS);

    /* glibc's pre-2.33 entry points, which older binaries still call. */
    xstat_fn xs = (xstat_fn)dlsym(RTLD_DEFAULT, "__xstat");
    xstat_fn lxs = (xstat_fn)dlsym(RTLD_DEFAULT, "__lxstat");
    xstat64_fn xs64 = (xstat64_fn)dlsym(RTLD_DEFAULT, "__xstat64");
    xstat64_fn lxs64 = (xstat64_fn)dlsym(RTLD_DEFAULT, "__lxstat64");
    fxstatat_fn fxs = (fxstatat_fn)dlsym(RTLD_DEFAULT, "__fxstatat");
    fxstatat64_fn fxs64 = (fxstatat64_fn)dlsym(RTLD_DEFAULT, "__fxstatat64");
    REQUIRE(xs && lxs && xs64 && lxs64 && fxs && fxs64);
#if defined(__x86_64__)
    const int ver = 1;
#else
    const int ver = 0;
#endif
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("__xstat", xs(ver, dev, &sb), sb));
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("__lxstat", lxs(ver, dev, &sb), sb));
    memset(&sb, 0xa5, sizeof(sb));
    CHECK(ST_OK("__fxstatat", fxs(ver, AT_FDCWD, dev, &sb, 0), sb));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("__xstat64", xs64(ver, dev, &sb64), sb64));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("__lxstat64", lxs64(ver, dev, &sb64), sb64));
    memset(&sb64, 0xa5, sizeof(sb64));
    CHECK(ST_OK("__fxstatat64", fxs64(ver, AT_FDCWD, dev, &sb64, 0), sb64));

    /* A null buffer is EFAULT, not a crash (where the node exists). */
    if (!env_is("GDRSIM_NO_DEVICE", "1")) {
        CHECK_EQ(stat_call(dev, NULL), -1);
        CHECK_EQ(errno, EFAULT);
    }
    return CASE_PASS;
}

/* Any other path reaches the C library unchanged, through every entry point. */
int t_node_stat_passthrough(void)
{
    struct stat sb, raw;
    struct stat64 sb64;
    struct statx sx;
    CHECK_EQ(syscall(SYS_newfstatat, AT_FDCWD, "/dev/null", &raw, 0), 0);
    CHECK_EQ(stat("/dev/null", &sb), 0);
    CHECK(S_ISCHR(sb.st_mode) && sb.st_rdev == raw.st_rdev && sb.st_ino == raw.st_ino);
    CHECK_EQ(lstat64("/dev/null", &sb64), 0);
    CHECK(sb64.st_ino == raw.st_ino && sb64.st_rdev == raw.st_rdev);
    CHECK_EQ(fstatat(AT_FDCWD, "/dev/null", &sb, 0), 0);
    CHECK_EQ(sb.st_ino, raw.st_ino);
    CHECK_EQ(statx(AT_FDCWD, "/dev/null", 0, STATX_BASIC_STATS, &sx), 0);
    CHECK(sx.stx_rdev_major == 1 && sx.stx_rdev_minor == 3 && sx.stx_ino == raw.st_ino);
    /* relative paths through a directory fd, and AT_EMPTY_PATH on an fd */
    int dir = open("/dev", O_RDONLY | O_DIRECTORY);
    REQUIRE(dir >= 0);
    CHECK_EQ(fstatat(dir, "null", &sb, 0), 0);
    CHECK_EQ(sb.st_ino, raw.st_ino);
    CHECK_EQ(fstatat(dir, "", &sb, AT_EMPTY_PATH), 0);
    CHECK(S_ISDIR(sb.st_mode));
    CHECK_EQ(statx(dir, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx), 0);
    CHECK(S_ISDIR(sx.stx_mode));
    close(dir);
    /* names that only look like the node are not it */
    const char *others[] = {"/dev/gdrdrv1", "/dev/gdrdr", "/dev//gdrdrv/x", "/nonexistent/gdrdrv"};
    for (unsigned k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
        errno = 0;
        int r = stat(others[k], &sb);
        long kr = syscall(SYS_newfstatat, AT_FDCWD, others[k], &raw, 0);
        CHECK_EQ(r, kr);
        CHECK(r == 0 || errno == ENOENT || errno == ENOTDIR);
    }
    errno = 0;
    CHECK_EQ(stat_call(NULL, &sb), -1);
    CHECK(errno == EFAULT || errno == ENOENT);
    return CASE_PASS;
}

/* Opening each kind of node: a working char node, a regular file (no ioctls), and a char
 * node no driver answers (ENXIO, as chrdev_open gives for a major without a driver). */
int t_node_open(void)
{
    int mode_applies = getenv("GDRSIM_DEVICE_MODE") && (env_is("GDRSIM_AS_USER", "1") || geteuid() != 0);
    SKIP_IF(env_is("GDRSIM_NO_DEVICE", "1") || mode_applies || getenv("GDRSIM_FAIL"));
    struct gdrsim_counters c0 = counters();
    struct gdrdrv_get_version_params v;
    if (env_is("GDRSIM_DEVICE_NODE", "file")) {
        int fd = dev_open();
        REQUIRE(fd >= 0);
        CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), ENOTTY);
        struct stat sb;
        CHECK_EQ(fstat(fd, &sb), 0);
        CHECK(S_ISREG(sb.st_mode) && sb.st_size == 0);
        CHECK_EQ(counters().open_files, c0.open_files);
        CHECK_EQ(counters().ioctls, c0.ioctls);
        CHECK_EQ(close(fd), 0);
        return CASE_PASS;
    }
    if (env_is("GDRSIM_DEVICE_NODE", "stale") || env_is("GDRSIM_DEVICE_NODE", "nodriver")) {
        CHECK_EQ(dev_open(), -1);
        CHECK_EQ(errno, ENXIO);
        CHECK_EQ(open("/dev/gdrdrv", O_RDONLY), -1);
        CHECK_EQ(errno, ENXIO);
        CHECK_EQ(openat(AT_FDCWD, "/dev/gdrdrv", O_RDWR), -1);
        CHECK_EQ(errno, ENXIO);
        CHECK_EQ(counters().open_files, c0.open_files);
        return CASE_PASS;
    }
    int fd = dev_open();
    REQUIRE(fd >= 0);
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), 0);
    CHECK_EQ(counters().open_files, c0.open_files + 1);
    CHECK_EQ(close(fd), 0);
    return CASE_PASS;
}
