#!/bin/bash
# The DMA-BUF backend's suite on the emulator: selection and fallback order, each refusal
# with the log line that names its cause, then the API scenario, then the probe.
# Usage: run.sh OUT_DIR LIB_DIR SIM_DIR
set -u
OUT=$1 LIB=$2 SIM=$3
T=$OUT/dmabuf_test
PROBE=$OUT/dmabuf-probe
LOGS=$OUT/logs
mkdir -p "$LOGS"
. "$(dirname "$0")/../suite.sh"
SUITE_UNSET="GDRCOPY_USE_DMABUF_MMAP GDRSIM_FAIL GDRSIM_NO_DEVICE GDRSIM_DMABUF GDRSIM_CUDA_VERSION GDRSIM_PROFILE GDRAPI_USE_VULKAN"
SUITE_ENV="LD_PRELOAD=$SIM/libcuda.so.1 LD_LIBRARY_PATH=$SIM:$LIB GDRAPI_TEST_OURS=1 GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2"

# Selection and fallback order; libcuda is loaded only when DMA-BUF is tried, versioned name first.
case_ gdrdrv-present 'INFO: Using gdrdrv backend' GDRCOPY_LOG_LEVEL=1 -- "$T" gdrdrv
absent gdrdrv-present 'loaded libcuda|dmabuf mmap'
case_ no-gdrdrv-falls-back 'INFO: Using dma-buf backend' GDRSIM_NO_DEVICE=1 GDRCOPY_LOG_LEVEL=1 -- "$T" selected
also no-gdrdrv-falls-back 'DBG:  loaded libcuda\.so\.1$'
case_ forced-over-gdrdrv 'INFO: Using dma-buf backend' GDRCOPY_USE_DMABUF_MMAP=1 -- "$T" selected
case_ forced-not-exactly-1 'INFO: Using gdrdrv backend' GDRCOPY_USE_DMABUF_MMAP=yes -- "$T" gdrdrv

# Refusals, each with the line naming the cause.
case_ old-cuda 'ERR:  dmabuf mmap backend unavailable: CUDA 13.3 or newer required .*reported version 13000' \
    GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 -- "$T" refused
case_ old-cuda-forced-no-fallback 'reported version 13020' \
    GDRCOPY_USE_DMABUF_MMAP=1 GDRSIM_CUDA_VERSION=13020 -- "$T" refused
case_ exactly-13030 'INFO: dma-buf backend: CUDA driver 13\.3' \
    GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13030 -- "$T" selected
case_ no-device-support 'ERR:  dmabuf mmap backend unavailable: dma-buf mmap not supported on any of the devices' \
    GDRSIM_NO_DEVICE=1 GDRSIM_DMABUF=0 GDRCOPY_LOG_LEVEL=1 -- "$T" refused
# Upstream's INFO lines for the same events come too.
also no-device-support 'INFO: dma-buf mmap not supported on any of the devices$'
case_ cuinit-fails 'ERR:  dmabuf mmap backend unavailable: cuInit\(0\) failed \(100' \
    GDRSIM_NO_DEVICE=1 GDRSIM_FAIL=cuInit:1:100 GDRCOPY_LOG_LEVEL=1 -- "$T" refused
also cuinit-fails 'INFO: gdr_cuda_init\(\) failed$'
case_ device-count-fails 'ERR:  dmabuf mmap backend unavailable: "cuDeviceGetCount" failed \(999' \
    GDRSIM_NO_DEVICE=1 GDRSIM_FAIL=cuDeviceGetCount:1:999 -- "$T" refused
case_ entry-point-missing "cuGetProcAddress cannot resolve 'cuMemGetHandleForAddressRange'" \
    GDRSIM_NO_DEVICE=1 GDRSIM_FAIL=cuGetProcAddress_v2:5:500 -- "$T" refused

# No libcuda at all (the probe dlopens both libraries, so it runs without the emulator). Only
# meaningful where the system has no libcuda of its own, as on the CI machines.
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so'; then
    echo "skip no-libcuda: this machine has a libcuda"
else
    log=$LOGS/no-libcuda.log
    env -u LD_PRELOAD LD_LIBRARY_PATH="$LIB" GDRCOPY_ENABLE_LOGGING=1 "$PROBE" >"$log" 2>&1
    if grep -q 'ERR:  dmabuf mmap backend unavailable: cannot load the CUDA driver (libcuda.so.1, libcuda.so)' "$log" &&
       grep -q 'gdr_open (GDRCOPY_USE_DMABUF_MMAP=1): NULL' "$log"; then
        echo "ok   no-libcuda"; pass=$((pass + 1))
    else
        echo "FAIL no-libcuda (log: $log)"; sed 's/^/    /' "$log"; fail=$((fail + 1))
    fi
fi

# Pin, map, copy, unmap, unpin, close on the x86 and the coherent profile; the injected export
# and mmap failures log their cause.
case_ api-x86 'ERR:  "cuMemGetHandleForAddressRange" failed \(801' GDRSIM_NO_DEVICE=1 -- "$T" api
also api-x86 'ERR:  error .*\(12\) while mapping dma_buf_fd'
also api-x86 'ERR:  "cuPointerGetAttribute" failed \(1'
also api-x86 'ERR:  error ENOTSUPP\(524\) while mapping dma_buf_fd.*does not support mmap'
# An unaligned pin does not map: upstream's line for the EINVAL its mmap gets.
also api-x86 'ERR:  error Invalid argument\(22\) while mapping dma_buf_fd, rounded_size='
case_ api-coherent '' GDRSIM_NO_DEVICE=1 GDRSIM_PROFILE=coherent -- "$T" api
case_ api-forced '' GDRCOPY_USE_DMABUF_MMAP=1 -- "$T" api

# The probe for real machines runs here too (on the emulator, with an old CUDA version): gdr_open
# refuses, naming the version, and the export and mmap still answer.
case_ probe 'gdr_open \(GDRCOPY_USE_DMABUF_MMAP=1\): NULL' GDRSIM_CUDA_VERSION=13000 -- "$PROBE"
also probe 'ERR:  dmabuf mmap backend unavailable: CUDA 13.3 or newer required .*reported version 13000'
also probe 'cuDriverGetVersion: 13000 '
also probe 'device 0: attr 124 DMA_BUF_SUPPORTED = 1 \(ret 0\)'
also probe 'cuMemGetHandleForAddressRange\(DMA_BUF_FD, flags 0\): 0 '
also probe 'cuMemcpyDtoH read 0xa5 \(ret 0\)'

suite_done dmabuf
