/*
 * evict.h - the cache eviction of the bench/upstream programs: before a "cold" call, a buffer
 * larger than the last-level cache is streamed through, one write and one read per 64-byte
 * line.
 */
#ifndef GDRAPI_BENCH_EVICT_H
#define GDRAPI_BENCH_EVICT_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t *evict_buf;
static size_t evict_words;
static volatile uint64_t evict_sink;

/* Makes the buffer evict() streams through: `mib` MiB (0: none). -1 when memory is short. */
static inline int evict_init(size_t mib)
{
    evict_words = mib * (1 << 20) / sizeof(uint64_t);
    if (evict_words && !(evict_buf = calloc(evict_words, sizeof(uint64_t))))
        return -1;
    return 0;
}

/* Streams through the buffer of evict_init() (nothing when it is empty). */
static inline void evict(void)
{
    uint64_t s = 0;
    for (size_t i = 0; i < evict_words; i += 8) {
        evict_buf[i] += 1;
        s += evict_buf[i];
    }
    evict_sink = s;
}

#endif
