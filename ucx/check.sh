#!/usr/bin/env bash
# Runs UCX on the emulator with UCX's default settings (no UCX_* workaround variables):
#
#   ucx/check.sh <ucx build dir> <gdrcopy install prefix> <emulator dir> [persistent modes]
#
# 1. ucx_info -d lists the gdr_copy memory domain and transport;
# 2. ucx_perftest in loopback, GPU memory on both sides: UCT put latency and bandwidth over
#    gdr_copy, and UCP put latency, put bandwidth and get with UCX_TLS=self,gdr_copy,cuda_copy,
#    8 B to 1 MiB;
# 3. gdr_copy's registration cache: UCP tag_lat from host to GPU memory pins once per run;
# 4. uct_gdr_check (ucx/uct_gdr_check.c): put_short/get_short on the gdr_copy interface, every
#    byte of the GPU buffer checked, on unaligned offsets;
# 5. UCX's gtest filtered to gdr_copy, per GDRSIM_PERSISTENT mode: executed/passed/skipped;
# 6. the Vulkan import (GDRAPI_USE_VULKAN=1 where there is no gdrdrv and no DMA-BUF mmap):
#    uct_gdr_check on cuMemCreate memory goes through gdr_copy, and cudaMalloc memory, which
#    the backend cannot pin, works over cuda_copy the documented way (UCX_TLS=^gdr_copy)
#    while UCX's default settings fail its registration on gdr_copy.
set -euo pipefail

DIR=$1 GDR=$2 SIM=$3
MODES=${4:-"1 0"}
HERE=$(cd "$(dirname "$0")" && pwd)
INST="$DIR/inst"
export LD_PRELOAD="$SIM/libcuda.so.1"
export LD_LIBRARY_PATH="$SIM:$GDR/lib:$INST/lib"
unset $(env | grep -o '^UCX_[A-Z_]*' || true)
fail=0

echo "== ucx_info -d"
info=$("$INST/bin/ucx_info" -d)
for want in "Memory domain: gdr_copy" "Transport: gdr_copy"; do
    if grep -q "$want" <<<"$info"; then echo "   $want: listed"; else echo "FAIL: $want missing"; fail=1; fi
done

cc -O1 -g -Wall -Werror -shared -fPIC -I"$HERE/../include" -o "$DIR/gdr_count.so" "$HERE/../harness/gdr_count.c" -ldl

# perf <label> <min copies through libgdrapi per iteration, 0: not required> <env> <args...>
perf() {
    local label=$1 per_iter=$2 envs=$3; shift 3
    for s in 8 64 512 4096 65536 1048576; do
        local n=2000 w=20 out
        [ "$s" -ge 65536 ] && n=200
        if out=$(env $envs LD_PRELOAD="$LD_PRELOAD $DIR/gdr_count.so" timeout 120 \
                 "$INST/bin/ucx_perftest" -l -m cuda -s "$s" -n "$n" -w "$w" -f "$@" 2>&1); then
            local line copies
            line=$(grep -E '^(Final:)? *[0-9]+ +[0-9.]+ ' <<<"$out" | tail -1 | sed 's/^Final://')
            copies=$(sed -n 's/^GDRCOUNT to=\([0-9]*\) from=\([0-9]*\).*/\1+\2/p' <<<"$out" | tail -1)
            copies=$((${copies:-0}))
            if [ -z "$line" ]; then echo "FAIL: $label $s B: no result"; fail=1; continue; fi
            awk -v l="$label" -v s="$s" -v c="$copies" \
                '{printf "   %-12s %8s B  %9.3f us  %10.1f MB/s  %8d gdr copies\n", l, s, $2, $6, c}' <<<"$line"
            if [ "$per_iter" -gt 0 ] && [ "$copies" -lt $((n * per_iter)) ]; then
                echo "FAIL: $label $s B: $copies copies through libgdrapi for $n iterations"; fail=1
            fi
        else
            echo "FAIL: $label $s B:"; tail -3 <<<"$out"; fail=1
        fi
    done
}
echo "== ucx_perftest -l -m cuda (GPU memory both sides; size, 50%ile latency, bandwidth, copies)"
perf "uct put_lat" 1 "" -t put_lat -x gdr_copy -d cuda
perf "uct put_bw" 1 "" -t put_bw -x gdr_copy -d cuda
perf "ucp put_lat" 0 "UCX_TLS=self,gdr_copy,cuda_copy" -t ucp_put_lat
perf "ucp put_bw" 0 "UCX_TLS=self,gdr_copy,cuda_copy" -t ucp_put_bw
perf "ucp get" 0 "UCX_TLS=self,gdr_copy,cuda_copy" -t ucp_get

# gdr_copy's registration cache: UCP's tag_lat from host to GPU memory writes each message into
# the GPU buffer through gdr_copy, registering it every time; the cache, which needs UCX's CUDA
# memory hooks, turns that into one pin and one map per run. Without the hooks (a hooked
# function UCX cannot patch) every message pins, maps, unmaps and unpins again.
echo "== gdr_copy registration cache (ucp tag_lat, host to GPU memory, 8 B, 2000 messages)"
out=$(UCX_TLS=self,gdr_copy,cuda_copy LD_PRELOAD="$LD_PRELOAD $DIR/gdr_count.so" timeout 120 \
      "$INST/bin/ucx_perftest" -l -m host,cuda -t tag_lat -s 8 -n 2000 -w 20 2>&1) || {
    echo "FAIL: tag_lat:"; tail -3 <<<"$out"; fail=1; }
count=$(grep '^GDRCOUNT' <<<"$out" | tail -1)
to=$(sed -n 's/.* to=\([0-9]*\) .*/\1/p' <<<"$count")
pins=$(sed -n 's/.* pin=\([0-9]*\) .*/\1/p' <<<"$count")
echo "   ${count:-no GDRCOUNT line}"
if [ "${to:-0}" -lt 2000 ] || [ "${pins:-99}" -gt 2 ]; then
    echo "FAIL: expected at least 2000 copies and at most 2 pins (the registration cache)"; fail=1
fi

echo "== uct_gdr_check"
CUDA_INC="$DIR/cuda/include"
cc -O1 -g -Wall -Werror -I"$INST/include" -I"$CUDA_INC" -I"$HERE/../harness" -o "$DIR/uct_gdr_check" \
    "$HERE/uct_gdr_check.c" -L"$INST/lib" -L"$SIM" -luct -lucs -lcuda
for m in $MODES; do
    if out=$(GDRSIM_PERSISTENT=$m "$DIR/uct_gdr_check" 2>&1); then
        echo "   GDRSIM_PERSISTENT=$m: $(grep '^uct_gdr_check:' <<<"$out" | cut -d' ' -f2-);" \
             "$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -1)"
    else
        echo "FAIL: GDRSIM_PERSISTENT=$m:"; tail -8 <<<"$out"; fail=1
    fi
done

echo "== the Vulkan import (GDRAPI_USE_VULKAN=1, no gdrdrv, CUDA 13.0, the Vulkan stand-in)"
VK=(GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRAPI_USE_VULKAN=1
    LD_LIBRARY_PATH="$SIM/vulkan:$LD_LIBRARY_PATH")
if out=$(env "${VK[@]}" GDRAPI_TEST_ALLOC=vmm LD_PRELOAD="$LD_PRELOAD $DIR/gdr_count.so" \
         "$DIR/uct_gdr_check" 2>&1); then
    count=$(grep '^GDRCOUNT' <<<"$out" | tail -1)
    pins=$(sed -n 's/.* pin=\([0-9]*\) .*/\1/p' <<<"$count")
    echo "   uct_gdr_check, cuMemCreate memory: $(grep '^uct_gdr_check:' <<<"$out" | cut -d' ' -f2-);" \
         "$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -1); $count"
    if [ "${pins:-0}" -lt 1 ]; then echo "FAIL: no pin through libgdrapi"; fail=1; fi
else
    echo "FAIL: uct_gdr_check on cuMemCreate memory:"; tail -8 <<<"$out"; fail=1
fi
# cudaMalloc memory (ucx_perftest -m cuda): UCX registers it on gdr_copy, which this backend
# cannot pin, and UCX fails the registration; with gdr_copy left out, cuda_copy carries it.
vkperf() {
    env "${VK[@]}" "$@" timeout 120 "$INST/bin/ucx_perftest" -l -m cuda -t ucp_put_lat -s 8 \
        -n 200 -w 10 2>&1
}
if out=$(vkperf); then
    echo "FAIL: ucp_put_lat on cudaMalloc memory with gdr_copy on the Vulkan import passed:" \
         "UCX no longer fails such a registration; update README's UCX advice"; fail=1
elif grep -q 'gdr_pin_buffer failed' <<<"$out"; then
    echo "   ucp_put_lat, cudaMalloc memory, UCX defaults: registration refused on gdr_copy, as documented"
else
    echo "FAIL: ucp_put_lat on cudaMalloc memory failed otherwise than documented:"; tail -5 <<<"$out"; fail=1
fi
if out=$(vkperf UCX_TLS=^gdr_copy); then
    echo "   ucp_put_lat, cudaMalloc memory, UCX_TLS=^gdr_copy:" \
         "$(grep -E '^(Final:)? *[0-9]+ +[0-9.]+ ' <<<"$out" | tail -1 | sed 's/^Final://' |
            awk '{print $2 " us"}')"
else
    echo "FAIL: ucp_put_lat on cudaMalloc memory with UCX_TLS=^gdr_copy:"; tail -5 <<<"$out"; fail=1
fi

echo "== UCX gtest, filter *gdr_copy*"
GT=${UCXCHECK_GTEST:-$DIR/obj/test/gtest/gtest}
for m in $MODES; do
    log="$DIR/gtest-persistent$m.log"
    rc=0
    GDRSIM_PERSISTENT=$m UCX_HANDLE_ERRORS=bt LD_PRELOAD="$LD_PRELOAD $DIR/gdr_count.so" \
        timeout 900 "$GT" --gtest_filter='*gdr_copy*' >"$log" 2>&1 || rc=$?
    total=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran.*/\1/p' "$log")
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\./\1/p' "$log")
    skipped=$(grep -c '^\[     SKIP \]' "$log" || true)
    failed=$(grep -c '^\[  FAILED  \] [a-z_]*/.*(' "$log" || true)
    copies=$(sed -n 's/^GDRCOUNT to=\([0-9]*\) from=\([0-9]*\).*/\1+\2/p' "$log" | tail -1)
    ran=$(awk '/^\[ RUN/ {n=$4; s=0} /^\[     SKIP/ {s=1} /^\[       OK/ {if (!s) printf "%s ", n}' "$log")
    echo "   GDRSIM_PERSISTENT=$m: executed ${total:-?}, passed ${passed:-0}, skipped by UCX $skipped," \
         "failed $failed; ran: $ran; $((${copies:-0})) copies through libgdrapi (log $log)"
    if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ -z "$total" ] || [ "${passed:-0}" != "$total" ]; then
        grep '^\[  FAILED  \]' "$log" | head -10; fail=1
    fi
done
exit $fail
