/*
 * uct_gdr_check: moves bytes between host and GPU memory through UCX's gdr_copy transport
 * (UCT level: uct_md_mem_reg, put_short, get_short) and checks every byte of the GPU buffer,
 * including the bytes just outside each target range, for unaligned offsets and lengths.
 *
 * Usage: uct_gdr_check [buffer bytes]   (exit 0: all checks passed; 1: a check failed;
 * 77: no gdr_copy transport). GDRAPI_TEST_ALLOC=vmm allocates the buffer as NCCL's cuMem
 * allocator does (cuMemCreate with the POSIX-fd handle type: what the Vulkan import maps). Prints "N passed, N failed" (harness/check.h, the harness
 * of every C suite: a CHECK counts and the program goes on, a failed REQUIRE ends it).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uct/api/uct.h>

#include "check.h"
#include "gpu.h"

/* A UCX call: an assertion of the data path (UCS_CHECK) or a step of the setup (UCS_REQUIRE). */
#define UCS_SAY(s_, call)                                                                     \
    do {                                                                                      \
        if ((s_) != UCS_OK)                                                                   \
            printf("%s: %s\n", call, ucs_status_string(s_));                                  \
    } while (0)
#define UCS_CHECK(call)                                                                       \
    do {                                                                                      \
        ucs_status_t s_ = (call);                                                             \
        UCS_SAY(s_, #call);                                                                   \
        CHECK_EQ(s_, UCS_OK);                                                                 \
    } while (0)
#define UCS_REQUIRE(call)                                                                     \
    do {                                                                                      \
        ucs_status_t s_ = (call);                                                             \
        UCS_SAY(s_, #call);                                                                   \
        REQUIRE_EQ(s_, UCS_OK);                                                               \
    } while (0)
#define CU_REQUIRE(call) REQUIRE_EQ((call), CUDA_SUCCESS)

/* The expected content of the GPU buffer, kept on the host. */
static uint8_t *shadow;
static size_t buf_len;

static uint8_t pattern(size_t i, unsigned round) { return (uint8_t)(i * 131u + round * 29u + 7u); }

/* Compares the whole GPU buffer with the shadow (one check); reports the first difference. */
static void verify(CUdeviceptr gpu, const char *what, size_t off, size_t len)
{
    uint8_t *now = malloc(buf_len);
    REQUIRE(now != NULL);
    CU_REQUIRE(cuMemcpyDtoH(now, gpu, buf_len));
    size_t i = 0;
    while (i < buf_len && now[i] == shadow[i])
        i++;
    if (i < buf_len)
        printf("%s off=%zu len=%zu: byte %zu is 0x%02x, expected 0x%02x (%s range)\n", what, off,
               len, i, now[i], shadow[i], (i >= off && i < off + len) ? "inside" : "outside");
    CHECK(i == buf_len);
    free(now);
}

int main(int argc, char **argv)
{
    size_t len_arg = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20) + 4096 + 3;
    uct_component_h *components, comp = NULL;
    unsigned num_components, num_tl, c;
    uct_md_h md = NULL;
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_iface_h iface;
    uct_ep_h ep;
    uct_md_config_t *md_config;
    uct_iface_config_t *iface_config;
    uct_tl_resource_desc_t *tl;
    uct_iface_attr_t iface_attr;
    uct_md_attr_t md_attr;
    CUcontext ctx;
    CUdeviceptr gpu;
    unsigned checks = 0;

    buf_len = len_arg;
    CU_REQUIRE(cuInit(0));
    CU_REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_REQUIRE(cuCtxSetCurrent(ctx));

    UCS_REQUIRE(uct_query_components(&components, &num_components));
    for (c = 0; c < num_components; c++) {
        uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME };
        UCS_REQUIRE(uct_component_query(components[c], &attr));
        if (!strcmp(attr.name, "gdr_copy")) {
            comp = components[c];
        }
    }
    if (comp == NULL) {
        fprintf(stderr, "no gdr_copy component\n");
        return 77;
    }
    UCS_REQUIRE(uct_md_config_read(comp, NULL, NULL, &md_config));
    UCS_REQUIRE(uct_md_open(comp, "gdr_copy", md_config, &md));
    uct_config_release(md_config);
    UCS_REQUIRE(uct_md_query(md, &md_attr));
    UCS_REQUIRE(uct_md_query_tl_resources(md, &tl, &num_tl));
    REQUIRE_EQ(num_tl, 1); /* the gdr_copy md has one resource, gdr_copy */
    REQUIRE(strcmp(tl[0].tl_name, "gdr_copy") == 0);

    UCS_REQUIRE(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async));
    UCS_REQUIRE(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker));
    UCS_REQUIRE(uct_md_iface_config_read(md, "gdr_copy", NULL, NULL, &iface_config));
    uct_iface_params_t params = {
        .field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
        .open_mode  = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device = { .tl_name = tl[0].tl_name, .dev_name = tl[0].dev_name },
    };
    UCS_REQUIRE(uct_iface_open(md, worker, &params, iface_config, &iface));
    uct_config_release(iface_config);
    UCS_REQUIRE(uct_iface_query(iface, &iface_attr));
    REQUIRE(iface_attr.cap.flags & UCT_IFACE_FLAG_PUT_SHORT);
    REQUIRE(iface_attr.cap.flags & UCT_IFACE_FLAG_GET_SHORT);
    size_t max_put = iface_attr.cap.put.max_short, max_get = iface_attr.cap.get.max_short;

    void *dev_addr = malloc(iface_attr.device_addr_len + 1);
    void *iface_addr = malloc(iface_attr.iface_addr_len + 1);
    REQUIRE(dev_addr != NULL && iface_addr != NULL);
    UCS_REQUIRE(uct_iface_get_device_address(iface, dev_addr));
    UCS_REQUIRE(uct_iface_get_address(iface, iface_addr));
    uct_ep_params_t ep_params = {
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                      UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface = iface, .dev_addr = dev_addr, .iface_addr = iface_addr,
    };
    UCS_REQUIRE(uct_ep_create(&ep_params, &ep));

    /* The GPU buffer, filled with a known pattern. */
    CU_REQUIRE(gpu_vmm() ? gpu_vmm_alloc(&gpu, buf_len) : cuMemAlloc(&gpu, buf_len));
    shadow = malloc(buf_len);
    uint8_t *host = malloc(buf_len), *back = malloc(buf_len);
    REQUIRE(shadow && host && back);
    for (size_t i = 0; i < buf_len; i++) shadow[i] = pattern(i, 0);
    CU_REQUIRE(cuMemcpyHtoD(gpu, shadow, buf_len));

    /* Registrations: the whole buffer and a sub-range with an unaligned start. */
    static const size_t reg_offsets[] = { 0, 4097 };
    static const size_t offsets[] = { 0, 1, 3, 7, 63, 255, 4093, 65535, 65537 };
    static const size_t lengths[] = { 1, 2, 3, 7, 8, 15, 64, 65, 255, 1000, 4096, 4099, 65536 };
    unsigned round = 1;
    for (size_t r = 0; r < sizeof(reg_offsets) / sizeof(reg_offsets[0]); r++) {
        size_t roff = reg_offsets[r], rlen = buf_len - roff - 1;
        uct_mem_h memh;
        uct_rkey_bundle_t rkey;
        void *rkey_buf = malloc(md_attr.rkey_packed_size + 1);
        REQUIRE(rkey_buf != NULL);
        UCS_REQUIRE(uct_md_mem_reg(md, (void *)(uintptr_t)(gpu + roff), rlen, UCT_MD_MEM_ACCESS_ALL,
                                   &memh));
        UCS_REQUIRE(uct_md_mkey_pack(md, memh, rkey_buf));
        UCS_REQUIRE(uct_rkey_unpack(comp, rkey_buf, &rkey));
        for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
            for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++, round++) {
                size_t off = roff + offsets[o], len = lengths[l];
                if (off + len > roff + rlen) continue;
                if (len <= max_put) {
                    for (size_t i = 0; i < len; i++) host[i] = pattern(i, round);
                    UCS_CHECK(uct_ep_put_short(ep, host, (unsigned)len, gpu + off, rkey.rkey));
                    UCS_CHECK(uct_ep_flush(ep, 0, NULL));
                    memcpy(shadow + off, host, len);
                    verify(gpu, "put_short", off, len);
                    checks++;
                }
                if (len <= max_get) {
                    memset(back, 0xA5, len + 2);
                    UCS_CHECK(uct_ep_get_short(ep, back + 1, (unsigned)len, gpu + off, rkey.rkey));
                    UCS_CHECK(uct_ep_flush(ep, 0, NULL));
                    int same = memcmp(back + 1, shadow + off, len) == 0 && back[0] == 0xA5 &&
                               back[len + 1] == 0xA5;
                    if (!same)
                        printf("get_short off=%zu len=%zu: other bytes, or a guard byte changed\n",
                               off, len);
                    CHECK(same);
                    checks++;
                }
            }
        }
        UCS_CHECK(uct_rkey_release(comp, &rkey));
        UCS_CHECK(uct_md_mem_dereg(md, memh));
        free(rkey_buf);
    }
    verify(gpu, "final", 0, 0);

    uct_ep_destroy(ep);
    uct_iface_close(iface);
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    uct_release_tl_resource_list(tl);
    uct_md_close(md);
    uct_release_component_list(components);
    CHECK_EQ(gpu_free(gpu), CUDA_SUCCESS);
    printf("uct_gdr_check: %u transfers checked over %zu bytes of %s memory (put_short up to "
           "%zu B, get_short up to %zu B)\n", checks, buf_len, gpu_vmm() ? "cuMemCreate" : "cuMemAlloc",
           max_put, max_get);
    return check_done("uct_gdr_check");
}
