/*
 * check.h - the assertion harness of the project's C test programs: the suites of abi-tests/
 * (the C ABI suite, the backends', reliability, host-written memory, the GPU sweep, the
 * package smoke test), the emulator's cases (gdrsim/tests/c, which add check_cases.h) and
 * real-VRAM checks (gdrsim/tests/vkreal.c), and UCX's uct_gdr_check (ucx/). Header only.
 *
 * One meaning for each word, in every program:
 *
 *   CHECK(cond), CHECK_EQ(actual, expected)
 *       An assertion. It counts a pass, or prints "file:line: FAILED: ..." and counts a
 *       failure; either way the program (or case) goes on, so that one run reports every
 *       broken assertion.
 *   REQUIRE(cond), REQUIRE_EQ(actual, expected)
 *       A precondition of what follows (a descriptor, a mapping, a pointer the next lines
 *       use), not an assertion: one that holds counts nothing. One that fails prints and
 *       counts a failure as CHECK does, and ends the case it is in (check_cases.h), or outside
 *       a case the program, which prints its summary and exits with status 1.
 *   check_read_faults(addr)
 *       The signal a one-byte read of addr raises (SIGSEGV, SIGBUS), or 0 when it reads:
 *       whether a mapping is still there. One thread at a time; in programs that define
 *       _GNU_SOURCE.
 *   check_done(name)
 *       Prints NAME and the summary line "N passed, N failed" (the line run-all.sh, the
 *       suites' scripts, vm/tests.sh and CI read); returns the exit status, 0 when nothing
 *       failed.
 *
 * The counts are one set per process, also when several translation units include this
 * header, and may be updated from any thread. In a case run by check_cases.h they live in a
 * page shared with the runner (and with any process the case forks), so that a case that dies
 * still has its checks counted.
 *
 * GDRAPI_CHECK_TRACE=1: every check also prints "check-trace: FILE:LINE P|F", so that runs on
 * two drivers (the emulator, the real module in vm/) can be compared check by check
 * (vm/diff-emulator.sh).
 *
 * OURS(): true when the harness runs the program against this project's library
 * (GDRAPI_TEST_OURS=1). Assertions on behaviour where the project deliberately differs from
 * gdrcopy 2.6 (validated handles instead of a crash, bounds-checked copies, ...) run only
 * then, so the same programs also prove their other assertions against the original library.
 */
#ifndef GDRAPI_ABI_CHECK_H
#define GDRAPI_ABI_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct check_counts {
    unsigned long passed, failed;
};

struct check_state {
    struct check_counts own;     /* the counts of a program */
    struct check_counts *counts; /* where checks count: NULL (own) or a case's shared page */
    int in_case;                 /* a failed REQUIRE ends the case, not the program */
};

/* One state per program: a weak definition, which the linker merges across the translation
 * units that include this header. */
__attribute__((weak)) struct check_state check_state;

static inline struct check_counts *check_counts(void)
{
    return check_state.counts != NULL ? check_state.counts : &check_state.own;
}

static inline int check_done(const char *name);

/* Whether GDRAPI_CHECK_TRACE=1 (read once). */
static inline int check_tracing(void)
{
    static int trace = -1;
    int t = __atomic_load_n(&trace, __ATOMIC_RELAXED);
    if (t < 0) {
        const char *v = getenv("GDRAPI_CHECK_TRACE");
        t = v != NULL && strcmp(v, "1") == 0;
        __atomic_store_n(&trace, t, __ATOMIC_RELAXED);
    }
    return t;
}

/* Counts one outcome (and traces it); errno is left as it was, for the next check. */
static inline void check_count(int ok, const char *file, int line)
{
    int saved = errno;
    if (check_tracing()) {
        fprintf(stdout, "check-trace: %s:%d %s\n", file, line, ok ? "P" : "F");
        fflush(stdout);
    }
    __atomic_fetch_add(ok ? &check_counts()->passed : &check_counts()->failed, 1, __ATOMIC_RELAXED);
    errno = saved;
}

/* One outcome of a check of a condition; a failure prints `what`. */
static inline void check_report(int ok, const char *file, int line, const char *what)
{
    int saved = errno;
    check_count(ok, file, line);
    if (!ok) {
        fprintf(stdout, "%s:%d: FAILED: %s\n", file, line, what);
        fflush(stdout);
    }
    errno = saved;
}

/* One outcome of a comparison; a failure prints both values. */
static inline void check_report_eq(long long actual, long long expected, const char *file, int line,
                                  const char *prefix, const char *astr, const char *estr)
{
    int ok = actual == expected;
    int saved = errno;
    check_count(ok, file, line);
    if (!ok) {
        fprintf(stdout, "%s:%d: FAILED: %s%s == %s (got %lld / 0x%llx, want %lld)\n", file, line,
                prefix, astr, estr, actual, (unsigned long long)actual, expected);
        fflush(stdout);
    }
    errno = saved;
}

/* The exit status of a case that a failed REQUIRE ended (check_cases.h). */
#define CHECK_REQUIRE_STATUS 76

/* A failed REQUIRE: ends the case or the program. */
__attribute__((noreturn)) static inline void check_require_failed(const char *file)
{
    if (check_state.in_case)
        exit(CHECK_REQUIRE_STATUS);
    exit(check_done(file));
}

#define CHECK(cond) check_report(!!(cond), __FILE__, __LINE__, #cond)

/* (actual is evaluated before expected, as in a statement: expected may read what it did) */
#define CHECK_EQ(actual, expected)                                                          \
    do {                                                                                    \
        long long check_a_ = (long long)(actual);                                           \
        long long check_e_ = (long long)(expected);                                         \
        check_report_eq(check_a_, check_e_, __FILE__, __LINE__, "", #actual, #expected);    \
    } while (0)

/* A failed precondition: report it and end the case, or the program. */
#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            check_report(0, __FILE__, __LINE__, "precondition: " #cond);                    \
            check_require_failed(__FILE__);                                                 \
        }                                                                                   \
    } while (0)

#define REQUIRE_EQ(actual, expected)                                                        \
    do {                                                                                    \
        long long check_a_ = (long long)(actual);                                           \
        long long check_e_ = (long long)(expected);                                         \
        if (check_a_ != check_e_) {                                                         \
            check_report_eq(check_a_, check_e_, __FILE__, __LINE__, "precondition: ",       \
                            #actual, #expected);                                            \
            check_require_failed(__FILE__);                                                 \
        }                                                                                   \
    } while (0)

static inline int check_env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    return atoi(v);
}

/* Running against this project's library (not the original)? */
static inline int OURS(void)
{
    return check_env_flag("GDRAPI_TEST_OURS", 0) != 0;
}

/* Emulator settings, read from the same variables the emulator reads. */

/* Minor number of the emulated gdrdrv (GDRSIM_DRIVER_VERSION=2.N; default 2.6). */
static inline int sim_driver_minor(void)
{
    const char *v = getenv("GDRSIM_DRIVER_VERSION");
    const char *dot = v ? strchr(v, '.') : NULL;
    return dot ? atoi(dot + 1) : 6;
}

/* Pins are persistent: GDRSIM_PERSISTENT (default 1) and a driver of 2.5 or
 * later (older drivers only had non-persistent pins). */
static inline int sim_persistent(void)
{
    return check_env_flag("GDRSIM_PERSISTENT", 1) != 0 && sim_driver_minor() >= 5;
}

static inline int sim_coherent(void)
{
    const char *v = getenv("GDRSIM_PROFILE");
    return v != NULL && strcmp(v, "coherent") == 0;
}

/* Running against the real gdrdrv module (the emulator's GDRSIM_BACKING=kernel, in the VM of
 * vm/): the emulator sees no driver call there, so it can fail none. */
static inline int sim_real_driver(void)
{
    const char *v = getenv("GDRSIM_BACKING");
    return v != NULL && strcmp(v, "kernel") == 0;
}

/* Whether a case that needs the emulated driver (fault injection) runs; says so when not. */
static inline int emulated_driver(const char *what)
{
    if (!sim_real_driver())
        return 1;
    printf("skipped on the real driver: %s\n", what);
    return 0;
}

/* struct gdr's cache_backend (a u32 in upstream's layout) and its values: gdrdrv, DMA-BUF, and
 * this library's Vulkan import (gdrapi-abi's gdr::CACHE_BACKEND_*, which abi/tests/gdr_header.rs
 * compares with these). The backends other than gdrdrv reach the GPU through CUDA, which a
 * forked child of a process that initialised it cannot use. */
#define GDR_CACHE_BACKEND_OFFSET 40
#define GDR_CACHE_BACKEND_GDRDRV 0u
#define GDR_CACHE_BACKEND_DMABUF 1u
#define GDR_CACHE_BACKEND_VULKAN 2u

static inline unsigned gdr_cache_backend(const void *g)
{
    unsigned v;
    memcpy(&v, (const char *)g + GDR_CACHE_BACKEND_OFFSET, sizeof v);
    return v;
}

static inline int check_done(const char *name)
{
    struct check_counts *c = check_counts();
    printf("%s\n%lu passed, %lu failed\n", name, __atomic_load_n(&c->passed, __ATOMIC_RELAXED),
           __atomic_load_n(&c->failed, __ATOMIC_RELAXED));
    fflush(stdout);
    return __atomic_load_n(&c->failed, __ATOMIC_RELAXED) ? 1 : 0;
}

#ifdef _GNU_SOURCE /* sigsetjmp and sigaction */
#include <setjmp.h>
#include <signal.h>

static sigjmp_buf check_fault_env;

static inline void check_on_fault(int sig)
{
    siglongjmp(check_fault_env, sig);
}

static inline int check_read_faults(volatile const unsigned char *addr)
{
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = check_on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    int sig = sigsetjmp(check_fault_env, 1);
    if (sig == 0)
        (void)*addr;
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return sig;
}
#endif

#endif
