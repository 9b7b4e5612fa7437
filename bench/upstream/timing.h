/*
 * timing.h - the clock and the median of the bench/upstream programs.
 */
#ifndef GDRAPI_BENCH_TIMING_H
#define GDRAPI_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0; sorts v. */
static inline double median(double *v, size_t n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return v[n / 2];
}

#endif
