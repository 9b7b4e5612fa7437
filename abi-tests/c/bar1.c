/*
 * bar1.c [nvml|no-nvml] [dmabuf] - a pin that does not fit in BAR1, on the
 * emulator with GDRSIM_BAR1_SIZE=16M: 8 MiB pin, then a 16 MiB pin fails with
 * ENOMEM (the emulator's BAR1 accounting, as a full aperture does on a GPU),
 * then fits once the first is unpinned. With this project's library
 * (GDRAPI_TEST_OURS=1) and logging on, the error line of the failed pin
 * carries the BAR1 figures when NVML answers ("nvml": the emulator's
 * libnvidia-ml.so.1 is on the path) and is upstream's bare line when it does
 * not ("no-nvml"). "dmabuf": the session uses the DMA-BUF backend
 * (GDRSIM_NO_DEVICE=1), whose pins are dma-buf exports; a refused export is
 * an error whatever the library, ENOMEM with this one, and its log line names
 * cuMemGetHandleForAddressRange. The library's stderr is captured in a
 * temporary file and read back.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gpu.h"

#define MiB (1UL << 20)

/* stderr goes to a temporary file until take_stderr() returns what was written. */
static FILE *captured;
static int saved_stderr = -1;

static void capture_stderr(void)
{
    fflush(stderr);
    captured = tmpfile();
    saved_stderr = dup(2);
    if (captured != NULL)
        dup2(fileno(captured), 2);
}

static char *take_stderr(void)
{
    static char text[8192];
    size_t n = 0;
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    if (captured != NULL) {
        rewind(captured);
        n = fread(text, 1, sizeof(text) - 1, captured);
        fclose(captured);
    }
    text[n] = '\0';
    return text;
}

int main(int argc, char **argv)
{
    int with_nvml = argc > 1 && strcmp(argv[1], "nvml") == 0;
    int dmabuf = argc > 2 && strcmp(argv[2], "dmabuf") == 0;
    const char *line = dmabuf ? "ERR:  \"cuMemGetHandleForAddressRange\" failed (2: "
                              : "ERR:  ioctl error (errno=12)";
    const char *bar1 = getenv("GDRSIM_BAR1_SIZE");
    gdr_mh_t first, second;
    unsigned long base;
    char *log;
    gdr_t g;
    int ret;

    REQUIRE(bar1 != NULL && strcmp(bar1, "16M") == 0);
    setenv("GDRCOPY_ENABLE_LOGGING", "1", 1);
    gpu_init();
    base = gpu_aligned(gpu_alloc(32 * MiB));
    g = gdr_open();
    REQUIRE(g != NULL);
    if (OURS()) {
        int v = -1;
        CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &v), 0);
        CHECK_EQ(v, dmabuf);
    }

    CHECK_EQ(gdr_pin_buffer_v2(g, base, 8 * MiB, 0, &first), 0);
    capture_stderr();
    ret = gdr_pin_buffer_v2(g, base + 8 * MiB, 16 * MiB, 0, &second);
    log = take_stderr();
    if (dmabuf && !OURS())
        CHECK(ret != 0); /* upstream returns the CUresult itself */
    else
        CHECK_EQ(ret, ENOMEM);
    printf("log of the failed pin: %s", log);
    if (OURS()) {
        CHECK(strstr(log, line) == log);
        if (with_nvml) {
            CHECK(strstr(log, "BAR1 nearly full: 8 of 16 MiB used") != NULL);
        } else {
            /* Only where no NVML is found (a GPU machine's real one would answer). */
            void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
            if (nvml != NULL)
                dlclose(nvml);
            else if (!dmabuf)
                CHECK(strcmp(log, "ERR:  ioctl error (errno=12)\n") == 0);
        }
    }

    /* Unpinning gives the aperture back. */
    CHECK_EQ(gdr_unpin_buffer(g, first), 0);
    CHECK_EQ(gdr_pin_buffer_v2(g, base + 8 * MiB, 16 * MiB, 0, &second), 0);
    CHECK_EQ(gdr_unpin_buffer(g, second), 0);
    CHECK_EQ(gdr_close(g), 0);
    return check_done("bar1");
}
