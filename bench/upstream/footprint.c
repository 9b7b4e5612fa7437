/*
 * footprint.c - the memory an API call touches, for whichever libgdrapi.so.2 the dynamic
 * loader finds, measured under valgrind's lackey (footprint.py reads its trace).
 *
 * gdrcopy_apiperf times pin, get_info and unpin right after a map or unmap; over real VRAM
 * those take milliseconds and leave the caches and TLBs cold, so a call then costs about one
 * page walk per distinct page and one miss per distinct cache line it touches. This program
 * runs the apiperf cycle (pin, map, get_info, unmap, unpin) and brackets each call with
 * stores to two marker variables, whose addresses it prints with the load address of every
 * object, so that the trace can be cut into calls and each access attributed to an object.
 *
 * Usage: footprint [iterations] [cycles] (defaults 6 and 1100). Before the measured
 * iterations, `cycles` unmeasured pin/unpin pairs bring the library to its steady state (a
 * library that does not reuse a freed record at once cycles through its records).
 * Prints LOAD and MARK lines on stderr.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

#include "gdrapi.h"
#include "gpu.h"

#define SIZE 65536

volatile int footprint_begin, footprint_end;

static int print_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        unsigned long start = info->dlpi_addr + p->p_vaddr;
        fprintf(stderr, "LOAD %s %lx %lx %lx %c\n", info->dlpi_name[0] ? info->dlpi_name : "main",
                start, start + p->p_memsz, (unsigned long)info->dlpi_addr,
                (p->p_flags & PF_X) ? 'x' : '-');
    }
    return 0;
}

#define CALL(call)                                                                                 \
    do {                                                                                           \
        footprint_begin = 1;                                                                       \
        rc |= (call);                                                                              \
        footprint_end = 1;                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 6;
    int cycles = argc > 2 ? atoi(argv[2]) : 1100;
    gpu_init();
    CUdeviceptr raw = gpu_alloc(SIZE);
    unsigned long addr = gpu_aligned(raw);
    gdr_t g = gdr_open();
    if (!g) {
        printf("footprint: gdr_open failed\n");
        return 2;
    }
    dl_iterate_phdr(print_segments, NULL);
    fprintf(stderr, "MARK %lx %lx\n", (unsigned long)&footprint_begin,
            (unsigned long)&footprint_end);
    int rc = 0;
    for (int i = 0; i < cycles && rc == 0; i++) {
        gdr_mh_t mh;
        rc |= gdr_pin_buffer(g, addr, SIZE, 0, 0, &mh);
        if (rc == 0)
            rc |= gdr_unpin_buffer(g, mh);
    }
    for (int i = 0; i < iters && rc == 0; i++) {
        gdr_mh_t mh;
        gdr_info_t info;
        void *va = NULL;
        CALL(gdr_pin_buffer(g, addr, SIZE, 0, 0, &mh));
        CALL(gdr_map(g, mh, &va, SIZE));
        CALL(gdr_get_info(g, mh, &info));
        CALL(gdr_unmap(g, mh, va, SIZE));
        CALL(gdr_unpin_buffer(g, mh));
    }
    gdr_close(g);
    cuMemFree(raw);
    if (rc)
        printf("footprint: a call failed\n");
    return rc ? 1 : 0;
}
