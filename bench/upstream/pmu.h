/*
 * pmu.h - a group of the CPU's performance counters on the calling thread, read around one call
 * (perf_event_open): where a call's time goes (code and TLB misses, branch misses, cache misses)
 * when two libraries differ by a few nanoseconds.
 */
#ifndef GDRAPI_BENCH_PMU_H
#define GDRAPI_BENCH_PMU_H

#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PMU_EVENTS 6

struct pmu {
    int leader;
    int n;
    const char *names[PMU_EVENTS];
};

#define PMU_CACHE_MISS(cache) \
    (PERF_COUNT_HW_CACHE_##cache | (PERF_COUNT_HW_CACHE_OP_READ << 8) | \
     (PERF_COUNT_HW_CACHE_RESULT_MISS << 16))

enum { PMU_CODE = 1, PMU_DATA = 2, PMU_SW = 4 };

/* Each counter, and the sets it is in. */
static const struct {
    uint32_t type;
    uint64_t config;
    const char *name;
    int sets;
} pmu_events[] = {
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles", PMU_CODE | PMU_DATA},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions", PMU_CODE | PMU_DATA},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "branch-miss", PMU_CODE | PMU_DATA},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(L1I), "L1i-miss", PMU_CODE},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(ITLB), "iTLB-miss", PMU_CODE},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(L1D), "L1d-miss", PMU_DATA},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(DTLB), "dTLB-miss", PMU_DATA},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(LL), "LLC-miss", PMU_CODE | PMU_DATA},
    /* The kernel's software counters: the same path on machines without a PMU (the CI
     * machine). */
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "task-clock", PMU_SW},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "page-faults", PMU_SW},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, "cs", PMU_SW},
};

/*
 * Opens set "code" (cycles, instructions, branch misses, L1i, iTLB and LLC read misses), "data"
 * (the same with L1d and dTLB for L1i and iTLB) or "sw" (task clock in ns, page faults, context
 * switches) as one group, counting user space only unless `kernel`. Returns 0, or the errno of
 * the event that could not be opened (EINVAL for another set name).
 */
static inline int pmu_open(struct pmu *p, const char *set, int kernel)
{
    int want = strcmp(set, "code") == 0   ? PMU_CODE
               : strcmp(set, "data") == 0 ? PMU_DATA
               : strcmp(set, "sw") == 0   ? PMU_SW
                                          : 0;
    if (!want)
        return EINVAL;
    p->leader = -1;
    p->n = 0;
    for (size_t i = 0; i < sizeof pmu_events / sizeof pmu_events[0]; i++) {
        if (!(pmu_events[i].sets & want))
            continue;
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = pmu_events[i].type;
        a.config = pmu_events[i].config;
        a.exclude_kernel = !kernel;
        a.exclude_hv = 1;
        a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                        PERF_FORMAT_TOTAL_TIME_RUNNING;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, p->leader, 0);
        if (fd < 0)
            return errno; /* the caller gives up: the group's open fds go with the process */
        if (p->leader < 0)
            p->leader = fd;
        p->names[p->n++] = pmu_events[i].name;
    }
    return 0;
}

/*
 * Reads the group's counts into v[0..n); returns 0 when every counter ran all the time it was
 * enabled, -1 when the group was not on the CPU throughout (counts then mean nothing).
 */
static inline int pmu_read(const struct pmu *p, uint64_t *v)
{
    uint64_t buf[3 + PMU_EVENTS];
    ssize_t want = (ssize_t)(sizeof(uint64_t) * (size_t)(3 + p->n));
    if (read(p->leader, buf, sizeof buf) != want || buf[2] != buf[1])
        return -1;
    for (int i = 0; i < p->n; i++)
        v[i] = buf[3 + i];
    return 0;
}

#endif
