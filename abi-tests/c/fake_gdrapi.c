/*
 * fake_gdrapi.c - a stand-in libgdrapi.so.2 whose gdr_open always fails and
 * whose version is 0.0. check-loading.sh links load_main against it and
 * shows that LD_PRELOAD puts the real library in its place.
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
