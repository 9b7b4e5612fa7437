#!/bin/sh
# tests.sh PERSISTENT: the suites the VM runs against the real gdrdrv (busybox sh). Every
# program prints "N passed, N failed" (the C suites) or is judged by its exit status (tools);
# each gives one line "gdrvm-result: NAME PASSED FAILED SECONDS" for the host to add up.
# /t/lib: the library under test; /t/sim: the emulator (GDRSIM_BACKING=kernel);
# /t/upstream (optional): NVIDIA's test programs (bin/) and library (lib/).
persist=$1
limit=${GDRVM_TIMEOUT:-300}
export GDRSIM_BACKING=kernel GDRSIM_PERSISTENT=$persist GDRSIM_DRIVER_VERSION=2.6
failed=0

now() { cut -d' ' -f1 /proc/uptime; }

# run NAME KIND CMD...: KIND "suite" counts the program's own summary, "tool" its exit
# status, "report" too and shows its output.
run() {
    name=$1 kind=$2
    shift 2
    t0=$(now)
    timeout "$limit" env GDRAPI_CHECK_TRACE=1 "$@" > /tmp/out 2>&1
    rc=$?
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ "$kind" = suite ]; then
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/out | tail -1)
        p=${line%% *}
        f=$(echo "$line" | awk '{ print $3 }')
        p=${p:-0} f=${f:-0}
        if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then
            f=$((f + 1))
        fi
    else # tool, report: the exit status
        p=1 f=0
        [ "$rc" -eq 0 ] || { p=0 f=1; }
    fi
    # Each check's outcome (the suites' GDRAPI_CHECK_TRACE), for the comparison with the emulator.
    grep '^check-trace: ' /tmp/out | sort | uniq -c | awk -v n="$name" '{ print "gdrvm-trace: " n " " $3 " " $4 " " $1 }'
    if [ "$f" -ne 0 ] || [ "$kind" = report ]; then
        grep -v '^check-trace: ' /tmp/out | tail -40 | sed "s|^|  [$name] |"
        echo "  [$name] exit status $rc"
    fi
    echo "gdrvm-result: $name $p $f $secs"
    [ "$f" -eq 0 ] || failed=1
}

# The environment of a program on the emulator's kernel backing with this project's library.
ours="env LD_PRELOAD=/t/sim/libcuda.so.1 LD_LIBRARY_PATH=/t/sim:/t/lib GDRAPI_TEST_OURS=1"

# The C ABI suites (their emulator-only cases skip themselves under GDRSIM_BACKING=kernel).
run abi-api suite $ours /t/abi/api
run abi-handles suite $ours /t/abi/handles
run abi-threads suite $ours /t/abi/threads
run abi-fork suite $ours /t/abi/fork
run rel-forkhold suite $ours /t/abi/forkhold
run rel-stress suite $ours /t/abi/stress ${GDRVM_STRESS_ROUNDS:-40} ${GDRVM_STRESS_THREADS:-4} 2

# The tools.
# The doctor's report is shown: it must name the module, its parameters and its version.
run tool-doctor report $ours /t/bin/gdrcopy doctor
# ... and say what the module says about itself.
want=yes; [ "$persist" = 1 ] || want=no
version=$(sed -n 's/^Version: //p' /proc/driver/gdrdrv/params)
major=$(awk '$2 == "gdrdrv" { print $1 }' /proc/devices)
p=0 f=0
for pat in "driver_version  gdrdrv $version " "driver_params   persistent mapping: $want" \
        "device_node     /dev/gdrdrv is present (char $major:0"; do
    if grep -qF "$pat" /tmp/out; then p=$((p + 1)); else f=$((f + 1)); echo "  [tool-doctor] missing: $pat"; fi
done
echo "gdrvm-result: tool-doctor-facts $p $f 0"
[ "$f" -eq 0 ] || failed=1
run tool-copybw tool $ours /t/bin/gdrcopy_copybw -s 1048576 -w 20 -r 5
run tool-copylat tool $ours /t/bin/gdrcopy_copylat -s 65536 -w 10 -r 3
run tool-apiperf tool $ours /t/bin/gdrcopy_apiperf -s 1048576 -n 5 -w 2

# UCX (when make test-ucx built it), with its default settings: its memory hooks and its
# gdr_copy transport meet the real module. GPU memory on both sides of every transfer.
ucx_perf() {
    t=$1 p=0 f=0 t0=$(now)
    for s in 8 64 512 4096 65536 1048576; do
        n=2000; [ "$s" -ge 65536 ] && n=200
        timeout 120 env LD_PRELOAD="/t/sim/libcuda.so.1 /t/ucx/lib/gdr_count.so" \
            LD_LIBRARY_PATH=/t/sim:/t/lib:/t/ucx/lib \
            /t/ucx/bin/ucx_perftest -l -m cuda -t "$t" -x gdr_copy -d cuda -s "$s" -n "$n" -w 20 -f \
            > /tmp/out 2>&1
        rc=$?
        line=$(grep -E '^(Final:)? *[0-9]+ +[0-9.]+ ' /tmp/out | tail -1 | sed 's/^Final://')
        copies=$(sed -n 's/^GDRCOUNT to=\([0-9]*\) from=\([0-9]*\).*/\1 \2/p' /tmp/out | tail -1)
        set -- $copies
        copies=$((${1:-0} + ${2:-0}))
        if [ "$rc" -eq 0 ] && [ -n "$line" ] && [ "$copies" -ge "$n" ]; then
            p=$((p + 1))
            echo "$line" | awk -v t="$t" -v s="$s" -v c="$copies" \
                '{ printf "gdrvm: ucx uct %-8s %8s B %9.3f us %10.1f MB/s %8d gdr copies\n", t, s, $2, $6, c }'
        else
            f=$((f + 1))
            tail -15 /tmp/out | sed "s|^|  [ucx-perftest $t $s] |"
            echo "  [ucx-perftest $t $s] exit status $rc, $copies copies through libgdrapi"
        fi
    done
    echo "gdrvm-result: ucx-perftest-$t $p $f $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
    [ "$f" -eq 0 ] || failed=1
}
if [ -d /t/ucx ]; then
    ucx="env LD_PRELOAD=/t/sim/libcuda.so.1 LD_LIBRARY_PATH=/t/sim:/t/lib:/t/ucx/lib"
    $ucx /t/ucx/bin/ucx_info -d > /tmp/ucxinfo 2>&1
    p=0 f=0
    for pat in "Memory domain: gdr_copy" "Transport: gdr_copy"; do
        if grep -q "$pat" /tmp/ucxinfo; then p=$((p + 1)); else f=$((f + 1)); echo "  [ucx-info] missing: $pat"; fi
    done
    [ "$f" -eq 0 ] || tail -20 /tmp/ucxinfo | sed 's|^|  [ucx-info] |'
    echo "gdrvm-result: ucx-info $p $f 0"
    [ "$f" -eq 0 ] || failed=1
    ucx_perf put_lat
    ucx_perf put_bw
    run ucx-uct-check suite $ucx /t/ucx/bin/uct_gdr_check
    grep '^uct_gdr_check:' /tmp/out | sed 's/^/gdrvm: ucx /'
fi

# NVIDIA's test programs against both libraries; gdrcopy_sanity one test at a time (it has no
# timeout of its own), each test's outcome as "gdrvm-case: upstream-sanity-LIB TEST RESULT".
sanity() {
    lib=$1 p=0 f=0
    t0=$(now)
    for t in $($up /t/upstream/bin/gdrcopy_sanity -l -e | awk '/^    / { print $1 }'); do
        timeout 120 env GDRVM_LIB=$lib $up /t/upstream/bin/gdrcopy_sanity -v -t "$t" > /tmp/out 2>&1
        rc=$?
        r=$(grep -oE '^&&&& (PASSED|FAILED|WAIVED) ' /tmp/out | tail -1 | cut -d' ' -f2)
        [ -n "$r" ] || r=HUNG-OR-CRASHED
        [ "$rc" -eq 0 ] || [ "$r" != PASSED ] || r=FAILED
        echo "gdrvm-case: upstream-sanity-$lib $t $r"
        case $r in PASSED|WAIVED) p=$((p + 1));; *) f=$((f + 1)); tail -15 /tmp/out | sed "s|^|  [sanity-$lib $t] |";; esac
    done
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    echo "gdrvm-result: upstream-sanity-$lib $p $f $secs"
}
if [ -d /t/upstream ]; then
    for lib in theirs ours; do
        if [ $lib = theirs ]; then libdir=/t/upstream/lib; else libdir=/t/lib; fi
        up="env LD_PRELOAD=/t/sim/libcuda.so.1 LD_LIBRARY_PATH=/t/sim:$libdir"
        sanity $lib
        run "upstream-copybw-$lib" tool $up /t/upstream/bin/gdrcopy_copybw -s 1048576 -w 20 -r 5
        run "upstream-copylat-$lib" tool $up /t/upstream/bin/gdrcopy_copylat -s 65536 -w 10 -r 3
        run "upstream-apiperf-$lib" tool $up /t/upstream/bin/gdrcopy_apiperf -s 1048576 -n 5 -w 2
    done
fi
exit $failed
