/* The few Vulkan declarations the emulator's cases use with the Vulkan stand-in
 * (build/sim/vulkan/libvulkan.so.1), written from the Vulkan 1.1 specification for 64-bit
 * Linux: there are no Vulkan headers on the build machine. The layouts are checked below
 * against the specification's sizes and offsets (the same ones abi/src/vk.rs checks against
 * ash's generated bindings). */
#ifndef SIM_VK_H
#define SIM_VK_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t VkResult;
typedef void *VkInstance;
typedef void *VkPhysicalDevice;
typedef void *VkDevice;
typedef uint64_t VkDeviceMemory;

#define VK_SUCCESS 0
#define VK_INCOMPLETE 5
#define VK_ERROR_OUT_OF_HOST_MEMORY (-1)
#define VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)
#define VK_ERROR_INITIALIZATION_FAILED (-3)
#define VK_ERROR_DEVICE_LOST (-4)
#define VK_ERROR_MEMORY_MAP_FAILED (-5)
#define VK_ERROR_LAYER_NOT_PRESENT (-6)
#define VK_ERROR_EXTENSION_NOT_PRESENT (-7)
#define VK_ERROR_INCOMPATIBLE_DRIVER (-9)
#define VK_ERROR_INVALID_EXTERNAL_HANDLE (-1000072003)
#define VK_API_VERSION_1_1 ((1u << 22) | (1u << 12))
#define VK_WHOLE_SIZE (~0ULL)

#define VK_STRUCTURE_TYPE_APPLICATION_INFO 0
#define VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO 1
#define VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO 2
#define VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO 3
#define VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO 5
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 1000059001
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES 1000071004
#define VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR 1000074000

#define VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT 0x1
#define VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT 0x2
#define VK_MEMORY_PROPERTY_HOST_COHERENT_BIT 0x4
#define VK_MEMORY_PROPERTY_HOST_CACHED_BIT 0x8
#define VK_MEMORY_HEAP_DEVICE_LOCAL_BIT 0x1
#define VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT 0x1
#define VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU 2

typedef struct {
    uint32_t sType;
    const void *pNext;
    const char *pApplicationName;
    uint32_t applicationVersion;
    const char *pEngineName;
    uint32_t engineVersion;
    uint32_t apiVersion;
} VkApplicationInfo;

typedef struct {
    uint32_t sType;
    const void *pNext;
    uint32_t flags;
    const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;

/* limits (VkPhysicalDeviceLimits) and sparseProperties are kept as opaque bytes. */
typedef struct {
    uint32_t apiVersion;
    uint32_t driverVersion;
    uint32_t vendorID;
    uint32_t deviceID;
    uint32_t deviceType;
    char deviceName[256];
    uint8_t pipelineCacheUUID[16];
    uint64_t limits[63];
    uint32_t sparseProperties[5];
} VkPhysicalDeviceProperties;
/* Offset of limits.minMemoryMapAlignment in VkPhysicalDeviceLimits. */
#define VK_LIMITS_MIN_MEMORY_MAP_ALIGNMENT 304

typedef struct {
    uint32_t sType;
    void *pNext;
    VkPhysicalDeviceProperties properties;
} VkPhysicalDeviceProperties2;

typedef struct {
    uint32_t sType;
    void *pNext;
    uint8_t deviceUUID[16];
    uint8_t driverUUID[16];
    uint8_t deviceLUID[8];
    uint32_t deviceNodeMask;
    uint32_t deviceLUIDValid;
} VkPhysicalDeviceIDProperties;

typedef struct {
    uint32_t propertyFlags;
    uint32_t heapIndex;
} VkMemoryType;

typedef struct {
    uint64_t size;
    uint32_t flags;
} VkMemoryHeap;

typedef struct {
    uint32_t memoryTypeCount;
    VkMemoryType memoryTypes[32];
    uint32_t memoryHeapCount;
    VkMemoryHeap memoryHeaps[16];
} VkPhysicalDeviceMemoryProperties;

typedef struct {
    char extensionName[256];
    uint32_t specVersion;
} VkExtensionProperties;

typedef struct {
    uint32_t sType;
    const void *pNext;
    uint32_t flags;
    uint32_t queueFamilyIndex;
    uint32_t queueCount;
    const float *pQueuePriorities;
} VkDeviceQueueCreateInfo;

typedef struct {
    uint32_t sType;
    const void *pNext;
    uint32_t flags;
    uint32_t queueCreateInfoCount;
    const VkDeviceQueueCreateInfo *pQueueCreateInfos;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
    const void *pEnabledFeatures;
} VkDeviceCreateInfo;

typedef struct {
    uint32_t sType;
    const void *pNext;
    uint64_t allocationSize;
    uint32_t memoryTypeIndex;
} VkMemoryAllocateInfo;

typedef struct {
    uint32_t sType;
    const void *pNext;
    uint32_t handleType;
    int fd;
} VkImportMemoryFdInfoKHR;

/* The specification's layouts (64-bit Linux). */
_Static_assert(sizeof(VkApplicationInfo) == 48, "VkApplicationInfo");
_Static_assert(offsetof(VkApplicationInfo, apiVersion) == 44, "VkApplicationInfo.apiVersion");
_Static_assert(sizeof(VkInstanceCreateInfo) == 64, "VkInstanceCreateInfo");
_Static_assert(offsetof(VkInstanceCreateInfo, ppEnabledExtensionNames) == 56, "VkInstanceCreateInfo.ppEnabledExtensionNames");
_Static_assert(sizeof(VkPhysicalDeviceProperties) == 824, "VkPhysicalDeviceProperties");
_Static_assert(offsetof(VkPhysicalDeviceProperties, deviceName) == 20, "VkPhysicalDeviceProperties.deviceName");
_Static_assert(offsetof(VkPhysicalDeviceProperties, limits) == 296, "VkPhysicalDeviceProperties.limits");
_Static_assert(offsetof(VkPhysicalDeviceProperties, sparseProperties) == 800, "VkPhysicalDeviceProperties.sparseProperties");
_Static_assert(sizeof(VkPhysicalDeviceProperties2) == 840, "VkPhysicalDeviceProperties2");
_Static_assert(offsetof(VkPhysicalDeviceProperties2, properties) == 16, "VkPhysicalDeviceProperties2.properties");
_Static_assert(sizeof(VkPhysicalDeviceIDProperties) == 64, "VkPhysicalDeviceIDProperties");
_Static_assert(offsetof(VkPhysicalDeviceIDProperties, deviceUUID) == 16, "VkPhysicalDeviceIDProperties.deviceUUID");
_Static_assert(offsetof(VkPhysicalDeviceIDProperties, deviceLUIDValid) == 60, "VkPhysicalDeviceIDProperties.deviceLUIDValid");
_Static_assert(sizeof(VkMemoryType) == 8, "VkMemoryType");
_Static_assert(sizeof(VkMemoryHeap) == 16, "VkMemoryHeap");
_Static_assert(sizeof(VkPhysicalDeviceMemoryProperties) == 520, "VkPhysicalDeviceMemoryProperties");
_Static_assert(offsetof(VkPhysicalDeviceMemoryProperties, memoryHeapCount) == 260, "VkPhysicalDeviceMemoryProperties.memoryHeapCount");
_Static_assert(offsetof(VkPhysicalDeviceMemoryProperties, memoryHeaps) == 264, "VkPhysicalDeviceMemoryProperties.memoryHeaps");
_Static_assert(sizeof(VkExtensionProperties) == 260, "VkExtensionProperties");
_Static_assert(sizeof(VkDeviceQueueCreateInfo) == 40, "VkDeviceQueueCreateInfo");
_Static_assert(offsetof(VkDeviceQueueCreateInfo, pQueuePriorities) == 32, "VkDeviceQueueCreateInfo.pQueuePriorities");
_Static_assert(sizeof(VkDeviceCreateInfo) == 72, "VkDeviceCreateInfo");
_Static_assert(offsetof(VkDeviceCreateInfo, enabledExtensionCount) == 48, "VkDeviceCreateInfo.enabledExtensionCount");
_Static_assert(offsetof(VkDeviceCreateInfo, pEnabledFeatures) == 64, "VkDeviceCreateInfo.pEnabledFeatures");
_Static_assert(sizeof(VkMemoryAllocateInfo) == 32, "VkMemoryAllocateInfo");
_Static_assert(offsetof(VkMemoryAllocateInfo, memoryTypeIndex) == 24, "VkMemoryAllocateInfo.memoryTypeIndex");
_Static_assert(sizeof(VkImportMemoryFdInfoKHR) == 24, "VkImportMemoryFdInfoKHR");
_Static_assert(offsetof(VkImportMemoryFdInfoKHR, fd) == 20, "VkImportMemoryFdInfoKHR.fd");

typedef void (*PFN_vkVoidFunction)(void);
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);
typedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice, const char *);
typedef VkResult (*PFN_vkCreateInstance)(const VkInstanceCreateInfo *, const void *, VkInstance *);
typedef void (*PFN_vkDestroyInstance)(VkInstance, const void *);
typedef VkResult (*PFN_vkEnumeratePhysicalDevices)(VkInstance, uint32_t *, VkPhysicalDevice *);
typedef void (*PFN_vkGetPhysicalDeviceProperties)(VkPhysicalDevice, VkPhysicalDeviceProperties *);
typedef void (*PFN_vkGetPhysicalDeviceProperties2)(VkPhysicalDevice, VkPhysicalDeviceProperties2 *);
typedef void (*PFN_vkGetPhysicalDeviceMemoryProperties)(VkPhysicalDevice, VkPhysicalDeviceMemoryProperties *);
typedef VkResult (*PFN_vkEnumerateDeviceExtensionProperties)(VkPhysicalDevice, const char *, uint32_t *,
                                                             VkExtensionProperties *);
typedef VkResult (*PFN_vkCreateDevice)(VkPhysicalDevice, const VkDeviceCreateInfo *, const void *, VkDevice *);
typedef void (*PFN_vkDestroyDevice)(VkDevice, const void *);
typedef VkResult (*PFN_vkAllocateMemory)(VkDevice, const VkMemoryAllocateInfo *, const void *, VkDeviceMemory *);
typedef void (*PFN_vkFreeMemory)(VkDevice, VkDeviceMemory, const void *);
typedef VkResult (*PFN_vkMapMemory)(VkDevice, VkDeviceMemory, uint64_t, uint64_t, uint32_t, void **);
typedef void (*PFN_vkUnmapMemory)(VkDevice, VkDeviceMemory);

/* The stand-in's commands, resolved as the library resolves them (cases_vulkan.c). */
struct vk {
    void *lib;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkCreateInstance create_instance;
    VkInstance instance;
    PFN_vkDestroyInstance destroy_instance;
    PFN_vkEnumeratePhysicalDevices enumerate_physical_devices;
    PFN_vkGetPhysicalDeviceProperties properties;
    PFN_vkGetPhysicalDeviceProperties2 properties2;
    PFN_vkGetPhysicalDeviceMemoryProperties memory_properties;
    PFN_vkEnumerateDeviceExtensionProperties device_extensions;
    PFN_vkCreateDevice create_device;
    PFN_vkGetDeviceProcAddr gdpa;
    VkPhysicalDevice pd;
    VkDevice device;
    PFN_vkDestroyDevice destroy_device;
    PFN_vkAllocateMemory allocate;
    PFN_vkFreeMemory free;
    PFN_vkMapMemory map;
    PFN_vkUnmapMemory unmap;
};

#endif
