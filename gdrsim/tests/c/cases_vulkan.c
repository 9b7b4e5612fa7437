/* Cases of what the library's Vulkan import backend needs, used directly: exportable VMM
 * allocations (cuMemCreate with the POSIX fd handle type, cuMemRetainAllocationHandle,
 * cuMemGetAllocationPropertiesFromHandle, cuMemExportToShareableHandle) and the Vulkan
 * stand-in (build/sim/vulkan/libvulkan.so.1, which must come first on LD_LIBRARY_PATH), which
 * imports the export fds and maps them. Each case adapts to GDRSIM_VULKAN (run.sh runs the
 * suite under every situation). */
#include "sim.h"
#include "sim_vk.h"

#include <sys/stat.h>

static const char *const EXTS[] = {"VK_KHR_external_memory", "VK_KHR_external_memory_fd"};

static int situation(const char *s)
{
    const char *v = getenv("GDRSIM_VULKAN");
    return strcmp(v ? v : "ok", s) == 0;
}

#define VK_GET(v, field, from, handle, name)                               \
    do {                                                                   \
        (v)->field = (__typeof__((v)->field))(v)->from((handle), (name));  \
        REQUIRE((v)->field != NULL);                                       \
    } while (0)

/* Loads libvulkan.so.1 as the library does (it must be the stand-in) and creates an instance
 * for Vulkan 1.1; returns vkCreateInstance's result. */
static VkResult vk_open(struct vk *v)
{
    memset(v, 0, sizeof(*v));
    v->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    int standin = v->lib != NULL && dlsym(v->lib, "gdrsim_vulkan_standin") != NULL;
    if (!standin)
        fprintf(stderr, "    libvulkan.so.1 is not the stand-in: put build/sim/vulkan first on "
                        "LD_LIBRARY_PATH\n");
    REQUIRE(standin);
    v->gipa = (PFN_vkGetInstanceProcAddr)dlsym(v->lib, "vkGetInstanceProcAddr");
    REQUIRE(v->gipa != NULL);
    VK_GET(v, create_instance, gipa, NULL, "vkCreateInstance");
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "sim_tests", 1, NULL, 0,
                             VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    VkResult r = v->create_instance(&ci, NULL, &v->instance);
    if (r != VK_SUCCESS) {
        v->instance = NULL;
        return r;
    }
    VK_GET(v, destroy_instance, gipa, v->instance, "vkDestroyInstance");
    VK_GET(v, enumerate_physical_devices, gipa, v->instance, "vkEnumeratePhysicalDevices");
    VK_GET(v, properties, gipa, v->instance, "vkGetPhysicalDeviceProperties");
    VK_GET(v, properties2, gipa, v->instance, "vkGetPhysicalDeviceProperties2");
    VK_GET(v, memory_properties, gipa, v->instance, "vkGetPhysicalDeviceMemoryProperties");
    VK_GET(v, device_extensions, gipa, v->instance, "vkEnumerateDeviceExtensionProperties");
    VK_GET(v, create_device, gipa, v->instance, "vkCreateDevice");
    VK_GET(v, gdpa, gipa, v->instance, "vkGetDeviceProcAddr");
    return VK_SUCCESS;
}

/* Picks the one physical device; 0 when there is none. */
static int vk_physical(struct vk *v)
{
    uint32_t n = 9;
    CHECK_EQ(v->enumerate_physical_devices(v->instance, &n, NULL), VK_SUCCESS);
    if (n == 0)
        return 0;
    CHECK_EQ(n, 1);
    CHECK_EQ(v->enumerate_physical_devices(v->instance, &n, &v->pd), VK_SUCCESS);
    CHECK(v->pd != NULL);
    return 1;
}

/* Creates a device with one queue of family 0 and the extensions given. */
static VkResult vk_device(struct vk *v, const char *const *exts, uint32_t n)
{
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio};
    VkDeviceCreateInfo ci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &q, 0, NULL, n, exts, NULL};
    VkDevice d = NULL;
    VkResult r = v->create_device(v->pd, &ci, NULL, &d);
    if (r != VK_SUCCESS)
        return r;
    v->device = d;
    VK_GET(v, destroy_device, gdpa, d, "vkDestroyDevice");
    VK_GET(v, allocate, gdpa, d, "vkAllocateMemory");
    VK_GET(v, free, gdpa, d, "vkFreeMemory");
    VK_GET(v, map, gdpa, d, "vkMapMemory");
    VK_GET(v, unmap, gdpa, d, "vkUnmapMemory");
    return VK_SUCCESS;
}

/* vk_open, vk_physical and vk_device with both extensions, each required to succeed. */
static void vk_ready(struct vk *v)
{
    REQUIRE_EQ(vk_open(v), VK_SUCCESS);
    REQUIRE(vk_physical(v));
    REQUIRE_EQ(vk_device(v, EXTS, 2), VK_SUCCESS);
}

static void vk_close(struct vk *v)
{
    if (v->device)
        v->destroy_device(v->device, NULL);
    if (v->instance)
        v->destroy_instance(v->instance, NULL);
    v->device = NULL;
    v->instance = NULL;
}

/* vkAllocateMemory importing `fd`. */
static VkResult vk_import(struct vk *v, uint64_t size, uint32_t type, uint32_t handle_type, int fd,
                          VkDeviceMemory *m)
{
    VkImportMemoryFdInfoKHR imp = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, NULL, handle_type, fd};
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &imp, size, type};
    return v->allocate(v->device, &ai, NULL, m);
}

/* The first memory type with all of `want` and none of `refuse`, or -1. */
static int mem_type(struct vk *v, uint32_t want, uint32_t refuse)
{
    VkPhysicalDeviceMemoryProperties mp;
    memset(&mp, 0, sizeof(mp));
    v->memory_properties(v->pd, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        uint32_t f = mp.memoryTypes[i].propertyFlags;
        if ((f & want) == want && (f & refuse) == 0)
            return (int)i;
    }
    return -1;
}

#define DL VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
#define HV VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
#define OPAQUE VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT

static size_t granularity(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
}

static CUresult vmm_create(CUmemGenericAllocationHandle *h, size_t size, int types)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)types;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return cuMemCreate(h, size, &prop, 0);
}

/* Reserves a range for `h` and maps it there, read-write. */
static CUdeviceptr vmm_map(CUmemGenericAllocationHandle h, size_t size)
{
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, size, 0, 0, 0));
    CU(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, size, &acc, 1));
    return va;
}

static void vmm_unmap(CUdeviceptr va, size_t size)
{
    CU(cuMemUnmap(va, size));
    CU(cuMemAddressFree(va, size));
}

static int vmm_export(CUmemGenericAllocationHandle h)
{
    int fd = -1;
    CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0);
    return fd;
}

static int fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static size_t mem_free(void)
{
    size_t f = 0, t = 0;
    CU(cuMemGetInfo(&f, &t));
    return f;
}

static void check_no_vk_objects(void)
{
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_vmm_exports, 0);
    CHECK_EQ(c.live_vk_imports, 0);
    CHECK_EQ(c.live_vk_mappings, 0);
    CHECK_EQ(c.live_vk_devices, 0);
    CHECK_EQ(c.live_vk_instances, 0);
    CHECK_EQ(c.live_vk_import_bytes, 0);
}

/* BAR1 in use (gdrsim_bar1_info). */
static uint64_t bar1_used(void)
{
    uint64_t total = 0, used = 0, vram = 0;
    CHECK_EQ(gdrsim_bar1_info(&total, &used, &vram), 0);
    return used;
}

/* The CUDA side: handle types, references, properties, export fds. */
int t_vmm_export(void)
{
    cuda_up();
    size_t g = granularity();
    CUmemGenericAllocationHandle plain, h, x;
    CU(vmm_create(&plain, g, CU_MEM_HANDLE_TYPE_NONE));
    CU(vmm_create(&h, 2 * g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CHECK_EQ(vmm_create(&x, g, CU_MEM_HANDLE_TYPE_WIN32), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ(vmm_create(&x, g, CU_MEM_HANDLE_TYPE_FABRIC), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ(vmm_create(&x, g, 0x100), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(counters().live_allocations, 2);
    CUdeviceptr va = vmm_map(h, 2 * g);

    /* retain at an inner address: the same handle value, one more reference */
    CUmemGenericAllocationHandle got = 0;
    CU(cuMemRetainAllocationHandle(&got, (void *)(va + g + 12345)));
    CHECK(got == h);
    CHECK_EQ(cuMemRetainAllocationHandle(NULL, (void *)va), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr d = dalloc(4096);
    CHECK_EQ(cuMemRetainAllocationHandle(&got, (void *)d), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemRetainAllocationHandle(&got, &got), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr rsv;
    CU(cuMemAddressReserve(&rsv, g, 0, 0, 0));
    CHECK_EQ(cuMemRetainAllocationHandle(&got, (void *)rsv), CUDA_ERROR_INVALID_VALUE);
    CU(cuMemAddressFree(rsv, g));

    CUmemAllocationProp p;
    memset(&p, 0x5a, sizeof(p));
    CU(cuMemGetAllocationPropertiesFromHandle(&p, h));
    CHECK_EQ(p.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CHECK_EQ(p.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_EQ(p.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ(p.location.id, 0);
    CHECK(p.win32HandleMetaData == NULL);
    CHECK_EQ(p.allocFlags.gpuDirectRDMACapable, 0);
    CU(cuMemGetAllocationPropertiesFromHandle(&p, plain));
    CHECK_EQ(p.requestedHandleTypes, CU_MEM_HANDLE_TYPE_NONE);
    CHECK_EQ(cuMemGetAllocationPropertiesFromHandle(&p, h + 1000), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemGetAllocationPropertiesFromHandle(NULL, h), CUDA_ERROR_INVALID_VALUE);

    /* two exports, two fds */
    int fd1 = vmm_export(h), fd2 = vmm_export(h), fd3 = -1;
    CHECK(fd1 != fd2);
    CHECK_EQ(counters().live_vmm_exports, 2);
    CHECK_EQ(cuMemExportToShareableHandle(&fd3, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemExportToShareableHandle(&fd3, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemExportToShareableHandle(&fd3, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemExportToShareableHandle(NULL, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(fd3, -1);
    CHECK_EQ(counters().live_vmm_exports, 2);
    /* an export fd is a handle for an importer, not something to map */
    CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd1, 0) == MAP_FAILED && errno == ENODEV);

    /* queries on VMM addresses */
    CUdeviceptr base = 0;
    size_t len = 0;
    CU(cuMemGetAddressRange(&base, &len, va + g + 5));
    CHECK(base == va && len == 2 * g);
    int ord = -1;
    CU(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 8));
    CHECK_EQ(ord, 0);
    unsigned int types = 9;
    CUpointer_attribute which = CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES;
    void *vals[1] = {&types};
    CU(cuPointerGetAttributes(1, &which, vals, va));
    CHECK_EQ(types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUuuid uuid;
    CU(cuDeviceGetUuid(&uuid, 0));

    /* the retained reference needs its own release */
    CU(cuMemRelease(h));
    CU(cuMemRelease(h));
    CHECK_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(counters().live_allocations, 2); /* plain and d */
    vmm_unmap(va, 2 * g);
    /* released and unmapped: the export fds still hold the memory, until the last is closed */
    size_t f0 = mem_free();
    CHECK_EQ(close(fd1), 0);
    CHECK_EQ(mem_free(), f0);
    CHECK_EQ(counters().live_vmm_exports, 1);
    CHECK_EQ(close(fd2), 0);
    CHECK_EQ(mem_free(), f0 + 2 * g);
    CU(cuMemRelease(plain));
    CU(cuMemFree(d));
    check_no_vk_objects();
    CHECK_EQ(counters().live_allocations, 0);

    /* the entry points the library resolves, by base name at the driver's version */
    static const char *const names[][2] = {
        {"cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle"},
        {"cuMemGetAllocationPropertiesFromHandle", "cuMemGetAllocationPropertiesFromHandle"},
        {"cuMemExportToShareableHandle", "cuMemExportToShareableHandle"},
        {"cuMemRelease", "cuMemRelease"},
        {"cuMemGetAddressRange", "cuMemGetAddressRange_v2"},
        {"cuDeviceGetUuid", "cuDeviceGetUuid_v2"},
    };
    int ver = 0;
    CU(cuDriverGetVersion(&ver));
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult q = 7;
        CU(cuGetProcAddress_v2(names[k][0], &fn, ver, 0, &q));
        CHECK_EQ(q, CU_GET_PROC_ADDRESS_SUCCESS);
        CHECK(fn == dlsym(RTLD_DEFAULT, names[k][1]));
    }
    return CASE_PASS;
}

/* The instance, the physical device and the device, in each GDRSIM_VULKAN situation. */
int t_vk_device(void)
{
    cuda_up();
    struct vk v;
    VkResult r = vk_open(&v);
    if (situation("noinstance")) {
        CHECK_EQ(r, VK_ERROR_INCOMPATIBLE_DRIVER);
        check_no_vk_objects();
        return CASE_PASS;
    }
    REQUIRE_EQ(r, VK_SUCCESS);
    CHECK_EQ(counters().live_vk_instances, 1);
    CHECK(v.gipa(v.instance, "vkQueueSubmit") == NULL);
    CHECK(v.gipa(NULL, "vkDestroyInstance") == NULL);
    uint32_t n = 7;
    CHECK_EQ(v.enumerate_physical_devices(v.instance, &n, NULL), VK_SUCCESS);
    if (situation("nodevice")) {
        CHECK_EQ(n, 0);
        vk_close(&v);
        check_no_vk_objects();
        return CASE_PASS;
    }
    CHECK_EQ(n, 1);
    VkPhysicalDevice pds[2] = {NULL, NULL};
    n = 0;
    CHECK_EQ(v.enumerate_physical_devices(v.instance, &n, pds), VK_INCOMPLETE);
    CHECK_EQ(n, 0);
    n = 2;
    CHECK_EQ(v.enumerate_physical_devices(v.instance, &n, pds), VK_SUCCESS);
    CHECK_EQ(n, 1);
    v.pd = pds[0];
    CHECK(v.pd != NULL && pds[1] == NULL);

    VkPhysicalDeviceIDProperties id;
    memset(&id, 0, sizeof(id));
    id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
    VkPhysicalDeviceProperties2 p2;
    memset(&p2, 0, sizeof(p2));
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &id;
    v.properties2(v.pd, &p2);
    CHECK_EQ(p2.properties.vendorID, 0x10de);
    CHECK_EQ(p2.properties.deviceType, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU);
    CHECK(strcmp(p2.properties.deviceName, "gdrsim Vulkan stand-in") == 0);
    CHECK(p2.properties.apiVersion >= VK_API_VERSION_1_1);
    uint64_t align = 0;
    memcpy(&align, (char *)p2.properties.limits + VK_LIMITS_MIN_MEMORY_MAP_ALIGNMENT, sizeof(align));
    CHECK_EQ(align, 64);
    CUuuid uuid;
    CU(cuDeviceGetUuid(&uuid, 0));
    if (situation("otheruuid"))
        CHECK(memcmp(id.deviceUUID, uuid.bytes, 16) != 0);
    else
        CHECK(memcmp(id.deviceUUID, uuid.bytes, 16) == 0);
    CHECK_EQ(id.deviceLUIDValid, 0);
    VkPhysicalDeviceProperties p1;
    memset(&p1, 0, sizeof(p1));
    v.properties(v.pd, &p1);
    CHECK(memcmp(&p1, &p2.properties, sizeof(p1)) == 0);

    VkPhysicalDeviceMemoryProperties mp;
    memset(&mp, 0xee, sizeof(mp));
    v.memory_properties(v.pd, &mp);
    CHECK_EQ(mp.memoryHeapCount, 2);
    CHECK_EQ(mp.memoryHeaps[0].flags, VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
    CHECK(mp.memoryHeaps[0].size >= (64u << 20));
    CHECK_EQ(mp.memoryHeaps[1].flags, 0);
    CHECK_EQ(mp.memoryTypes[0].propertyFlags, DL);
    if (situation("nohostvisible")) {
        CHECK_EQ(mp.memoryTypeCount, 2);
        CHECK_EQ(mem_type(&v, DL | HV, 0), -1);
    } else {
        CHECK_EQ(mp.memoryTypeCount, 3);
        CHECK_EQ(mp.memoryTypes[1].propertyFlags, DL | HV | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        CHECK_EQ(mp.memoryTypes[1].heapIndex, 0);
        CHECK_EQ(mem_type(&v, DL | HV, 0), 1);
    }
    CHECK_EQ(mp.memoryTypes[mp.memoryTypeCount - 1].propertyFlags,
             HV | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    CHECK_EQ(mp.memoryTypes[mp.memoryTypeCount - 1].heapIndex, 1);

    VkExtensionProperties ext[4];
    uint32_t want = situation("noext") ? 1 : 2;
    n = 0;
    CHECK_EQ(v.device_extensions(v.pd, NULL, &n, NULL), VK_SUCCESS);
    CHECK_EQ(n, want);
    n = 1;
    CHECK_EQ(v.device_extensions(v.pd, NULL, &n, ext), want > 1 ? VK_INCOMPLETE : VK_SUCCESS);
    CHECK(strcmp(ext[0].extensionName, EXTS[0]) == 0);
    n = 4;
    CHECK_EQ(v.device_extensions(v.pd, NULL, &n, ext), VK_SUCCESS);
    CHECK_EQ(n, want);
    if (want > 1)
        CHECK(strcmp(ext[1].extensionName, EXTS[1]) == 0);
    CHECK_EQ(v.device_extensions(v.pd, "VK_LAYER_KHRONOS_validation", &n, NULL), VK_ERROR_LAYER_NOT_PRESENT);

    static const char *const swapchain[] = {"VK_KHR_swapchain"};
    CHECK_EQ(vk_device(&v, swapchain, 1), VK_ERROR_EXTENSION_NOT_PRESENT);
    r = vk_device(&v, EXTS, 2);
    if (situation("noext")) {
        CHECK_EQ(r, VK_ERROR_EXTENSION_NOT_PRESENT);
        REQUIRE_EQ(vk_device(&v, EXTS, 1), VK_SUCCESS);
    } else {
        REQUIRE_EQ(r, VK_SUCCESS);
    }
    CHECK_EQ(counters().live_vk_devices, 1);
    CHECK(v.gdpa(v.device, "vkCreateDevice") == NULL); /* not a device-level command */
    CHECK(v.gdpa(v.device, "vkMapMemory") != NULL);

    /* a second instance and device beside the first */
    struct vk w;
    REQUIRE_EQ(vk_open(&w), VK_SUCCESS);
    REQUIRE(vk_physical(&w));
    CHECK(w.pd != v.pd);
    REQUIRE_EQ(vk_device(&w, EXTS, 1), VK_SUCCESS);
    CHECK_EQ(counters().live_vk_instances, 2);
    CHECK_EQ(counters().live_vk_devices, 2);
    vk_close(&w);
    vk_close(&v);
    check_no_vk_objects();
    return CASE_PASS;
}

/* Import, map, the bytes shared with CUDA, CUDA letting go while the import lives. */
int t_vk_import(void)
{
    SKIP_IF(situation("noinstance") || situation("nodevice"));
    cuda_up();
    struct vk v;
    REQUIRE_EQ(vk_open(&v), VK_SUCCESS);
    REQUIRE(vk_physical(&v));
    size_t g = granularity(), size = 2 * g;
    CUmemGenericAllocationHandle h;
    CU(vmm_create(&h, size, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUdeviceptr va = vmm_map(h, size);
    CU(cuMemsetD8(va, 0, size));
    int fd = vmm_export(h);
    VkDeviceMemory m = 0;
    if (situation("noext")) {
        /* a device without VK_KHR_external_memory_fd imports nothing */
        REQUIRE_EQ(vk_device(&v, EXTS, 1), VK_SUCCESS);
        CHECK_EQ(vk_import(&v, size, 0, OPAQUE, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
        CHECK(fd_open(fd));
        close(fd);
        goto cleanup;
    }
    REQUIRE_EQ(vk_device(&v, EXTS, 2), VK_SUCCESS);
    int bar = mem_type(&v, DL | HV, 0), host = mem_type(&v, HV, DL);
    CHECK(host >= 0);

    /* refused imports leave the fd open */
    CHECK_EQ(vk_import(&v, size - g, 0, OPAQUE, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    CHECK_EQ(vk_import(&v, size + g, 0, OPAQUE, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    CHECK_EQ(vk_import(&v, size, (uint32_t)host, OPAQUE, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    CHECK_EQ(vk_import(&v, size, 31, OPAQUE, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    CHECK_EQ(vk_import(&v, size, 0, 0x2 /* OPAQUE_WIN32 */, fd, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    int bogus = open("/dev/null", O_RDONLY);
    CHECK(bogus >= 0);
    CHECK_EQ(vk_import(&v, size, 0, OPAQUE, bogus, &m), VK_ERROR_INVALID_EXTERNAL_HANDLE);
    CHECK(fd_open(bogus));
    close(bogus);
    VkMemoryAllocateInfo plain = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, size, 0};
    CHECK_EQ(v.allocate(v.device, &plain, NULL, &m), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd));
    CHECK_EQ(counters().live_vmm_exports, 1);
    CHECK_EQ(counters().live_vk_imports, 0);

    void *q = NULL;
    if (bar < 0) {
        /* no host-visible device-local type: the import works, the mapping does not */
        CHECK_EQ(vk_import(&v, size, 0, OPAQUE, fd, &m), VK_SUCCESS);
        CHECK_EQ(v.map(v.device, m, 0, VK_WHOLE_SIZE, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
        v.free(v.device, m, NULL);
        goto cleanup;
    }
    uint64_t bar1_0 = bar1_used(), made0 = counters().vk_imports_made;
    CHECK_EQ(vk_import(&v, size, (uint32_t)bar, OPAQUE, fd, &m), VK_SUCCESS);
    CHECK(!fd_open(fd)); /* the import owns the fd now */
    CHECK_EQ(counters().live_vmm_exports, 0);
    CHECK_EQ(counters().live_vk_imports, 1);
    CHECK_EQ(counters().vk_imports_made, made0 + 1);
    CHECK_EQ(counters().live_vk_import_bytes, size);
    CHECK_EQ(bar1_used(), bar1_0 + size); /* the import holds BAR1 for the whole allocation */

    /* a mapping at an offset shows what the GPU sees, both ways; it holds no BAR1 */
    uint64_t off = g + 3 * 4096 + 40;
    unsigned char *p = NULL;
    REQUIRE_EQ(v.map(v.device, m, off, 256, 0, (void **)&p), VK_SUCCESS);
    CHECK_EQ(counters().live_vk_mappings, 1);
    CHECK_EQ(bar1_used(), bar1_0 + size);
    CHECK_EQ(v.map(v.device, m, 0, VK_WHOLE_SIZE, 0, &q), VK_ERROR_MEMORY_MAP_FAILED); /* mapped already */
    p[0] = 0x5a;
    p[255] = 0xa5;
    unsigned char b[256];
    CU(cuMemcpyDtoH(b, va + off, sizeof(b)));
    CHECK_EQ(b[0], 0x5a);
    CHECK_EQ(b[255], 0xa5);
    CU(cuMemsetD32(va + off + 4, 0xdeadbeef, 2));
    uint32_t word = 0;
    memcpy(&word, p + 8, sizeof(word));
    CHECK_EQ(word, 0xdeadbeef);
    v.unmap(v.device, m);
    CHECK_EQ(counters().live_vk_mappings, 0);
    CHECK_EQ(probe(p, 0, NULL), SIGSEGV);

    /* ranges */
    CHECK_EQ(v.map(v.device, m, size, 1, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(v.map(v.device, m, size, VK_WHOLE_SIZE, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(v.map(v.device, m, 0, size + 1, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(v.map(v.device, m, off, 0, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(v.map(v.device, m, 0, 64, 1, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(v.map(v.device, m + 1, 0, 64, 0, &q), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(counters().live_vk_mappings, 0);
    CHECK_EQ(v.map(v.device, m, size - 4096, VK_WHOLE_SIZE, 0, &q), VK_SUCCESS);
    v.unmap(v.device, m);
    v.unmap(v.device, m); /* not mapped: nothing */

    /* CUDA lets go of everything; the import still holds the bytes */
    REQUIRE_EQ(v.map(v.device, m, 0, VK_WHOLE_SIZE, 0, (void **)&p), VK_SUCCESS);
    size_t before = mem_free();
    CU(cuMemUnmap(va, size));
    CU(cuMemRelease(h));
    CU(cuMemAddressFree(va, size));
    CHECK_EQ(counters().live_allocations, 0);
    CHECK_EQ(mem_free(), before);
    CHECK_EQ(p[off], 0x5a);
    CHECK_EQ(p[off + 255], 0xa5);
    p[1] = 0x77;
    CHECK_EQ(p[1], 0x77);
    /* vkFreeMemory unmaps and lets go: the memory and its BAR1 are free now */
    v.free(v.device, m, NULL);
    CHECK_EQ(mem_free(), before + size);
    CHECK_EQ(bar1_used(), bar1_0);
    CHECK_EQ(counters().vk_imports_made, made0 + 1);
    CHECK_EQ(probe(p + off, 0, NULL), SIGSEGV);
    v.free(v.device, 0, NULL); /* VK_NULL_HANDLE: nothing */
    vk_close(&v);
    check_no_vk_objects();
    return CASE_PASS;

cleanup:
    vmm_unmap(va, size);
    CU(cuMemRelease(h));
    vk_close(&v);
    check_no_vk_objects();
    CHECK_EQ(counters().live_allocations, 0);
    return CASE_PASS;
}

/* GDRSIM_FAIL rules naming Vulkan functions. */
int t_vk_fail(void)
{
    SKIP_IF(!situation("ok"));
    cuda_up();
    struct vk v;
    CHECK_EQ(gdrsim_set_fail("vkCreateInstance:1:VK_ERROR_INITIALIZATION_FAILED,"
                             "vkEnumeratePhysicalDevices:1:-3,vkCreateDevice:1:VK_ERROR_DEVICE_LOST"),
             0);
    CHECK_EQ(vk_open(&v), VK_ERROR_INITIALIZATION_FAILED);
    CHECK_EQ(counters().live_vk_instances, 0);
    REQUIRE_EQ(vk_open(&v), VK_SUCCESS);
    uint32_t n = 0;
    CHECK_EQ(v.enumerate_physical_devices(v.instance, &n, NULL), VK_ERROR_INITIALIZATION_FAILED);
    REQUIRE(vk_physical(&v));
    CHECK_EQ(vk_device(&v, EXTS, 2), VK_ERROR_DEVICE_LOST);
    CHECK_EQ(counters().live_vk_devices, 0);
    REQUIRE_EQ(vk_device(&v, EXTS, 2), VK_SUCCESS);
    CHECK_EQ(gdrsim_set_fail("vkMapMemory:1:5"), EINVAL);    /* a VkResult error is negative */
    CHECK_EQ(gdrsim_set_fail("vkFreeMemory:1:-5"), EINVAL);  /* no result to fail with */
    CHECK_EQ(gdrsim_set_fail("vkMapMemory:1:EIO"), EINVAL);
    CHECK_EQ(gdrsim_set_fail("vkAllocateMemory:1:VK_ERROR_OUT_OF_DEVICE_MEMORY,vkMapMemory:2:-5"), 0);
    size_t g = granularity();
    CUmemGenericAllocationHandle h;
    CU(vmm_create(&h, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    int fd = vmm_export(h);
    VkDeviceMemory m;
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd, &m), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd)); /* a failed import leaves the fd to the caller */
    CHECK_EQ(counters().live_vk_imports, 0);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd, &m), VK_SUCCESS);
    void *p;
    CHECK_EQ(v.map(v.device, m, 0, 64, 0, &p), VK_SUCCESS);
    v.unmap(v.device, m);
    CHECK_EQ(v.map(v.device, m, 0, 64, 0, &p), VK_ERROR_MEMORY_MAP_FAILED);
    CHECK_EQ(counters().live_vk_mappings, 0);
    CHECK_EQ(v.map(v.device, m, 0, 64, 0, &p), VK_SUCCESS);
    CHECK_EQ(gdrsim_set_fail(NULL), 0);
    /* vkDestroyDevice frees what is left on it */
    CU(cuMemRelease(h));
    vk_close(&v);
    check_no_vk_objects();
    return CASE_PASS;
}

/* A forked child cannot use its parent's objects; the parent's keep working. */
int t_vk_fork(void)
{
    SKIP_IF(!situation("ok") || getenv("GDRSIM_FAIL") != NULL);
    cuda_up();
    struct vk v;
    vk_ready(&v);
    size_t g = granularity();
    CUmemGenericAllocationHandle h;
    CU(vmm_create(&h, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUdeviceptr va = vmm_map(h, g);
    int fd = vmm_export(h), fd2 = vmm_export(h);
    VkDeviceMemory m;
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd, &m), VK_SUCCESS);
    unsigned char *p;
    REQUIRE_EQ(v.map(v.device, m, 0, VK_WHOLE_SIZE, 0, (void **)&p), VK_SUCCESS);
    p[0] = 1;
    fflush(NULL);
    pid_t c = fork();
    if (c == 0) {
        void *q;
        VkDeviceMemory m2;
        if (probe(p, 0, NULL) != SIGSEGV) /* the mapping is not inherited */
            _exit(10);
        if (v.map(v.device, m, 0, 64, 0, &q) != VK_ERROR_MEMORY_MAP_FAILED)
            _exit(11);
        if (vk_import(&v, g, 1, OPAQUE, fd2, &m2) != VK_ERROR_INITIALIZATION_FAILED)
            _exit(12);
        struct gdrsim_counters k;
        gdrsim_get_counters(&k, sizeof(k));
        if (k.live_vk_imports || k.live_vk_devices || k.live_vk_instances || k.live_vmm_exports)
            _exit(13);
        /* no effect on the parent */
        v.free(v.device, m, NULL);
        v.unmap(v.device, m);
        vk_close(&v);
        /* a child with a GPU and an instance of its own cannot import its parent's export */
        struct vk w;
        cuda_up();
        if (vk_open(&w) != VK_SUCCESS || !vk_physical(&w) || vk_device(&w, EXTS, 2) != VK_SUCCESS)
            _exit(14);
        if (vk_import(&w, g, 1, OPAQUE, fd2, &m2) != VK_ERROR_INVALID_EXTERNAL_HANDLE)
            _exit(15);
        vk_close(&w);
        _exit(0);
    }
    int status = 0;
    CHECK(c > 0 && waitpid(c, &status, 0) == c);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK_EQ(p[0], 1);
    p[1] = 2;
    unsigned char b = 0;
    CU(cuMemcpyDtoH(&b, va + 1, 1));
    CHECK_EQ(b, 2);
    struct gdrsim_counters k = counters();
    CHECK_EQ(k.live_vk_imports, 1);
    CHECK_EQ(k.live_vk_mappings, 1);
    CHECK_EQ(k.live_vk_devices, 1);
    CHECK_EQ(k.live_vk_instances, 1);
    CHECK_EQ(k.live_vmm_exports, 1);
    CHECK_EQ(close(fd2), 0);
    v.free(v.device, m, NULL);
    vk_close(&v);
    vmm_unmap(va, g);
    CU(cuMemRelease(h));
    check_no_vk_objects();
    return CASE_PASS;
}

struct worker {
    struct vk *v;
    int type;
    int ok;
};

static void *import_loop(void *arg)
{
    struct worker *w = arg;
    size_t g = granularity();
    for (int k = 0; k < 20; k++) {
        CUmemGenericAllocationHandle h;
        CU(vmm_create(&h, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CUdeviceptr va = vmm_map(h, g);
        int fd = vmm_export(h);
        VkDeviceMemory m;
        CHECK_EQ(vk_import(w->v, g, (uint32_t)w->type, OPAQUE, fd, &m), VK_SUCCESS);
        unsigned char *p;
        REQUIRE_EQ(w->v->map(w->v->device, m, 4096, 4096, 0, (void **)&p), VK_SUCCESS);
        p[7] = (unsigned char)(k + 1);
        unsigned char b = 0;
        CU(cuMemcpyDtoH(&b, va + 4096 + 7, 1));
        CHECK_EQ(b, k + 1);
        vmm_unmap(va, g);
        CU(cuMemRelease(h));
        if (k % 2)
            w->v->unmap(w->v->device, m);
        w->v->free(w->v->device, m, NULL);
    }
    w->ok = 1;
    return NULL;
}

/* Imports, maps and frees from several threads on one device. */
int t_vk_threads(void)
{
    /* the four threads' imports may hold 8 MiB of BAR1 at once, and 16 MiB of the limit */
    SKIP_IF(!situation("ok") || getenv("GDRSIM_BAR1_SIZE") != NULL ||
            getenv("GDRSIM_VK_IMPORT_LIMIT") != NULL);
    cuda_up();
    struct vk v;
    vk_ready(&v);
    size_t free0 = mem_free();
    pthread_t t[4];
    struct worker w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = (struct worker){&v, mem_type(&v, DL | HV, 0), 0};
        REQUIRE_EQ(pthread_create(&t[k], NULL, import_loop, &w[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        CHECK_EQ(pthread_join(t[k], NULL), 0);
        CHECK(w[k].ok);
    }
    CHECK_EQ(mem_free(), free0);
    vk_close(&v);
    check_no_vk_objects();
    CHECK_EQ(counters().live_allocations, 0);
    return CASE_PASS;
}

/* Imports hold BAR1 (run.sh sets GDRSIM_BAR1_SIZE=4M for this one): each allocation with a
 * live import, once at its whole size however many imports of it are live, on any device;
 * mappings hold none. */
int t_vk_bar1(void)
{
    SKIP_IF(!env_is("GDRSIM_BAR1_SIZE", "4M") || !situation("ok"));
    cuda_up();
    struct vk v, w;
    vk_ready(&v);
    vk_ready(&w);
    size_t g = granularity();
    CHECK_EQ(g, 2u << 20);
    uint64_t total = 0, used = 0, vram = 0;
    CHECK_EQ(gdrsim_bar1_info(&total, &used, &vram), 0);
    CHECK_EQ(total, 4u << 20);
    CHECK_EQ(used, 0);
    CUmemGenericAllocationHandle a, b, c;
    CU(vmm_create(&a, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CU(vmm_create(&b, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CU(vmm_create(&c, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CHECK_EQ(bar1_used(), 0); /* allocations and exports hold none */
    int fd_c = vmm_export(c);
    CHECK_EQ(bar1_used(), 0);

    VkDeviceMemory a1, a2, a3, b1, c1;
    void *p;
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(a), &a1), VK_SUCCESS);
    CHECK_EQ(bar1_used(), g);
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, vmm_export(a), &a2), VK_SUCCESS); /* another device */
    CHECK_EQ(bar1_used(), g);
    CHECK_EQ(v.map(v.device, a1, 0, VK_WHOLE_SIZE, 0, &p), VK_SUCCESS);
    CHECK_EQ(w.map(w.device, a2, 0, GPU_PAGE, 0, &p), VK_SUCCESS);
    CHECK_EQ(bar1_used(), g);
    v.unmap(v.device, a1);
    CHECK_EQ(bar1_used(), g);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(b), &b1), VK_SUCCESS);
    CHECK_EQ(bar1_used(), total);

    /* full: a new allocation is refused and keeps its fd... */
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd_c, &c1), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd_c));
    CHECK_EQ(counters().live_vmm_exports, 1);
    /* ...while one that holds BAR1 already imports again, and mappings still work */
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(a), &a3), VK_SUCCESS);
    CHECK_EQ(v.map(v.device, b1, 0, VK_WHOLE_SIZE, 0, &p), VK_SUCCESS);
    CHECK_EQ(v.map(v.device, a3, 0, VK_WHOLE_SIZE, 0, &p), VK_SUCCESS);
    CHECK_EQ(bar1_used(), total);
    struct gdrsim_counters k = counters();
    CHECK_EQ(k.live_vk_imports, 4);
    CHECK_EQ(k.live_vk_import_bytes, 4 * g);
    CHECK_EQ(k.vk_imports_made, 4);
    CHECK_EQ(k.live_vk_mappings, 3);

    /* BAR1 goes back with an allocation's last import */
    v.free(v.device, a1, NULL);
    v.free(v.device, a3, NULL);
    CHECK_EQ(bar1_used(), total); /* a2 still holds it */
    w.free(w.device, a2, NULL);
    CHECK_EQ(bar1_used(), g);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd_c, &c1), VK_SUCCESS);
    CHECK_EQ(bar1_used(), total);
    v.free(v.device, b1, NULL);
    v.free(v.device, c1, NULL);
    CHECK_EQ(bar1_used(), 0);
    CHECK_EQ(counters().vk_imports_made, 5);
    CU(cuMemRelease(a));
    CU(cuMemRelease(b));
    CU(cuMemRelease(c));
    vk_close(&w);
    vk_close(&v);
    check_no_vk_objects();
    return CASE_PASS;
}

/* The process's live imports, each at its allocation's size, plus each allocation they import
 * once more, may come to GDRSIM_VK_IMPORT_LIMIT (run.sh sets 10M for this one), over every
 * device; a refused import leaves its fd open, and a free makes room. */
int t_vk_import_limit(void)
{
    SKIP_IF(!env_is("GDRSIM_VK_IMPORT_LIMIT", "10M") || !situation("ok"));
    cuda_up();
    struct vk v, w;
    vk_ready(&v);
    vk_ready(&w);
    size_t g = granularity();
    REQUIRE_EQ(g, 2u << 20);
    CUmemGenericAllocationHandle a, b, big;
    CU(vmm_create(&a, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CU(vmm_create(&b, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CU(vmm_create(&big, 3 * g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));

    /* four imports of a and a itself: 10 MiB, at the limit, over both devices */
    VkDeviceMemory a1, a2, a3, a4, a5, b1, m;
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(a), &a1), VK_SUCCESS);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(a), &a2), VK_SUCCESS);
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, vmm_export(a), &a3), VK_SUCCESS);
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, vmm_export(a), &a4), VK_SUCCESS);
    /* a fifth is refused, on either device, and leaves its fd open */
    int fd = vmm_export(a);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd, &a5), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, fd, &a5), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd));
    struct gdrsim_counters k = counters();
    CHECK_EQ(k.live_vk_imports, 4);
    CHECK_EQ(k.live_vk_import_bytes, 4 * g);
    CHECK_EQ(k.vk_imports_made, 4);
    /* so is a new allocation: its import and itself count too */
    int fd_b = vmm_export(b);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd_b, &b1), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd_b));
    /* frees make room: two imports of a, a, b's import and b come to 10 MiB */
    v.free(v.device, a1, NULL);
    v.free(v.device, a2, NULL);
    CHECK_EQ(vk_import(&v, g, 1, OPAQUE, fd_b, &b1), VK_SUCCESS);
    CHECK(!fd_open(fd_b));
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, fd, &a5), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    /* alone, a 6 MiB allocation and its one import (12 MiB) pass it */
    w.free(w.device, a3, NULL);
    w.free(w.device, a4, NULL);
    v.free(v.device, b1, NULL);
    CHECK_EQ(counters().live_vk_imports, 0);
    int fd_big = vmm_export(big);
    CHECK_EQ(vk_import(&v, 3 * g, 1, OPAQUE, fd_big, &m), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    CHECK(fd_open(fd_big));
    CHECK_EQ(close(fd_big), 0);
    CHECK_EQ(vk_import(&w, g, 1, OPAQUE, fd, &a5), VK_SUCCESS);
    k = counters();
    CHECK_EQ(k.live_vk_imports, 1);
    CHECK_EQ(k.live_vk_import_bytes, g);
    CHECK_EQ(k.vk_imports_made, 6);
    CU(cuMemRelease(a));
    CU(cuMemRelease(b));
    CU(cuMemRelease(big));
    vk_close(&w); /* frees a5 */
    vk_close(&v);
    check_no_vk_objects();
    CHECK_EQ(counters().live_allocations, 0);
    return CASE_PASS;
}

struct slow_call {
    struct vk *v;
    size_t size;
    int fd;
    VkDeviceMemory m;
    VkResult r;
    int done; /* atomic */
};

static void *slow_import(void *arg)
{
    struct slow_call *s = arg;
    s->r = vk_import(s->v, s->size, 1, OPAQUE, s->fd, &s->m);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *slow_free(void *arg)
{
    struct slow_call *s = arg;
    s->v->free(s->v->device, s->m, NULL);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Calls of this thread that take the emulator's lock while another thread's import or free
 * takes its cost; ends with that thread's call still under way. */
static void progress_meanwhile(struct vk *v, VkDeviceMemory small, struct slow_call *s)
{
    void *p = NULL;
    CHECK_EQ(v->map(v->device, small, 0, VK_WHOLE_SIZE, 0, &p), VK_SUCCESS);
    v->unmap(v->device, small);
    CUdeviceptr d = dalloc(4096);
    CU(cuMemFree(d));
    CHECK(bar1_used() > 0);
    CHECK_EQ(__atomic_load_n(&s->done, __ATOMIC_ACQUIRE), 0);
}

/* An import and a free take GDRSIM_VK_IMPORT_NS_PER_MIB per MiB of the allocation, with the
 * emulator's lock released: run.sh sets 10 ms per MiB for this one, so the 256 MiB import and
 * its free take 2.56 s each, during which this thread's calls go through. */
int t_vk_import_cost(void)
{
    SKIP_IF(!env_is("GDRSIM_VK_IMPORT_NS_PER_MIB", "10000000") || !situation("ok"));
    cuda_up();
    struct vk v;
    vk_ready(&v);
    size_t g = granularity(), big = 256u << 20;
    CUmemGenericAllocationHandle hs, hb;
    CU(vmm_create(&hs, g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CU(vmm_create(&hb, big, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    VkDeviceMemory small;
    REQUIRE_EQ(vk_import(&v, g, 1, OPAQUE, vmm_export(hs), &small), VK_SUCCESS); /* 20 ms */

    /* the import is made, then takes its cost: wait for it to be made */
    struct slow_call s = {&v, big, vmm_export(hb), 0, VK_ERROR_INITIALIZATION_FAILED, 0};
    pthread_t t;
    REQUIRE_EQ(pthread_create(&t, NULL, slow_import, &s), 0);
    while (counters().live_vk_import_bytes != g + big)
        usleep(1000);
    progress_meanwhile(&v, small, &s);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(s.r, VK_SUCCESS);

    /* the free lets go, then takes its cost */
    s.done = 0;
    REQUIRE_EQ(pthread_create(&t, NULL, slow_free, &s), 0);
    while (counters().live_vk_import_bytes != g)
        usleep(1000);
    progress_meanwhile(&v, small, &s);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(counters().vk_imports_made, 2);

    v.free(v.device, small, NULL);
    CU(cuMemRelease(hs));
    CU(cuMemRelease(hb));
    vk_close(&v);
    check_no_vk_objects();
    return CASE_PASS;
}
