/*
 * check_cases.h - check.h's runner for a program made of independent cases (the emulator's,
 * gdrsim/tests/c): each case runs in a forked child with a timeout, so that a crash, a hang or
 * a signal ends that case only. Needs _GNU_SOURCE (or _DEFAULT_SOURCE) before the first
 * system header.
 *
 * A case is a function that returns CASE_PASS, or CASE_SKIP when it does not apply under the
 * settings it runs under (SKIP_IF). Its CHECKs and REQUIREs mean what they mean anywhere
 * (check.h): a CHECK counts and the case goes on, a failed REQUIRE ends the case. The counts
 * live in a page the child shares with the runner (and with any process the case forks), so
 * the runner has them even when the child dies.
 *
 * A case fails when one of its checks failed, or when it did not end by returning or by a
 * failed REQUIRE (a signal, the timeout, another exit status): that counts one more failure.
 * A skipped case's checks (those before it decided to skip) count too.
 *
 * check_run_cases prints "PASS name", "SKIP name" or "FAIL name: why" per case, then
 * "NAME: cases N passed, N failed, N skipped" and the summary "N passed, N failed" (checks),
 * and returns the exit status. Arguments name the cases to run (default: all).
 */
#ifndef GDRAPI_CHECK_CASES_H
#define GDRAPI_CHECK_CASES_H

#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define CASE_PASS 0
#define CASE_SKIP 77

/* Ends a case as skipped when cond holds. */
#define SKIP_IF(cond)                                                                       \
    do {                                                                                    \
        if (cond)                                                                           \
            return CASE_SKIP;                                                               \
    } while (0)

/* Seconds one case may take. */
#ifndef CHECK_CASE_TIMEOUT
#define CHECK_CASE_TIMEOUT 20
#endif

struct check_case {
    const char *name;
    int (*fn)(void);
};

/* Runs one case in a child; returns CASE_PASS, CASE_SKIP or 1 (failed) and adds its counts. */
static inline int check_run_case(const struct check_case *t, struct check_counts *shared,
                                 struct check_counts *total)
{
    shared->passed = shared->failed = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        check_state.counts = shared;
        check_state.in_case = 1;
        alarm(CHECK_CASE_TIMEOUT);
        int r = t->fn();
        fflush(NULL);
        exit(r == CASE_SKIP ? CASE_SKIP : r == CASE_PASS ? CASE_PASS : 1);
    }
    int status = 0;
    int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    unsigned long passed = __atomic_load_n(&shared->passed, __ATOMIC_RELAXED);
    unsigned long failed = __atomic_load_n(&shared->failed, __ATOMIC_RELAXED);
    char why[128] = "";
    if (!waited)
        snprintf(why, sizeof why, "could not run (fork or wait failed, errno %d)", errno);
    else if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "killed by signal %d%s", WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    else if (WEXITSTATUS(status) == CHECK_REQUIRE_STATUS && failed == 0)
        snprintf(why, sizeof why, "exit status %d without a failed REQUIRE", CHECK_REQUIRE_STATUS);
    else if (WEXITSTATUS(status) != CASE_PASS && WEXITSTATUS(status) != CASE_SKIP &&
             WEXITSTATUS(status) != CHECK_REQUIRE_STATUS)
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    int abnormal = why[0] != '\0';
    total->passed += passed;
    total->failed += failed + (unsigned long)abnormal;
    if (abnormal) {
        printf("FAIL %s: %s, after %lu passed and %lu failed checks\n", t->name, why, passed, failed);
        return 1;
    }
    if (failed != 0) {
        printf("FAIL %s: %lu of %lu checks failed%s\n", t->name, failed, passed + failed,
               WEXITSTATUS(status) == CHECK_REQUIRE_STATUS ? ", ended by a failed REQUIRE" : "");
        return 1;
    }
    if (WEXITSTATUS(status) == CASE_SKIP) {
        printf("SKIP %s\n", t->name);
        return CASE_SKIP;
    }
    printf("PASS %s\n", t->name);
    return CASE_PASS;
}

/* Runs every case (or those named in argv), prints the tallies; returns the exit status. */
static inline int check_run_cases(const char *name, const struct check_case *cases, size_t n,
                                  int argc, char **argv)
{
    struct check_counts *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("check_run_cases: mmap");
        return 2;
    }
    struct check_counts total = {0, 0};
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++)
                wanted |= strcmp(argv[a], cases[i].name) == 0;
            if (!wanted)
                continue;
        }
        int r = check_run_case(&cases[i], shared, &total);
        passed += r == CASE_PASS;
        skipped += r == CASE_SKIP;
        failed += r != CASE_PASS && r != CASE_SKIP;
    }
    munmap(shared, sizeof(*shared));
    printf("%s: cases %d passed, %d failed, %d skipped\n", name, passed, failed, skipped);
    printf("%lu passed, %lu failed\n", total.passed, total.failed);
    fflush(stdout);
    return total.failed || failed ? 1 : 0;
}

#endif
