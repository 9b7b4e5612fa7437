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

struct pmu_event {
    uint32_t type;
    uint64_t config;
    const char *name;
};

static const struct pmu_event pmu_code[] = {
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "branch-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(L1I), "L1i-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(ITLB), "iTLB-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(LL), "LLC-miss"},
};

static const struct pmu_event pmu_data[] = {
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "branch-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(L1D), "L1d-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(DTLB), "dTLB-miss"},
    {PERF_TYPE_HW_CACHE, PMU_CACHE_MISS(LL), "LLC-miss"},
};

/* The kernel's software counters: the same path on machines without a PMU (the CI machine). */
static const struct pmu_event pmu_sw[] = {
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "task-clock"},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "page-faults"},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, "cs"},
};

/*
 * Opens set "code" (cycles, instructions, branch misses, L1i, iTLB and LLC read misses), "data"
 * (the same with L1d and dTLB for L1i and iTLB) or "sw" (task clock in ns, page faults, context
 * switches) as one group, counting user space only unless `kernel`. Returns 0, or the errno of
 * the event that could not be opened (EINVAL for another set name).
 */
static inline int pmu_open(struct pmu *p, const char *set, int kernel)
{
    const struct pmu_event *ev;
    int n;
    if (strcmp(set, "code") == 0)
        ev = pmu_code, n = (int)(sizeof pmu_code / sizeof *ev);
    else if (strcmp(set, "data") == 0)
        ev = pmu_data, n = (int)(sizeof pmu_data / sizeof *ev);
    else if (strcmp(set, "sw") == 0)
        ev = pmu_sw, n = (int)(sizeof pmu_sw / sizeof *ev);
    else
        return EINVAL;
    p->leader = -1;
    p->n = 0;
    for (int i = 0; i < n; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = ev[i].type;
        a.config = ev[i].config;
        a.exclude_kernel = !kernel;
        a.exclude_hv = 1;
        a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                        PERF_FORMAT_TOTAL_TIME_RUNNING;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, p->leader, 0);
        if (fd < 0)
            return errno; /* the caller gives up: the group's open fds go with the process */
        if (p->leader < 0)
            p->leader = fd;
        p->names[p->n++] = ev[i].name;
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
