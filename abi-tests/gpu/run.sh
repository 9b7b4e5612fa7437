#!/bin/bash
# make test-gpu: the library over a real GPU's CUDA and Vulkan drivers, with no emulator.
# Which backend gdr_open picks is the machine's (gdrdrv, DMA-BUF mmap, or, with
# GDRAPI_USE_VULKAN=1 set here, the Vulkan import); the Vulkan scenarios run where it is the
# Vulkan import. Runs: the backend scenarios (abi-tests/vulkan) and its pools (8192 ranges of
# one 1 GiB allocation, 2048 allocations of 2 MiB, the first pin by allocation size, with
# median and worst pin+map and unmap+unpin), NCCL's allocation pattern,
# host-written memory (abi-tests/ext: its api, threads and fork scenarios, and 1000 flags
# checked by both sides with the time of a flag write and of a read round trip), the C ABI
# suite's threads and fork programs, the byte-exact copy sweep, the three tools and the
# doctor, and the Python API's pytest suite with the machine's PyTorch and CuPy (python/tests,
# PyTorch's expandable segments and its default allocator); prints each program's tally and
# the total.
# Usage: run.sh BUILD_DIR   (build/lib, build/bin, build/abi, build/vulkan, build/gpu)
# GPU_SIM=<the emulator's folder> runs the same script on the emulator and its Vulkan stand-in
# instead (make test-gpu-script: the script itself, in CI).
set -u
B=$(cd "$1" && pwd)
sim=${GPU_SIM:-}
if [ -z "$sim" ] && [ ! -e /dev/nvidia0 ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test-gpu: skipped: no NVIDIA GPU here (no /dev/nvidia0, no nvidia-smi)"
    exit 0
fi
LOGS=$B/gpu/logs
mkdir -p "$LOGS"
limit=${GPU_TIMEOUT:-300}
# No emulator: nothing preloaded, only the library under test on the path. Memory is allocated
# the way the Vulkan import can map it (as NCCL's cuMem allocator does).
RUN=(env -u LD_PRELOAD -u GDRCOPY_USE_DMABUF_MMAP LD_LIBRARY_PATH="$B/lib"
     GDRAPI_USE_VULKAN=1 GDRAPI_TEST_OURS=1 GDRAPI_TEST_ALLOC=vmm)
if [ -n "$sim" ]; then
    sim=$(cd "$sim" && pwd)
    RUN+=(LD_PRELOAD="$sim/libcuda.so.1" LD_LIBRARY_PATH="$sim/vulkan:$sim:$B/lib"
          GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRSIM_VRAM_SIZE=10G)
    echo "test-gpu: on the emulator ($sim), not a GPU"
fi
total_passed=0 total_failed=0 broken=()

# tally NAME LOG RC: adds a program's last "N passed, N failed" line (or one failure when it
# has none, or exited non-zero without counting one).
tally() {
    local name=$1 log=$2 rc=$3 line p f
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    p=$(echo "$line" | awk '{print $1}') f=$(echo "$line" | awk '{print $3}')
    p=${p:-0} f=${f:-0}
    if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then
        f=$((f + 1)); tail -20 "$log"; echo "$name: exit status $rc without a complete summary"
    elif [ "$f" -ne 0 ]; then
        grep -E 'FAILED|want' "$log" | head -20
    fi
    printf '%-48s %5d passed, %d failed\n' "$name" "$p" "$f"
    total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
    [ "$f" -eq 0 ] || broken+=("$name")
}

# prog NAME CMD...: a C program that prints its own tally.
prog() {
    local name=$1; shift
    local log=$LOGS/${name//[^A-Za-z0-9_.-]/_}.log
    timeout -k 5 "$limit" "${RUN[@]}" "$@" >"$log" 2>&1
    tally "$name" "$log" $?
}

# check NAME PATTERN CMD...: one check: CMD exits 0 and prints a line matching PATTERN.
check() {
    local name=$1 pattern=$2; shift 2
    local log=$LOGS/${name//[^A-Za-z0-9_.-]/_}.log rc
    timeout -k 5 "$limit" "${RUN[@]}" "$@" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -Eq "$pattern" "$log"; then
        printf '%-48s %5d passed, %d failed\n' "$name" 1 0; total_passed=$((total_passed + 1))
    else
        tail -15 "$log"; printf '%-48s %5d passed, %d failed\n' "$name" 0 1
        total_failed=$((total_failed + 1)); broken+=("$name")
    fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    sed 's/^/test-gpu: GPU: /'
backend=$("${RUN[@]}" GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 "$B/vulkan/vulkan_test" open 2>&1 |
    sed -n 's/^INFO: Using \(.*\) backend$/\1/p' | tail -1)
echo "test-gpu: gdr_open uses the ${backend:-no} backend"

if [ "$backend" = vulkan ]; then
    prog "vulkan: selected" "$B/vulkan/vulkan_test" selected
    prog "vulkan: api" "$B/vulkan/vulkan_test" api
    prog "vulkan: lifetime" "$B/vulkan/vulkan_test" lifetime
    grep '^lifetime:' "$LOGS/vulkan__lifetime.log"
    # Pools: 8192 ranges of one 1 GiB allocation (one import), 2048 allocations of 2 MiB (one
    # each), and the first pin of an allocation (its import) by size.
    prog "vulkan: 8192 ranges of one 1 GiB allocation" "$B/vulkan/pools" ranges 1024 8192
    prog "vulkan: 2048 allocations of 2 MiB" "$B/vulkan/pools" allocations 2048 2
    prog "vulkan: first pin by allocation size" "$B/vulkan/pools" firstpin 5 2 64 1024
    grep -h '^pools:' "$LOGS"/vulkan__8192_ranges*.log "$LOGS"/vulkan__2048_alloc*.log \
        "$LOGS"/vulkan__first_pin*.log | tee "$B/gpu/pools.txt"
else
    echo "test-gpu: the Vulkan scenarios need the Vulkan import (here: ${backend:-none})"
fi
prog "nccl pattern" "$B/vulkan/nccl_pattern"
# Host-written memory (gdrapi_ext.h) on whatever backend this machine has.
case $backend in dma-buf) ext_backend=dmabuf ;; *) ext_backend=${backend:-none} ;; esac
prog "ext: api" "$B/ext/ext_test" api "$ext_backend"
prog "ext: threads" "$B/ext/ext_test" threads "$ext_backend"
prog "ext: fork" "$B/ext/ext_test" fork "$ext_backend"
# 1000 flags from one pin, written by the CPU and checked by the GPU (PTX kernels) and the
# reverse; the cost of a flag write and of a read round trip (medians).
prog "ext: 1000 flags, CPU and GPU" "$B/ext/flags" 1000 20000
grep '^flags:' "$LOGS/ext__1000_flags__CPU_and_GPU.log"
cp "$LOGS/ext__1000_flags__CPU_and_GPU.log" "$B/gpu/flags.txt" 2>/dev/null
prog "abi: threads" "$B/abi/threads"
prog "abi: fork" "$B/abi/fork"
prog "copy sweep" "$B/gpu/copysweep"
grep '^copysweep:' "$LOGS/copy_sweep.log"
for t in copylat copybw apiperf; do
    case $t in
    copylat) args=(-s 1048576 -w 1000 -r 100) pat='^gdr_copy_from_mapping[[:space:]]+1048576[[:space:]]' ;;
    copybw) args=(-s 1048576 -c 1048576 -l) pat='^read BW: ' ;;
    apiperf) args=(-s 1048576 -n 100) pat='^Size\(B\)' ;;
    esac
    check "tool: gdrcopy_$t -a cuMemCreateFd" "$pat" "$B/bin/gdrcopy_$t" -a cuMemCreateFd "${args[@]}"
done
cp "$LOGS/tool__gdrcopy_copylat_-a_cuMemCreateFd.log" "$B/gpu/copylat.txt" 2>/dev/null
check "doctor" 'copies work' "$B/bin/gdrcopy" doctor
grep -iE 'vulkan|verdict|copies' "$LOGS/doctor.log" | head -8

# The Python API's suite (python/tests) with this machine's PyTorch and CuPy, where present:
# once with PyTorch's expandable segments (cuMemCreate memory, which the Vulkan import maps)
# and once with its default allocator (whose tensors the Vulkan import must refuse cleanly).
# pytest from the machine, or from build/python/site (make python-gpu, for machines without
# pip); each run's summary line gives the tally.
root=$(cd "$(dirname "$0")/../.." && pwd)
pypath=$root/python${B:+:$B/python/site}
case $backend in dma-buf) py_backend=dmabuf ;; *) py_backend=$backend ;; esac
if ! command -v python3 >/dev/null; then
    echo "test-gpu: the Python suite needs python3 (none here)"
elif ! PYTHONPATH=$pypath python3 -c 'import pytest' 2>/dev/null; then
    printf '%-48s %5d passed, %d failed\n' "python: no pytest (make python-gpu)" 0 1
    total_failed=$((total_failed + 1)) broken+=("python: no pytest")
else
    for alloc in expandable_segments:True default; do
        name="python: PyTorch ${alloc%%:*}"; name=${name/expandable_segments/expandable segments}
        log=$LOGS/${name//[^A-Za-z0-9_.-]/_}.log
        conf=$alloc; [ "$alloc" = default ] && conf=
        timeout -k 5 "$limit" "${RUN[@]}" PYTHONPATH="$pypath" PYTORCH_CUDA_ALLOC_CONF="$conf" \
            GDRAPI_PY_TEST_BACKEND="$py_backend" python3 -m pytest -p no:cacheprovider -q -rfEs \
            "$root/python/tests" >"$log" 2>&1
        rc=$?
        line=$(grep -E '^=*.*[0-9]+ (passed|failed|error)' "$log" | tail -1)
        p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '^[0-9]+') f=0
        for n in $(grep -oE '[0-9]+ (failed|errors?)' <<<"$line" | grep -oE '^[0-9]+'); do
            f=$((f + n))
        done
        p=${p:-0}
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; tail -20 "$log"; fi  # no test, or a crash
        [ "$f" -eq 0 ] || grep -E '^(FAILED|ERROR)' "$log" | head -20
        grep -E '^SKIPPED' "$log" | sed 's/^SKIPPED \[[0-9]*\] /    skipped: /' | sort -u | head -8
        printf '%-48s %5d passed, %d failed\n' "$name" "$p" "$f"
        total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
        [ "$f" -eq 0 ] || broken+=("$name")
    done
fi

echo "test-gpu: $total_passed passed, $total_failed failed"
if [ ${#broken[@]} -ne 0 ]; then
    printf 'failing: %s\n' "${broken[@]}"
    exit 1
fi
