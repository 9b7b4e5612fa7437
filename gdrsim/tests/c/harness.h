/* A tiny test harness: every case runs in a forked child with a timeout, so crashes, hangs
 * and signals are contained. Cases return PASS, SKIP or call CHECK (which fails the case). */
#ifndef SIM_HARNESS_H
#define SIM_HARNESS_H

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PASS 0
#define FAIL 1
#define SKIP 77

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "    check failed: %s (%s:%d, errno %d)\n", #cond, __FILE__, \
                    __LINE__, errno);                                                    \
            exit(FAIL);                                                                  \
        }                                                                                \
    } while (0)

#define CHECK_EQ(a, b)                                                                        \
    do {                                                                                      \
        long long _a = (long long)(a), _b = (long long)(b);                                   \
        if (_a != _b) {                                                                       \
            fprintf(stderr, "    check failed: %s == %s (%lld vs %lld) (%s:%d)\n", #a, #b, _a, \
                    _b, __FILE__, __LINE__);                                                  \
            exit(FAIL);                                                                       \
        }                                                                                     \
    } while (0)

struct test_case {
    const char *name;
    int (*fn)(void);
};

/* Which signal, if any, touching `addr` raises: 0, SIGBUS or SIGSEGV. Reads (write == 0)
 * or writes (write != 0) one byte; a successful read stores the byte in *val. */
int probe(volatile unsigned char *addr, int write, unsigned char *val);

/* Runs every case (or those named in argv) and prints the tally; returns the exit code. */
int run_tests(const struct test_case *cases, size_t n, int argc, char **argv);

#endif
