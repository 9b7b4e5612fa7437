#!/bin/bash
# The Vulkan-import backend's suite on the emulator, in the situation of a cloud GPU (no
# gdrdrv node, CUDA 13.0: no DMA-BUF mmap) with the emulator's Vulkan stand-in first on the
# library path: selection and fallback order, each refusal with the log line that names its
# cause, then the API, lifetime and fault scenarios and NCCL's allocation pattern.
# Usage: run.sh OUT_DIR LIB_DIR SIM_DIR
set -u
OUT=$1 LIB=$2 SIM=$3
T=$OUT/vulkan_test
NCCL=$OUT/nccl_pattern
POOLS=$OUT/pools
LOGS=$OUT/logs
mkdir -p "$LOGS"
. "$(dirname "$0")/../suite.sh"
SUITE_UNSET="GDRCOPY_USE_DMABUF_MMAP GDRSIM_FAIL GDRSIM_NO_DEVICE GDRSIM_DMABUF GDRSIM_CUDA_VERSION GDRSIM_VULKAN GDRAPI_USE_VULKAN GDRAPI_TEST_ALLOC"
SUITE_ENV="LD_PRELOAD=$SIM/libcuda.so.1 LD_LIBRARY_PATH=$SIM/vulkan:$SIM:$LIB GDRAPI_TEST_OURS=1 GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2"
# The cloud GPU: no gdrdrv, a CUDA driver without DMA-BUF mmap, the backend asked for.
CLOUD="GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000"
ON="$CLOUD GDRAPI_USE_VULKAN=1"

# Selection: only where gdrdrv and DMA-BUF mmap do not serve, and only when asked for.
case_ selected 'INFO: Using vulkan backend$' $ON -- "$T" selected
also selected "INFO: vulkan backend: CUDA driver 13\.0, device 0 = Vulkan device '[^']+', memory type [0-9]+ \(WriteCombining\)"
also selected 'INFO: gdrdrv is not installed or loaded'
also selected 'ERR:  dmabuf mmap backend unavailable: CUDA 13.3 or newer required'
case_ not-asked 'ERR:  Error: gdrcopy requires gdrdrv or CUDA driver with dmabuf mmap support' \
    $CLOUD -- "$T" refused
also not-asked 'INFO: without either, GDRAPI_USE_VULKAN=1 maps memory from cuMemCreate'
absent not-asked 'vulkan backend|libvulkan'
case_ not-exactly-1 '' $CLOUD GDRAPI_USE_VULKAN=yes -- "$T" refused
absent not-exactly-1 'Using vulkan backend'
case_ gdrdrv-first 'INFO: Using gdrdrv backend' GDRAPI_USE_VULKAN=1 -- "$T" open
case_ dmabuf-first 'INFO: Using dma-buf backend' GDRSIM_NO_DEVICE=1 GDRAPI_USE_VULKAN=1 -- "$T" open

# Refusals, each with the line naming the cause.
case_ old-cuda 'ERR:  vulkan backend unavailable: CUDA 11\.4 or newer required for vulkan backend \(reported version 11020' \
    GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=11020 GDRAPI_USE_VULKAN=1 -- "$T" refused
also old-cuda 'ERR:  Error: gdrcopy requires gdrdrv, CUDA driver with dmabuf mmap support, or \(GDRAPI_USE_VULKAN=1\)'
case_ entry-point-missing "ERR:  vulkan backend unavailable: cuGetProcAddress cannot resolve 'cuMemRetainAllocationHandle' for CUDA 13000" \
    $ON GDRSIM_FAIL=cuGetProcAddress_v2:13:500 -- "$T" refused
case_ no-stand-in 'ERR:  vulkan backend unavailable: CUDA device 0 \([0-9a-f-]+\): no Vulkan device has its UUID' \
    $ON LD_LIBRARY_PATH="$SIM:$LIB" -- "$T" refused
mkdir -p "$OUT/broken-loader" && : >"$OUT/broken-loader/libvulkan.so.1"
case_ no-loader 'ERR:  vulkan backend unavailable: cannot load the Vulkan loader \(libvulkan\.so\.1\)' \
    $ON LD_LIBRARY_PATH="$OUT/broken-loader:$SIM:$LIB" -- "$T" refused
case_ no-driver 'no Vulkan driver answered: install NVIDIA.s Vulkan driver \(in a container, NVIDIA_DRIVER_CAPABILITIES must include graphics\)' \
    $ON GDRSIM_VULKAN=noinstance -- "$T" refused
case_ no-device 'ERR:  vulkan backend unavailable: CUDA device 0 .*no Vulkan device has its UUID \(Vulkan devices: none\)' \
    $ON GDRSIM_VULKAN=nodevice -- "$T" refused
case_ other-uuid 'no Vulkan device has its UUID \(Vulkan devices: [^n]' $ON GDRSIM_VULKAN=otheruuid -- "$T" refused
case_ no-fd-extension "cannot map it: it does not offer VK_KHR_external_memory_fd" \
    $ON GDRSIM_VULKAN=noext -- "$T" refused
case_ no-bar-type "cannot map it: it has no device-local, host-visible memory type" \
    $ON GDRSIM_VULKAN=nohostvisible -- "$T" refused
case_ instance-fails '"vkCreateInstance" failed \(-9: VK_ERROR_INCOMPATIBLE_DRIVER\)' \
    $ON GDRSIM_FAIL=vkCreateInstance:1:-9 -- "$T" refused
case_ enumeration-fails '"vkEnumeratePhysicalDevices" failed \(-3: VK_ERROR_INITIALIZATION_FAILED\)' \
    $ON GDRSIM_FAIL=vkEnumeratePhysicalDevices:1:-3 -- "$T" refused

# The API on memory NCCL's way; memory the backend cannot map is refused with the way out.
case_ api '' $ON GDRAPI_TEST_ALLOC=vmm -- "$T" api
also api 'it is not memory from cuMemCreate .*CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, as NCCL.s cuMem allocator does'
also api 'its allocation was made without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR \(requestedHandleTypes = 0x0\)'
also api 'its 64 KiB pages run past the allocation'
also api 'cannot map a pin whose address is not 64 KiB aligned'
also api 'vulkan backend cannot fulfill the requested mapping type \(requested=3'
case_ lifetime 'lifetime: free VRAM' $ON -- "$T" lifetime
case_ faults '' $ON -- "$T" faults
also faults 'vulkan backend cannot import the allocation .*"vkAllocateMemory" failed \(-2: VK_ERROR_OUT_OF_DEVICE_MEMORY\)'
also faults 'vulkan backend cannot map the allocation of 2097152 bytes holding va 0x[0-9a-f]+: "vkMapMemory" failed \(-5: VK_ERROR_MEMORY_MAP_FAILED\)'
case_ nccl-pattern 'gdrcopy runtime 2\.6, driver 2\.6' $ON -- "$NCCL"

# Pools: 8192 ranges of one 1 GiB allocation share its one import; 2048 allocations of 2 MiB
# get one each; the first pin of an allocation imports it, its last unpin frees it.
case_ pool-ranges '^pools: live imports with every range pinned: 1 \(1 made\)$' $ON GDRSIM_VRAM_SIZE=2G -- \
    "$POOLS" ranges 1024 8192
case_ pool-allocations '^pools: 2048 of 2048 allocations of 2 MiB pinned and mapped$' $ON \
    GDRSIM_VRAM_SIZE=10G -- "$POOLS" allocations 2048 2
case_ pool-first-pin '^pools: first pin\+map of a 64 MiB allocation: median' $ON -- \
    "$POOLS" firstpin 3 2 64

suite_done vulkan
