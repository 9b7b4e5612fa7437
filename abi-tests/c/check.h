/*
 * check.h - the assertion harness of the C ABI tests.
 *
 * CHECK(cond) and CHECK_EQ(actual, expected) count a pass or print
 * "file:line: ..." and count a failure; the program goes on so that one run
 * reports every broken assertion. check_done() prints the final
 * "N passed, N failed" line and gives the exit status.
 *
 * OURS(): true when the harness runs the program against this project's
 * library (GDRAPI_TEST_OURS=1). Assertions on behaviour where the project
 * deliberately differs from gdrcopy 2.6 (validated handles instead of a
 * crash, bounds-checked copies, ...) run only then, so the same programs
 * also prove their other assertions against the original library.
 */
#ifndef GDRAPI_ABI_CHECK_H
#define GDRAPI_ABI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed_count;
static int check_failed_count;

/* GDRAPI_CHECK_TRACE=1: every check also prints "check-trace: FILE:LINE P|F", so that runs on
 * two drivers (the emulator, the real module in vm/) can be compared case by case. */
static inline void check_trace(int ok, const char *file, int line)
{
    static int trace = -1;
    if (trace < 0) {
        const char *v = getenv("GDRAPI_CHECK_TRACE");
        trace = v != NULL && strcmp(v, "1") == 0;
    }
    if (trace) {
        fprintf(stdout, "check-trace: %s:%d %s\n", file, line, ok ? "P" : "F");
        fflush(stdout);
    }
}

static inline void check_report(int ok, const char *file, int line, const char *what)
{
    check_trace(ok, file, line);
    if (ok) {
        check_passed_count++;
    } else {
        check_failed_count++;
        fprintf(stdout, "%s:%d: FAILED: %s\n", file, line, what);
        fflush(stdout);
    }
}

#define CHECK(cond) check_report(!!(cond), __FILE__, __LINE__, #cond)

#define CHECK_EQ(actual, expected)                                                       \
    do {                                                                                 \
        long long check_a_ = (long long)(actual);                                        \
        long long check_e_ = (long long)(expected);                                      \
        check_trace(check_a_ == check_e_, __FILE__, __LINE__);                           \
        if (check_a_ == check_e_) {                                                      \
            check_passed_count++;                                                        \
        } else {                                                                         \
            check_failed_count++;                                                        \
            fprintf(stdout, "%s:%d: FAILED: %s == %s (got %lld / 0x%llx, want %lld)\n", \
                    __FILE__, __LINE__, #actual, #expected, check_a_,                    \
                    (unsigned long long)check_a_, check_e_);                             \
            fflush(stdout);                                                              \
        }                                                                                \
    } while (0)

/* A failed precondition: report it and stop this program. */
#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            check_report(0, __FILE__, __LINE__, "precondition: " #cond);                 \
            return check_done(__FILE__);                                                 \
        }                                                                                \
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

/* struct gdr's cache_backend (u32 at offset 40 of upstream's layout): 0 gdrdrv, 1 DMA-BUF, 2 this
 * library's Vulkan import. The backends other than gdrdrv reach the GPU through CUDA, which a
 * forked child of a process that initialised it cannot use. */
static inline unsigned gdr_cache_backend(const void *g)
{
    unsigned v;
    memcpy(&v, (const char *)g + 40, sizeof v);
    return v;
}

static inline int check_done(const char *name)
{
    printf("%s\n%d passed, %d failed\n", name, check_passed_count, check_failed_count);
    fflush(stdout);
    return check_failed_count ? 1 : 0;
}

#endif
