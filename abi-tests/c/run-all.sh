#!/bin/bash
# run-all.sh BIN LIB_DIR SIM_DIR - run the C ABI suites and add up their
# "N passed, N failed" lines. BIN holds the built test programs (see
# mk/30-abi.mk), LIB_DIR the libgdrapi.so.2 under test, SIM_DIR the emulator.
#
# ABI_SUITES (space-separated) picks suites; default: all of
#   layout elf api handles threads fork logging loading bar1
# GDRAPI_TEST_OURS=1 enables the assertions that hold only for this project's
# library (handle validation, bounds checks, no ioctl after fork, ...).
set -u
bin=$(cd "$1" && pwd) lib_dir=$(cd "$2" && pwd) sim_dir=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
suites=${ABI_SUITES:-layout elf api handles threads fork logging loading bar1}
export GDRAPI_TEST_OURS=${GDRAPI_TEST_OURS:-0}
limit=${ABI_TIMEOUT:-120}

# ABI_API_CONFIGS (space-separated VERSION/PERSISTENT[/coherent]) picks the emulator settings
# the api suite runs under; default: drivers 2.0 to 2.6 on the x86 profile and 2.4, 2.6 on the
# coherent one, each persistent and not.
api_configs=${ABI_API_CONFIGS:-}
if [ -z "$api_configs" ]; then
    for persistent in 1 0; do
        for version in 2.0 2.3 2.4 2.5 2.6; do api_configs+=" $version/$persistent"; done
        for version in 2.4 2.6; do api_configs+=" $version/$persistent/coherent"; done
    done
fi

total_passed=0 total_failed=0 broken=()

# run NAME CMD...: one program; its last "N passed, N failed" line counts.
run() {
    local name=$1 out rc line p f
    shift
    out=$(timeout -k 5 "$limit" "$@" 2>&1)
    rc=$?
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
    p=$(echo "$line" | awk '{print $1}') f=$(echo "$line" | awk '{print $3}')
    p=${p:-0} f=${f:-0}
    if [ -z "$line" ] || { [ $rc -ne 0 ] && [ "$f" -eq 0 ]; }; then
        # Crashed, hung or never reached its summary.
        f=$((f + 1))
        echo "$out" | tail -20
        echo "$name: exited with status $rc without a complete summary"
    elif [ "$f" -ne 0 ]; then
        echo "$out" | grep -vE '^[0-9]+ passed, [0-9]+ failed$'
    fi
    printf '%-58s %4d passed, %d failed\n' "$name" "$p" "$f"
    total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
    [ "$f" -eq 0 ] || broken+=("$name")
}

# On the emulator, with the library under test.
SIM=(env LD_PRELOAD="$sim_dir/libcuda.so.1" LD_LIBRARY_PATH="$sim_dir:$lib_dir")
# ... with the Vulkan import: the emulator's Vulkan stand-in first on the path and
# SIM_VULKAN_VARS (the Makefile's settings, passed by mk/30-abi.mk and mk/55-mutants.mk).
VK=(env LD_PRELOAD="$sim_dir/libcuda.so.1" LD_LIBRARY_PATH="$sim_dir/vulkan:$sim_dir:$lib_dir"
    ${SIM_VULKAN_VARS:-})

# vulkan NAME CMD...: run on the emulator with the Vulkan import, when the caller said how.
vulkan() {
    local name=$1
    shift
    if [ -z "${SIM_VULKAN_VARS:-}" ]; then
        echo "$name: SIM_VULKAN_VARS is not set (make test-abi sets it); counted as a failure"
        total_failed=$((total_failed + 1)) broken+=("$name")
        return
    fi
    run "$name" "${VK[@]}" "$@"
}

for suite in $suites; do
    case $suite in
    layout)
        run "layout" "$bin/layout" ;;
    elf)
        run "elf: symbols, versions, soname, needed, links" \
            "$here/check-elf.sh" "$lib_dir" "$here/../../include/gdrapi.h" "$here/symbols.txt" ;;
    api)
        for config in $api_configs; do
            IFS=/ read -r version persistent profile <<<"$config"
            if [ "$profile" = coherent ]; then
                run "api: driver $version persistent=$persistent coherent" \
                    "${SIM[@]}" GDRSIM_PERSISTENT=$persistent GDRSIM_DRIVER_VERSION=$version \
                    GDRSIM_PROFILE=coherent "$bin/api"
            else
                run "api: driver $version persistent=$persistent" \
                    "${SIM[@]}" GDRSIM_PERSISTENT=$persistent GDRSIM_DRIVER_VERSION=$version "$bin/api"
            fi
        done ;;
    handles)
        run "handles" "${SIM[@]}" "$bin/handles" ;;
    threads)
        run "threads" "${SIM[@]}" "$bin/threads"
        run "threads: persistent=0" "${SIM[@]}" GDRSIM_PERSISTENT=0 "$bin/threads"
        run "threads: DMA-BUF" "${SIM[@]}" GDRSIM_NO_DEVICE=1 "$bin/threads"
        run "threads: DMA-BUF persistent=0" "${SIM[@]}" GDRSIM_NO_DEVICE=1 GDRSIM_PERSISTENT=0 \
            "$bin/threads"
        vulkan "threads: Vulkan import" "$bin/threads" ;;
    fork)
        for version in 2.6 2.4; do
            run "fork: driver $version" "${SIM[@]}" GDRSIM_DRIVER_VERSION=$version "$bin/fork"
        done
        run "fork: driver 2.6 persistent=0" "${SIM[@]}" GDRSIM_PERSISTENT=0 "$bin/fork"
        run "fork: DMA-BUF" "${SIM[@]}" GDRSIM_NO_DEVICE=1 "$bin/fork"
        run "fork: DMA-BUF persistent=0" "${SIM[@]}" GDRSIM_NO_DEVICE=1 GDRSIM_PERSISTENT=0 "$bin/fork"
        vulkan "fork: Vulkan import" "$bin/fork" ;;
    logging)
        run "logging" "${SIM[@]}" "$here/check-logging.sh" "$bin/log_probe" ;;
    loading)
        run "loading: linked against a fake libgdrapi.so.2" \
            env LD_PRELOAD="$sim_dir/libcuda.so.1" LD_LIBRARY_PATH="$bin/fake:$sim_dir" \
            "$bin/load_main" fake
        run "loading: the fake overridden by LD_PRELOAD" \
            env LD_PRELOAD="$sim_dir/libcuda.so.1 $lib_dir/libgdrapi.so.2" \
            LD_LIBRARY_PATH="$bin/fake:$sim_dir" "$bin/load_main" real
        run "loading: dlopen by both names" "${SIM[@]}" "$bin/dlopen_main" "$lib_dir" ;;
    bar1)
        # The emulator's NVML (libnvidia-ml.so.1 in the emulator's directory), then none.
        run "bar1: a pin that does not fit, NVML present" \
            "${SIM[@]}" GDRSIM_BAR1_SIZE=16M "$bin/bar1" nvml
        run "bar1: a pin that does not fit, no NVML" \
            env LD_PRELOAD="$sim_dir/libcuda.so.1" LD_LIBRARY_PATH="$lib_dir" GDRSIM_BAR1_SIZE=16M \
            "$bin/bar1" no-nvml
        run "bar1: a dma-buf export that does not fit, NVML present" \
            "${SIM[@]}" GDRSIM_BAR1_SIZE=16M GDRSIM_NO_DEVICE=1 "$bin/bar1" nvml dmabuf ;;
    *)
        echo "run-all.sh: unknown suite $suite"
        total_failed=$((total_failed + 1)) ;;
    esac
done

echo "C ABI tests: $total_passed passed, $total_failed failed"
if [ ${#broken[@]} -ne 0 ]; then
    printf 'failing: %s\n' "${broken[@]}"
    exit 1
fi
