#!/bin/bash
# Runs the emulator's test program under every emulator setting that changes behaviour and
# prints the overall tallies: its cases, and its checks ("N passed, N failed"; a case that
# crashed, hung or ran without a tally counts one more failed check). Usage: run.sh <sim_tests
# binary> (with the emulator preloaded).
set -u
bin=${1:?usage: run.sh <sim_tests binary>}
configs=(
    ""
    "GDRSIM_PERSISTENT=0"
    "GDRSIM_PROFILE=coherent"
    "GDRSIM_PROFILE=coherent GDRSIM_PERSISTENT=0"
    "GDRSIM_DRIVER_VERSION=2.5"
    "GDRSIM_DRIVER_VERSION=2.4"
    "GDRSIM_DRIVER_VERSION=2.3"
    "GDRSIM_DRIVER_VERSION=2.0"
    "GDRSIM_NO_DEVICE=1"
    "GDRSIM_DEVICE_MODE=0604 GDRSIM_AS_USER=1"
    "GDRSIM_DMABUF=0 GDRSIM_CUDA_VERSION=12040"
    "GDRSIM_FAIL=GET_VERSION:1:EIO,cuInit:2:999"
    "GDRSIM_DEVICE_NODE=file GDRSIM_DEVICE_MODE=0640"
    "GDRSIM_DEVICE_NODE=stale GDRSIM_DEVICE_MAJOR=4095"
    "GDRSIM_DEVICE_NODE=nodriver GDRSIM_DEVICE_MAJOR=300"
    # No gdrdrv and a driver without DMA-BUF mmap (an H200 with CUDA 13.0): the Vulkan import
    # backend's situation, and the Vulkan stand-in's other situations (GDRSIM_VULKAN).
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VULKAN=nodevice"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VULKAN=noext"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VULKAN=otheruuid"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VULKAN=nohostvisible"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VULKAN=noinstance"
    "GDRSIM_NO_DEVICE=1 GDRSIM_BAR1_SIZE=4M"
    # The stand-in's limit on the live imports of the process, and a large import cost.
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VK_IMPORT_LIMIT=10M"
    "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VK_IMPORT_NS_PER_MIB=10000000"
)
passed=0
failed=0
cases_passed=0
cases_failed=0
cases_skipped=0
for c in "${configs[@]}"; do
    echo "== sim-tests ${c:-(defaults)}"
    out=$(env -u GDRSIM_PERSISTENT -u GDRSIM_PROFILE -u GDRSIM_DRIVER_VERSION -u GDRSIM_NO_DEVICE \
        -u GDRSIM_DEVICE_MODE -u GDRSIM_AS_USER -u GDRSIM_DMABUF -u GDRSIM_CUDA_VERSION \
        -u GDRSIM_FAIL -u GDRSIM_VRAM_SIZE -u GDRSIM_DEVICE_NODE -u GDRSIM_DEVICE_MAJOR \
        -u GDRSIM_VULKAN -u GDRSIM_BAR1_SIZE -u GDRSIM_BAR1_RESERVED \
        -u GDRSIM_VK_IMPORT_LIMIT -u GDRSIM_VK_IMPORT_NS_PER_MIB $c timeout 300 "$bin" 2>&1)
    rc=$?
    echo "$out" | grep -v '^PASS \|^SKIP '
    tally=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
    cases=$(echo "$out" | sed -n 's/^sim_tests: cases \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' | tail -1)
    if [ -z "$tally" ] || [ -z "$cases" ]; then
        echo "no tally (exit status $rc)"
        failed=$((failed + 1))
        continue
    fi
    read -r cp cf cs <<<"$cases"
    cases_passed=$((cases_passed + cp)) cases_failed=$((cases_failed + cf)) cases_skipped=$((cases_skipped + cs))
    p=${tally%% passed*}
    f=${tally#*passed, }
    f=${f%% failed*}
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        failed=$((failed + 1))
    fi
done
echo "sim-tests: ${#configs[@]} settings, cases $cases_passed passed, $cases_failed failed, $cases_skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
