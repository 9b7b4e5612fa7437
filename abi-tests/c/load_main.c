/*
 * load_main.c EXPECT - linked against the fake libgdrapi.so.2. EXPECT is
 * "fake" (the fake answers: gdr_open NULL, version 0.0) or "real" (this
 * library was put first with LD_PRELOAD: gdr_open works, version 2.6).
 */
#include <string.h>

#include "check.h"
#include "gdrapi.h"

int main(int argc, char **argv)
{
    int real = argc > 1 && strcmp(argv[1], "real") == 0;
    int major = -1, minor = -1;
    gdr_t g;

    gdr_runtime_get_version(&major, &minor);
    g = gdr_open();
    if (real) {
        CHECK_EQ(major, 2);
        CHECK_EQ(minor, 6);
        CHECK(g != NULL);
        /* Resolved from the preloaded library although the fake lacks it. */
        if (g != NULL)
            CHECK_EQ(gdr_close(g), 0);
    } else {
        CHECK_EQ(major, 0);
        CHECK_EQ(minor, 0);
        CHECK(g == NULL);
    }
    return check_done(real ? "load_main (preloaded)" : "load_main (fake)");
}
