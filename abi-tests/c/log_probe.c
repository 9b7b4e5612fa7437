/*
 * log_probe.c MODE - calls the library in one of a few ways and prints its
 * own result on stdout only, so that check-logging.sh can judge what the
 * library itself wrote to stderr.
 *   probe  gdr_open + gdr_close, as UCX does at start-up (must succeed)
 *   error  gdr_open, then a pin the driver refuses, then gdr_close
 *   fail   gdr_open, which must fail (no usable driver)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gdrapi.h"

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "probe";
    gdr_t g = gdr_open();

    if (strcmp(mode, "fail") == 0) {
        printf("gdr_open: %s\n", g == NULL ? "NULL" : "non-NULL");
        return g == NULL ? 0 : 1;
    }
    if (g == NULL) {
        printf("gdr_open: NULL\n");
        return 1;
    }
    if (strcmp(mode, "error") == 0) {
        gdr_mh_t mh;
        int ret = gdr_pin_buffer_v2(g, 0, GPU_PAGE_SIZE, 0, &mh);
        printf("pin: %d\n", ret);
        if (ret != EINVAL)
            return 1;
    }
    printf("gdr_close: %d\n", gdr_close(g));
    return 0;
}
