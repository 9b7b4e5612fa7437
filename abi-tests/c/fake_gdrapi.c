/*
 * fake_gdrapi.c - a stand-in libgdrapi.so.2 whose gdr_open always fails and
 * whose version is 0.0. mk/30-abi.mk links load_main against it, and the
 * "loading" suite of run-all.sh runs load_main with it, then with the real
 * library in LD_PRELOAD, which must take its place.
 */
#include "gdrapi.h"

gdr_t gdr_open(void)
{
    return NULL;
}

void gdr_runtime_get_version(int *major, int *minor)
{
    *major = 0;
    *minor = 0;
}

int gdr_close(gdr_t g)
{
    (void)g;
    return -1;
}
