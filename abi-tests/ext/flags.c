/*
 * flags - host-written GPU memory as its users need it: 1000 8-byte flags from gdrx_alloc(),
 * written by the CPU and checked by the GPU, written by the GPU and checked by the CPU, and
 * what a flag write and a read round trip cost. Runs on the emulator (make test-ext) and on a
 * real GPU with no emulator (make test-gpu, abi-tests/gpu/run.sh).
 *
 * The GPU side: where the CUDA driver can load PTX (a real GPU), tiny kernels loaded with the
 * driver API read every flag into a buffer (ld.volatile), write every flag (st.volatile, then
 * membar.sys), and play ping-pong with the CPU on two flags; elsewhere (the emulator runs no
 * kernels) the copy engine does: cuMemcpyDtoH of each flag, cuMemcpyHtoD and cuMemsetD32.
 *
 * Prints the allocator's backend and memory, then one line per timing (medians over many
 * samples, nanoseconds):
 *   flags: write  gdrx_copy_to 8 B ...          the CPU's cost of a posted flag write (copy, fence)
 *   flags: write  store+sfence 8 B ...          the same with a plain store and a store fence
 *   flags: read   gdrx_copy_from 8 B ...        a read of a flag: one PCIe round trip
 *   flags: ping-pong ...                        (kernel only) CPU writes a flag, a GPU thread
 *                                               sees it and writes another, the CPU sees that
 * Usage: flags [N [SAMPLES]]   (defaults 1000, 2000)
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include "ext.h"
#include "gpu.h"

static const char ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    /* out[i] = *ptrs[i], read by the GPU: the CPU's writes as the GPU sees them. */
    ".visible .entry gather(.param .u64 g_ptrs, .param .u64 g_out, .param .u32 g_n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [g_ptrs];\n"
    "  ld.param.u64 %rd2, [g_out];\n"
    "  ld.param.u32 %r1, [g_n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.u32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n"
    "  @%p1 bra G_DONE;\n"
    "  mul.wide.u32 %rd3, %r5, 8;\n"
    "  add.s64 %rd4, %rd1, %rd3;\n"
    "  ld.global.u64 %rd5, [%rd4];\n"
    "  ld.volatile.global.u64 %rd6, [%rd5];\n"
    "  add.s64 %rd7, %rd2, %rd3;\n"
    "  st.global.u64 [%rd7], %rd6;\n"
    "G_DONE:\n"
    "  ret;\n"
    "}\n"
    "\n"
    /* *ptrs[i] = vals[i], written by the GPU and made visible to the system. */
    ".visible .entry scatter(.param .u64 s_ptrs, .param .u64 s_vals, .param .u32 s_n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [s_ptrs];\n"
    "  ld.param.u64 %rd2, [s_vals];\n"
    "  ld.param.u32 %r1, [s_n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.u32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n"
    "  @%p1 bra S_DONE;\n"
    "  mul.wide.u32 %rd3, %r5, 8;\n"
    "  add.s64 %rd4, %rd1, %rd3;\n"
    "  ld.global.u64 %rd5, [%rd4];\n"
    "  add.s64 %rd7, %rd2, %rd3;\n"
    "  ld.global.u64 %rd6, [%rd7];\n"
    "  st.volatile.global.u64 [%rd5], %rd6;\n"
    "  membar.sys;\n"
    "S_DONE:\n"
    "  ret;\n"
    "}\n"
    "\n"
    /* For i = 1..iters: wait until *a == i (at most `limit` polls; all ones: stop), then
     * *b = i. */
    ".visible .entry pingpong(.param .u64 p_a, .param .u64 p_b, .param .u32 p_iters,\n"
    "                         .param .u64 p_limit)\n"
    "{\n"
    "  .reg .pred %p<3>;\n"
    "  .reg .b32 %r<3>;\n"
    "  .reg .b64 %rd<7>;\n"
    "  ld.param.u64 %rd1, [p_a];\n"
    "  ld.param.u64 %rd2, [p_b];\n"
    "  ld.param.u32 %r1, [p_iters];\n"
    "  ld.param.u64 %rd3, [p_limit];\n"
    "  mov.u32 %r2, 1;\n"
    "P_LOOP:\n"
    "  setp.gt.u32 %p1, %r2, %r1;\n"
    "  @%p1 bra P_DONE;\n"
    "  cvt.u64.u32 %rd4, %r2;\n"
    "  mov.u64 %rd5, 0;\n"
    "P_WAIT:\n"
    "  ld.volatile.global.u64 %rd6, [%rd1];\n"
    "  setp.eq.u64 %p1, %rd6, 0xFFFFFFFFFFFFFFFF;\n"
    "  @%p1 bra P_DONE;\n"
    "  setp.eq.u64 %p2, %rd6, %rd4;\n"
    "  @%p2 bra P_SEEN;\n"
    "  add.s64 %rd5, %rd5, 1;\n"
    "  setp.ge.u64 %p1, %rd5, %rd3;\n"
    "  @%p1 bra P_DONE;\n"
    "  bra P_WAIT;\n"
    "P_SEEN:\n"
    "  st.volatile.global.u64 [%rd2], %rd4;\n"
    "  membar.sys;\n"
    "  add.u32 %r2, %r2, 1;\n"
    "  bra P_LOOP;\n"
    "P_DONE:\n"
    "  ret;\n"
    "}\n";

/* The module functions, where the driver has them (dlsym: the emulator does not). */
typedef CUresult (*load_fn)(CUmodule *, const void *);
typedef CUresult (*get_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
static launch_fn launch;
static CUfunction k_gather, k_scatter, k_pingpong;

static int load_kernels(void)
{
    if (gdrsim_present()) {
        printf("flags: the emulator runs no kernels: the GPU side is the copy engine\n");
        return 0;
    }
    load_fn load = (load_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cuModuleLoadData");
    get_fn get = (get_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cuModuleGetFunction");
    launch = (launch_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cuLaunchKernel");
    CUmodule mod;
    CUresult r = load && get && launch ? load(&mod, ptx) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS)
        r = get(&k_gather, mod, "gather");
    if (r == CUDA_SUCCESS)
        r = get(&k_scatter, mod, "scatter");
    if (r == CUDA_SUCCESS)
        r = get(&k_pingpong, mod, "pingpong");
    if (r != CUDA_SUCCESS) {
        printf("flags: no PTX kernels (CUDA error %d): the GPU side is the copy engine\n", (int)r);
        return 0;
    }
    printf("flags: the GPU side is PTX kernels (ld.volatile, st.volatile + membar.sys)\n");
    return 1;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and 10th/90th percentiles of `n` samples (sorted in place). */
static void report(const char *what, double *s, int n)
{
    qsort(s, (size_t)n, sizeof(double), by_value);
    printf("flags: %-40s median %8.1f ns  (p10 %.1f, p90 %.1f; %d samples)\n", what, s[n / 2],
           s[n / 10], s[n - 1 - n / 10], n);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int samples = argc > 2 ? atoi(argv[2]) : 2000;
    REQUIRE(n > 0 && samples > 10);
    gpu_init();
    int kernels = load_kernels();
    struct left before = counted();

    gdrx_t x;
    int rc = gdrx_open(&x, 0, 0);
    if (rc != 0)
        printf("gdrx_open: %d (%s)\n", rc, strerror(rc));
    REQUIRE(rc == 0);
    gdrx_mem_t *f = calloc((size_t)n, sizeof(*f));
    uint64_t *want = calloc((size_t)n, 8), *got = calloc((size_t)n, 8), *ptrs = calloc((size_t)n, 8);
    REQUIRE(f && want && got && ptrs);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(gdrx_alloc(x, 8, 0, &f[i]), 0);
        ptrs[i] = f[i].dev_ptr;
    }
    gdrx_info_t in;
    CHECK_EQ(gdrx_info(x, &in), 0);
    static const char *const backends[] = {"gdrdrv", "dma-buf", "vulkan"};
    printf("flags: %d flags, %zu pin(s) of %zu KiB, backend %s, memory %s, mapping %s\n", n,
           in.pins, in.bytes_pinned >> 10, in.backend >= 0 && in.backend < 3 ? backends[in.backend] : "?",
           in.memory == GDRX_MEMORY_CUMEMCREATE ? "cuMemCreate" : "cuMemAlloc",
           in.mapping_type == 1 ? "write-combining" : in.mapping_type == 2 ? "cached" : "?");
    if ((size_t)n * 64 <= in.chunk_size)
        CHECK_EQ(in.pins, 1);

    CUdeviceptr d_ptrs = 0, d_buf = 0;
    if (kernels) {
        REQUIRE(cuMemAlloc(&d_ptrs, (size_t)n * 8) == CUDA_SUCCESS);
        REQUIRE(cuMemAlloc(&d_buf, (size_t)n * 8) == CUDA_SUCCESS);
        REQUIRE(cuMemcpyHtoD(d_ptrs, ptrs, (size_t)n * 8) == CUDA_SUCCESS);
    }
    unsigned blocks = ((unsigned)n + 255) / 256;
    unsigned un = (unsigned)n;

    for (unsigned round = 1; round <= 3; round++) {
        /* The CPU writes every flag, the GPU checks each. */
        for (int i = 0; i < n; i++) {
            want[i] = pattern((unsigned)i, round);
            if (i & 1)
                CHECK_EQ(gdrx_copy_to(&f[i], 0, &want[i], 8), 0);
            else
                *(volatile uint64_t *)f[i].cpu_ptr = want[i];
        }
        store_fence();
        memset(got, 0, (size_t)n * 8);
        if (kernels) {
            void *args[] = {&d_ptrs, &d_buf, &un};
            CHECK_EQ(launch(k_gather, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
            CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
            CHECK_EQ(cuMemcpyDtoH(got, d_buf, (size_t)n * 8), CUDA_SUCCESS);
        } else {
            for (int i = 0; i < n; i++)
                got[i] = gpu_read64(f[i].dev_ptr);
        }
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += got[i] != want[i];
        if (bad)
            printf("round %u: the GPU read %d of %d CPU-written flags wrong\n", round, bad, n);
        CHECK_EQ(bad, 0);

        /* The GPU writes every flag, the CPU checks each. */
        for (int i = 0; i < n; i++)
            want[i] = ~pattern((unsigned)i, round);
        if (kernels) {
            void *args[] = {&d_ptrs, &d_buf, &un};
            CHECK_EQ(cuMemcpyHtoD(d_buf, want, (size_t)n * 8), CUDA_SUCCESS);
            CHECK_EQ(launch(k_scatter, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
            CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
        } else {
            for (int i = 0; i < n; i++) {
                if (i % 2)
                    CHECK_EQ(cuMemcpyHtoD((CUdeviceptr)f[i].dev_ptr, &want[i], 8), CUDA_SUCCESS);
                else {
                    CHECK_EQ(cuMemsetD32((CUdeviceptr)f[i].dev_ptr, (unsigned)want[i], 1), CUDA_SUCCESS);
                    CHECK_EQ(cuMemsetD32((CUdeviceptr)f[i].dev_ptr + 4, (unsigned)(want[i] >> 32), 1),
                             CUDA_SUCCESS);
                }
            }
            CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
        }
        bad = 0;
        for (int i = 0; i < n; i++) {
            uint64_t v = 0;
            if (i & 1) {
                CHECK_EQ(gdrx_copy_from(&f[i], 0, &v, 8), 0);
            } else {
                v = *(volatile uint64_t *)f[i].cpu_ptr;
                load_fence();
            }
            bad += v != want[i];
        }
        if (bad)
            printf("round %u: the CPU read %d of %d GPU-written flags wrong\n", round, bad, n);
        CHECK_EQ(bad, 0);
    }

    /* Timings. */
    double *s = calloc((size_t)samples, sizeof(double));
    REQUIRE(s != NULL);
    enum { WBATCH = 32, RBATCH = 8 };
    uint64_t v = 0;
    for (int k = 0; k < samples; k++) {
        double t0 = now_ns();
        for (int j = 0; j < WBATCH; j++) {
            v++;
            gdrx_copy_to(&f[j % n], 0, &v, 8);
        }
        s[k] = (now_ns() - t0) / WBATCH;
    }
    report("write  gdrx_copy_to 8 B (posted)", s, samples);
    for (int k = 0; k < samples; k++) {
        double t0 = now_ns();
        for (int j = 0; j < WBATCH; j++) {
            *(volatile uint64_t *)f[j % n].cpu_ptr = ++v;
            store_fence();
        }
        s[k] = (now_ns() - t0) / WBATCH;
    }
    report("write  store+sfence 8 B (posted)", s, samples);
    uint64_t sink = 0;
    for (int k = 0; k < samples; k++) {
        double t0 = now_ns();
        for (int j = 0; j < RBATCH; j++) {
            uint64_t r = 0;
            gdrx_copy_from(&f[j % n], 0, &r, 8);
            sink += r;
        }
        s[k] = (now_ns() - t0) / RBATCH;
    }
    report("read   gdrx_copy_from 8 B (round trip)", s, samples);
    for (int k = 0; k < samples; k++) {
        double t0 = now_ns();
        for (int j = 0; j < RBATCH; j++) {
            sink += *(volatile uint64_t *)f[j % n].cpu_ptr;
            load_fence();
        }
        s[k] = (now_ns() - t0) / RBATCH;
    }
    report("read   load+lfence 8 B (round trip)", s, samples);
    (void)sink;

    if (kernels && n >= 2) {
        /* Ping-pong on flags 0 (CPU -> GPU) and 1 (GPU -> CPU). */
        uint64_t zero = 0;
        unsigned iters = (unsigned)samples;
        unsigned long long limit = 1ULL << 32;
        CHECK_EQ(gdrx_copy_to(&f[0], 0, &zero, 8), 0);
        CHECK_EQ(gdrx_copy_to(&f[1], 0, &zero, 8), 0);
        void *args[] = {&f[0].dev_ptr, &f[1].dev_ptr, &iters, &limit};
        CHECK_EQ(launch(k_pingpong, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
        volatile uint64_t *a = f[0].cpu_ptr, *b = f[1].cpu_ptr;
        int lost = 0;
        for (unsigned i = 1; i <= iters && !lost; i++) {
            double t0 = now_ns();
            *a = i;
            store_fence();
            while (*b != i)
                if (now_ns() - t0 > 2e9) {
                    printf("ping-pong: no answer to %u within 2 s\n", i);
                    lost = 1;
                    break;
                }
            s[i - 1] = now_ns() - t0;
        }
        CHECK_EQ(lost, 0);
        if (lost) {
            uint64_t stop = ~0ULL;
            gdrx_copy_to(&f[0], 0, &stop, 8);
        }
        CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
        if (!lost)
            report("ping-pong CPU->GPU->CPU (kernel)", s, samples);
    }

    for (int i = 0; i < n; i++)
        CHECK_EQ(gdrx_free(x, &f[i]), 0);
    CHECK_EQ(gdrx_info(x, &in), 0);
    CHECK_EQ(in.pins, 0);
    CHECK_EQ(gdrx_close(x), 0);
    if (kernels) {
        cuMemFree(d_ptrs);
        cuMemFree(d_buf);
    }
    CHECK(nothing_left("flags", before, counted()));
    free(s);
    free(f);
    free(want);
    free(got);
    free(ptrs);
    return check_done("flags");
}
