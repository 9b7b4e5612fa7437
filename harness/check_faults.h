/*
 * check_faults.h - fault sweeps over the emulator (gdrsim_set_fail): the library's own calls
 * (abi-tests/reliability/faults.c) and those of the host-written memory allocator
 * (abi-tests/ext/ext_faults.c). A program runs a fixed workload of steps once without a fault
 * and once per rule "NAME:N:ERR"; each step must return 0 or exactly the injected error (as the
 * errno the library turns it into), and a run in which some result differs from the fault-free
 * run is a fault that fired. Needs _GNU_SOURCE (or _DEFAULT_SOURCE) before the first system
 * header.
 */
#ifndef GDRAPI_CHECK_FAULTS_H
#define GDRAPI_CHECK_FAULTS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check_cases.h"
#include "gdrsim.h"

/* The errno an injected CUresult comes back as: the library's table (src/cuda/result.rs), for
 * the codes the sweeps inject. */
static inline int check_errno_of_curesult(int r)
{
    switch (r) {
    case 1: case 201: return EINVAL;
    case 2: return ENOMEM;
    case 3: case 100: case 101: return ENODEV;
    case 801: return ENOTSUP;
    default: return EIO;
    }
}

/* The errno an injected VkResult comes back as: the library's table (src/vulkan/mod.rs). */
static inline int check_errno_of_vkresult(int r)
{
    switch (r) {
    case -1: case -2: case -5: case -10: return ENOMEM;
    case -1000072003: return EINVAL;
    case -3: case -9: return ENODEV;
    case -6: case -7: case -8: return ENOTSUP;
    default: return EIO;
    }
}

/* The run under way: its rule (for the messages), the errno its fault comes back as (0 for
 * none), and whether the DMA-BUF backend runs it. */
static struct {
    const char *spec;
    int err;
    int dmabuf;
} check_fault = {"", 0, 0};

/* Reports a failed check `what` of step `step`, which returned `rc`, under the run's rule. */
static inline void check_fault_bad(const char *step, const char *what, int rc)
{
    check_report(0, __FILE__, __LINE__, what);
    printf("    with %s: %s returned %d\n", check_fault.spec, step, rc);
}

/* Checks that step `step` returned 0, the injected error, or `also` (0: nothing else); the
 * DMA-BUF backend reports the kernel-internal ENOTSUPP (524) from mmap as ENOTSUP
 * (src/backend/dmabuf.rs). Returns whether it did. */
static inline int check_fault_result(const char *step, int rc, int also)
{
    int translated = check_fault.dmabuf && check_fault.err == 524 && rc == ENOTSUP;
    if (rc != 0 && rc != check_fault.err && !translated && !(also && rc == also)) {
        check_fault_bad(step, "result is neither 0 nor the injected error", rc);
        return 0;
    }
    check_report(1, __FILE__, __LINE__, "result is 0 or the injected error");
    return 1;
}

/* Calls that may fail (`names`), the errors injected into them (`errs`), and the errno each
 * comes back as (`errno_of`; NULL: the error is an errno). */
struct check_fault_group {
    const char *const *names;
    int n;
    const int *errs;
    int nerr;
    int (*errno_of)(int);
    int vulkan_only; /* only on the Vulkan import, whose calls these are */
};

#define CHECK_FAULT_MAX_STEPS 32

/* A workload of `nsteps` steps, named `step_names`, and what each of its runs needs. */
struct check_fault_sweep {
    int nsteps;
    const char *const *step_names;
    int value_step;                    /* a step that returns a value, not an error (-1: none) */
    int max_nth;                       /* rules "NAME:N:ERR" for N = 1..max_nth */
    void (*before)(const char *name);  /* before each run, with the call that will fail ("") */
    void (*workload)(int *rc);         /* the steps; rc[step] gets each first result */
    int (*leaks)(void);                /* after each run: 1 when it left something behind */
};

/* Runs the workload without a fault, which must succeed at every step and leave nothing, then
 * under every rule of `groups` (those that are `vulkan_only` only when `vulkan`), printing the
 * faults that fired per name. Adds the runs and the runs that leaked to *runs and *leaked;
 * returns the faults that fired. */
static inline long check_fault_sweep(const struct check_fault_sweep *s,
                                     const struct check_fault_group *groups, int ngroups,
                                     int vulkan, long *runs, long *leaked)
{
    int baseline[CHECK_FAULT_MAX_STEPS], rc[CHECK_FAULT_MAX_STEPS];
    char spec[128];
    long injected = 0;
    REQUIRE(s->nsteps <= CHECK_FAULT_MAX_STEPS);
    check_fault.spec = "(none)";
    check_fault.err = 0;
    s->before("");
    s->workload(baseline);
    for (int i = 0; i < s->nsteps; i++)
        if (baseline[i] != 0 && i != s->value_step) {
            printf("fault-free run: %s returned %d\n", s->step_names[i], baseline[i]);
            CHECK(baseline[i] == 0);
        }
    REQUIRE(s->leaks() == 0);
    for (int k = 0; k < ngroups; k++) {
        if (groups[k].vulkan_only && !vulkan)
            continue;
        for (int n = 0; n < groups[k].n; n++) {
            const char *name = groups[k].names[n];
            long fired = 0;
            for (int e = 0; e < groups[k].nerr; e++) {
                int err = groups[k].errs[e];
                for (int nth = 1; nth <= s->max_nth; nth++) {
                    snprintf(spec, sizeof(spec), "%s:%d:%d", name, nth, err);
                    check_fault.spec = spec;
                    check_fault.err = groups[k].errno_of ? groups[k].errno_of(err) : err;
                    s->before(name);
                    REQUIRE(gdrsim_set_fail(spec) == 0);
                    s->workload(rc);
                    gdrsim_set_fail(NULL);
                    ++*runs;
                    if (memcmp(rc, baseline, sizeof(int) * (size_t)s->nsteps) != 0)
                        fired++;
                    *leaked += s->leaks();
                }
            }
            printf("%-40s %4ld faults injected\n", name, fired);
            injected += fired;
        }
    }
    check_fault.spec = "(none)";
    check_fault.err = 0;
    return injected;
}

/*
 * A call that runs once per process (an initialisation) under an injected fault, in a fresh
 * child for each fault: check_init_faults forks one child per spec "NAME:1:ERR" (each name of
 * `names` with each value of `errs`), in which `run(spec, err, arg)` injects the fault, makes
 * the call and returns the child's exit code: bit 1 when the fault made the call fail, bits 2,
 * 4 and 16 for what went wrong (`bad[0]`, `bad[1]`, `bad[2]` say what), 8 when the fault could
 * not be set. The parent reports one check per child, named `what`, and returns how many
 * faults made the call fail.
 */
struct check_init_fault {
    const char *what;   /* the check, e.g. "gdr_open under an init fault" */
    const char *call;   /* the call under the fault, for the failure lines */
    const char *bad[3]; /* what bits 2, 4 and 16 of the exit code mean */
    int (*run)(const char *spec, int err, void *arg);
    void *arg;
};

static inline long check_init_faults(const struct check_init_fault *f, const char *const *names,
                                     int nnames, const int *errs, int nerrs)
{
    long fired = 0;
    char spec[128];
    for (int n = 0; n < nnames; n++)
        for (int e = 0; e < nerrs; e++) {
            snprintf(spec, sizeof(spec), "%s:1:%d", names[n], errs[e]);
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) {
                check_report(0, __FILE__, __LINE__, "fork");
                continue;
            }
            if (pid == 0) {
                alarm(30);
                _exit(f->run(spec, errs[e], f->arg));
            }
            int status = 0;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
                check_report(0, __FILE__, __LINE__, "the child ended by a signal");
                printf("    with %s (before the first %s)\n", spec, f->call);
                continue;
            }
            int code = WEXITSTATUS(status);
            check_report(!(code & ~1), __FILE__, __LINE__, f->what);
            if (code & ~1)
                printf("    with %s (before the first %s): %s%s%s%s\n", spec, f->call,
                       code & 8 ? "the fault could not be set; " : "", code & 2 ? f->bad[0] : "",
                       code & 4 ? f->bad[1] : "", code & 16 ? f->bad[2] : "");
            fired += code & 1;
        }
    return fired;
}

#endif
