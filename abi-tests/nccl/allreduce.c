/*
 * allreduce - real NCCL on two GPUs, over its network transport, with gdrcopy through this
 * library: the run behind `make test-nccl` (abi-tests/nccl/run.sh sets the environment).
 *
 * Two ranks, one GPU each: by default one process per GPU (the parent forks both ranks before
 * any CUDA or NCCL call; rank 0 makes the ncclUniqueId and hands it to rank 1 through a pipe),
 * or both ranks in this process with ncclCommInitAll (-m all). NCCL's proxy writes the
 * gdrcopy-mapped sync words from the process of the rank it serves in both modes.
 *
 * For every size from -b to -e bytes (8 B to 64 MiB, doubling): an out-of-place int32 sum,
 * whose result is checked element by element on both ranks (each rank's input is a known
 * function of rank, index and size, so every sum is exact; the output is poisoned first), then
 * a warm-up and a timed loop (each iteration launched and synchronised on its own), then the
 * result checked again. Then grouped rounds: -g (256) all-reduces of 1 KiB each in one
 * ncclGroupStart/End, -r (50) times, every sum checked: a launch whose work does not fit the
 * kernel's arguments goes through NCCL's work FIFO, which lives in gdrcopy-mapped memory.
 * Each rank calls ncclCommFinalize and ncclCommDestroy, so NCCL unmaps and unpins what it
 * mapped. A rank that is not done after -t seconds exits with status 124.
 *
 * Prints the table of median and minimum latency per size, then "N passed, N failed" (both
 * ranks' checks together). Exit status 0 when every check passed.
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NRANKS 2
#define MAX_SIZES 64
#define GROUP_BYTES 1024

/* Exit statuses of a rank: checks failed, a CUDA or NCCL call failed, out of time. */
#define EXIT_CHECKS 1
#define EXIT_FATAL 2
#define EXIT_TIMEOUT 124

struct row {
    size_t bytes;
    int iters;
    double median_us;
    double min_us;
    int ok[NRANKS];
};

/* What the ranks report to the parent: shared anonymous memory made before the fork. */
struct shared {
    int passed[NRANKS];
    int failed[NRANKS];
    int nrows;
    struct row rows[MAX_SIZES];
    int group_ok[NRANKS];
    int group_done;
    int nccl_version;
    char gpu[NRANKS][256];
};

static struct {
    const char *mode;
    size_t min_bytes, max_bytes;
    int warmup, iters, group, rounds, timeout;
} opt = {"fork", 8, 64 << 20, 5, 0, 256, 50, 240};

static struct shared *sh;
static char who[16] = "allreduce"; /* how this process's lines start */
static const char *volatile phase = "start";

/* One rank held by this process. */
struct rank {
    int rank;
    ncclComm_t comm;
    cudaStream_t stream;
    int32_t *send, *recv;
    int32_t *host;
};

static void on_alarm(int sig)
{
    (void)sig;
    char msg[160];
    int n = snprintf(msg, sizeof msg, "%s: FAILED: timed out after %d s in %s\n", who,
                     opt.timeout, phase);
    if (n > 0)
        (void)!write(STDOUT_FILENO, msg, (size_t)n);
    _exit(EXIT_TIMEOUT);
}

#define CUDACHECK(call)                                                                    \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            printf("%s: FAILED: %s:%d: %s: %s\n", who, __FILE__, __LINE__, #call,          \
                   cudaGetErrorString(e_));                                                \
            fflush(stdout);                                                                \
            exit(EXIT_FATAL);                                                              \
        }                                                                                  \
    } while (0)

#define NCCLCHECK(call)                                                                    \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) {                                                           \
            printf("%s: FAILED: %s:%d: %s: %s (%s)\n", who, __FILE__, __LINE__, #call,     \
                   ncclGetErrorString(r_), ncclGetLastError(NULL));                        \
            fflush(stdout);                                                                \
            exit(EXIT_FATAL);                                                              \
        }                                                                                  \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Rank r's element i for a run salted with s: small enough that any sum of ranks is exact. */
static int32_t value(int r, size_t i, uint32_t s)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ s * 40503u;
    return (int32_t)((x >> 7) % 100003u) + r * 17 - 50000;
}

static int32_t expected(size_t i, uint32_t s)
{
    int32_t sum = 0;
    for (int r = 0; r < NRANKS; r++)
        sum += value(r, i, s);
    return sum;
}

/* Fills each rank's input at element `at` with `count` values salted with s and poisons the
 * output there. */
static void fill(struct rank *rk, int n, size_t at, size_t count, uint32_t s)
{
    for (int k = 0; k < n; k++) {
        CUDACHECK(cudaSetDevice(rk[k].rank));
        for (size_t i = 0; i < count; i++)
            rk[k].host[i] = value(rk[k].rank, i, s);
        CUDACHECK(cudaMemcpy(rk[k].send + at, rk[k].host, count * 4, cudaMemcpyHostToDevice));
        CUDACHECK(cudaMemset(rk[k].recv + at, 0xa5, count * 4));
    }
}

/* Counts one check of rank r. */
static void tally(int r, int ok)
{
    if (ok)
        sh->passed[r]++;
    else
        sh->failed[r]++;
}

/* Checks each rank's output at element `at`: `count` exact sums salted with s. */
static int verify(struct rank *rk, int n, size_t at, size_t count, uint32_t s, const char *what)
{
    int all = 1;
    for (int k = 0; k < n; k++) {
        CUDACHECK(cudaSetDevice(rk[k].rank));
        CUDACHECK(cudaMemcpy(rk[k].host, rk[k].recv + at, count * 4, cudaMemcpyDeviceToHost));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < count; i++) {
            if (rk[k].host[i] != expected(i, s)) {
                if (bad++ == 0)
                    first = i;
            }
        }
        if (bad) {
            printf("rank %d: FAILED: %s: %zu of %zu sums wrong, first at %zu: got %d, want %d\n",
                   rk[k].rank, what, bad, count, first, rk[k].host[first], expected(first, s));
            fflush(stdout);
            all = 0;
        }
        tally(rk[k].rank, bad == 0);
    }
    return all;
}

/* One all-reduce of `count` int32 at element `at` on every rank held here, to completion. */
static void allreduce(struct rank *rk, int n, size_t at, size_t count)
{
    if (n > 1)
        NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < n; k++) {
        if (n > 1)
            CUDACHECK(cudaSetDevice(rk[k].rank));
        NCCLCHECK(ncclAllReduce(rk[k].send + at, rk[k].recv + at, count, ncclInt32, ncclSum,
                                rk[k].comm, rk[k].stream));
    }
    if (n > 1)
        NCCLCHECK(ncclGroupEnd());
    for (int k = 0; k < n; k++) {
        if (n > 1)
            CUDACHECK(cudaSetDevice(rk[k].rank));
        CUDACHECK(cudaStreamSynchronize(rk[k].stream));
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int iterations(size_t bytes)
{
    if (opt.iters > 0)
        return opt.iters;
    size_t n = (256u << 20) / bytes;
    return n < 10 ? 10 : n > 200 ? 200 : (int)n;
}

/* The sweep, the grouped rounds and the teardown for the ranks held by this process. */
static void run_ranks(struct rank *rk, int n)
{
    size_t max_count = opt.max_bytes / 4;
    size_t group_count = GROUP_BYTES / 4;
    if ((size_t)opt.group * group_count > max_count)
        max_count = (size_t)opt.group * group_count;
    for (int k = 0; k < n; k++) {
        CUDACHECK(cudaSetDevice(rk[k].rank));
        CUDACHECK(cudaStreamCreateWithFlags(&rk[k].stream, cudaStreamNonBlocking));
        CUDACHECK(cudaMalloc((void **)&rk[k].send, max_count * 4));
        CUDACHECK(cudaMalloc((void **)&rk[k].recv, max_count * 4));
        rk[k].host = malloc(max_count * 4);
        if (rk[k].host == NULL) {
            printf("%s: FAILED: out of host memory\n", who);
            exit(EXIT_FATAL);
        }
    }
    int lead = rk[0].rank == 0; /* this process reports the timings */
    double *us = malloc(sizeof(double) * (size_t)(opt.iters > 200 ? opt.iters : 200));
    if (us == NULL) {
        printf("%s: FAILED: out of host memory\n", who);
        exit(EXIT_FATAL);
    }
    int row = 0;
    for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes && row < MAX_SIZES; bytes *= 2, row++) {
        size_t count = bytes / 4;
        uint32_t salt = (uint32_t)row * 977u + 1;
        char what[64];
        snprintf(what, sizeof what, "all-reduce of %zu B", bytes);
        phase = "a checked all-reduce";
        fill(rk, n, 0, count, salt);
        allreduce(rk, n, 0, count);
        int ok = verify(rk, n, 0, count, salt, what);
        phase = "a timed loop";
        int iters = iterations(bytes);
        for (int i = 0; i < opt.warmup; i++)
            allreduce(rk, n, 0, count);
        for (int i = 0; i < iters; i++) {
            double t0 = now_us();
            allreduce(rk, n, 0, count);
            us[i] = now_us() - t0;
        }
        snprintf(what, sizeof what, "all-reduce of %zu B after %d more", bytes,
                 opt.warmup + iters);
        ok &= verify(rk, n, 0, count, salt, what);
        qsort(us, (size_t)iters, sizeof(double), cmp_double);
        for (int k = 0; k < n; k++)
            sh->rows[row].ok[rk[k].rank] = ok;
        if (lead) {
            sh->rows[row].bytes = bytes;
            sh->rows[row].iters = iters;
            sh->rows[row].median_us =
                iters % 2 ? us[iters / 2] : (us[iters / 2 - 1] + us[iters / 2]) / 2;
            sh->rows[row].min_us = us[0];
            sh->nrows = row + 1;
        }
    }
    free(us);

    /* Grouped rounds: -g all-reduces of their own slices in one launch, more work than the
     * kernel's arguments hold (enqueue.cc, finishPlan), so NCCL writes it into its work FIFO. */
    int group_ok = 1;
    phase = "grouped all-reduces";
    for (int round = 0; round < opt.rounds && opt.group > 0; round++) {
        uint32_t salt = 0x9e3779b9u + (uint32_t)round * 131u;
        fill(rk, n, 0, (size_t)opt.group * group_count, salt);
        NCCLCHECK(ncclGroupStart());
        for (int j = 0; j < opt.group; j++) {
            for (int k = 0; k < n; k++) {
                if (n > 1)
                    CUDACHECK(cudaSetDevice(rk[k].rank));
                size_t at = (size_t)j * group_count;
                NCCLCHECK(ncclAllReduce(rk[k].send + at, rk[k].recv + at, group_count, ncclInt32,
                                        ncclSum, rk[k].comm, rk[k].stream));
            }
        }
        NCCLCHECK(ncclGroupEnd());
        for (int k = 0; k < n; k++) {
            CUDACHECK(cudaSetDevice(rk[k].rank));
            CUDACHECK(cudaStreamSynchronize(rk[k].stream));
        }
        char what[64];
        snprintf(what, sizeof what, "grouped round %d", round);
        group_ok &= verify(rk, n, 0, (size_t)opt.group * group_count, salt, what);
    }
    for (int k = 0; k < n; k++)
        sh->group_ok[rk[k].rank] = group_ok;
    sh->group_done = opt.group > 0 && opt.rounds > 0;

    /* Finalize (in one group where this thread holds both ranks), then destroy: NCCL frees
     * its gdrcopy buffers (unmap, unpin) on the way. */
    phase = "teardown";
    if (n > 1)
        NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < n; k++) {
        CUDACHECK(cudaSetDevice(rk[k].rank));
        NCCLCHECK(ncclCommFinalize(rk[k].comm));
    }
    if (n > 1)
        NCCLCHECK(ncclGroupEnd());
    for (int k = 0; k < n; k++) {
        CUDACHECK(cudaSetDevice(rk[k].rank));
        NCCLCHECK(ncclCommDestroy(rk[k].comm));
        CUDACHECK(cudaStreamDestroy(rk[k].stream));
        CUDACHECK(cudaFree(rk[k].send));
        CUDACHECK(cudaFree(rk[k].recv));
        free(rk[k].host);
    }
}

static void describe_gpu(int r)
{
    struct cudaDeviceProp p;
    CUDACHECK(cudaGetDeviceProperties(&p, r));
    snprintf(sh->gpu[r], sizeof sh->gpu[r], "%s", p.name);
}

static void check_devices(void)
{
    int n = 0;
    CUDACHECK(cudaGetDeviceCount(&n));
    if (n < NRANKS) {
        printf("%s: FAILED: %d CUDA device(s) visible, %d needed\n", who, n, NRANKS);
        exit(EXIT_FATAL);
    }
}

/* A rank of its own process. Rank 0 makes the unique id and writes it to `fd`; rank 1 reads
 * it from `fd`. */
static int rank_process(int r, int fd)
{
    snprintf(who, sizeof who, "rank %d", r);
    alarm((unsigned)opt.timeout);
    phase = "initialisation";
    check_devices();
    CUDACHECK(cudaSetDevice(r));
    describe_gpu(r);
    ncclUniqueId id;
    if (r == 0) {
        NCCLCHECK(ncclGetUniqueId(&id));
        if (write(fd, &id, sizeof id) != (ssize_t)sizeof id) {
            printf("rank 0: FAILED: cannot hand the unique id over: %s\n", strerror(errno));
            return EXIT_FATAL;
        }
        NCCLCHECK(ncclGetVersion(&sh->nccl_version));
    } else {
        size_t got = 0;
        while (got < sizeof id) {
            ssize_t k = read(fd, (char *)&id + got, sizeof id - got);
            if (k <= 0) {
                printf("rank 1: FAILED: no unique id from rank 0\n");
                return EXIT_FATAL;
            }
            got += (size_t)k;
        }
    }
    close(fd);
    struct rank rk = {.rank = r};
    phase = "ncclCommInitRank";
    NCCLCHECK(ncclCommInitRank(&rk.comm, NRANKS, id, r));
    run_ranks(&rk, 1);
    fflush(stdout);
    return sh->failed[r] ? EXIT_CHECKS : 0;
}

/* Both ranks in this process. */
static int all_in_one(void)
{
    alarm((unsigned)opt.timeout);
    phase = "initialisation";
    check_devices();
    struct rank rk[NRANKS];
    ncclComm_t comms[NRANKS];
    int devs[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        devs[r] = r;
        describe_gpu(r);
    }
    NCCLCHECK(ncclGetVersion(&sh->nccl_version));
    phase = "ncclCommInitAll";
    NCCLCHECK(ncclCommInitAll(comms, NRANKS, devs));
    for (int r = 0; r < NRANKS; r++) {
        memset(&rk[r], 0, sizeof rk[r]);
        rk[r].rank = r;
        rk[r].comm = comms[r];
    }
    run_ranks(rk, NRANKS);
    return 0;
}

static const char *describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
    else if (WEXITSTATUS(status) == EXIT_TIMEOUT)
        snprintf(buf, len, "timed out");
    else if (WEXITSTATUS(status) == EXIT_FATAL)
        snprintf(buf, len, "a CUDA or NCCL call failed");
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    return buf;
}

/* Forks both ranks and waits for them; a rank that dies takes the other down. */
static int forked(void)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return EXIT_FATAL;
    }
    fflush(stdout);
    pid_t pid[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pid[r] = fork();
        if (pid[r] < 0) {
            perror("fork");
            return EXIT_FATAL;
        }
        if (pid[r] == 0) {
            close(fds[r == 0 ? 0 : 1]);
            exit(rank_process(r, fds[r == 0 ? 1 : 0]));
        }
    }
    close(fds[0]);
    close(fds[1]);
    int bad = 0, left = NRANKS;
    while (left > 0) {
        int status;
        pid_t p = wait(&status);
        if (p < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int r = p == pid[0] ? 0 : 1;
        pid[r] = 0;
        left--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        char why[64];
        printf("rank %d: FAILED: %s\n", r, describe_status(status, why, sizeof why));
        bad = 1;
        if (WIFSIGNALED(status) || WEXITSTATUS(status) != EXIT_CHECKS) {
            /* The other rank waits for this one inside NCCL forever. */
            for (int o = 0; o < NRANKS; o++)
                if (pid[o] > 0)
                    kill(pid[o], SIGKILL);
        }
    }
    return bad;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [-m fork|all] [-b min_bytes] [-e max_bytes] [-w warmup] [-n iters]\n"
            "          [-g grouped_allreduces] [-r grouped_rounds] [-t timeout_s]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "m:b:e:w:n:g:r:t:")) != -1) {
        switch (c) {
        case 'm': opt.mode = optarg; break;
        case 'b': opt.min_bytes = strtoull(optarg, NULL, 0); break;
        case 'e': opt.max_bytes = strtoull(optarg, NULL, 0); break;
        case 'w': opt.warmup = atoi(optarg); break;
        case 'n': opt.iters = atoi(optarg); break;
        case 'g': opt.group = atoi(optarg); break;
        case 'r': opt.rounds = atoi(optarg); break;
        case 't': opt.timeout = atoi(optarg); break;
        default: usage(argv[0]);
        }
    }
    int all = strcmp(opt.mode, "all") == 0;
    if ((!all && strcmp(opt.mode, "fork") != 0) || opt.min_bytes < 4 || opt.min_bytes % 4 ||
        opt.max_bytes < opt.min_bytes || opt.warmup < 0 || opt.iters < 0 || opt.group < 0 ||
        opt.rounds < 0 || opt.timeout <= 0)
        usage(argv[0]);

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return EXIT_FATAL;
    }
    memset(sh, 0, sizeof *sh);
    signal(SIGALRM, on_alarm);
    setvbuf(stdout, NULL, _IOLBF, 0);

    int bad = all ? all_in_one() : forked();

    int v = sh->nccl_version;
    if (v)
        printf("allreduce: NCCL %d.%d.%d, %s, %d ranks on %s and %s\n", v / 10000,
               v / 100 % 100, v % 100,
               all ? "ncclCommInitAll in one process" : "one process a rank", NRANKS,
               sh->gpu[0], sh->gpu[1]);
    printf("allreduce: %10s %6s %11s %11s  %s\n", "bytes", "iters", "median_us", "min_us",
           "sums");
    for (int i = 0; i < sh->nrows; i++) {
        struct row *w = &sh->rows[i];
        int ok = 1;
        for (int r = 0; r < NRANKS; r++)
            ok &= w->ok[r];
        printf("allreduce: %10zu %6d %11.2f %11.2f  %s\n", w->bytes, w->iters, w->median_us,
               w->min_us, ok ? "ok" : "WRONG");
    }
    if (sh->group_done)
        printf("allreduce: grouped: %d rounds of %d all-reduces of %d B in one launch: %s\n",
               opt.rounds, opt.group, GROUP_BYTES,
               sh->group_ok[0] && sh->group_ok[1] ? "ok" : "WRONG");
    int passed = 0, failed = 0;
    for (int r = 0; r < NRANKS; r++) {
        passed += sh->passed[r];
        failed += sh->failed[r];
    }
    if (bad && failed == 0)
        failed = 1; /* a rank died before it could count */
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
