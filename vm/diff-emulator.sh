#!/bin/bash
# diff-emulator.sh DIR ABI_OUT REL_OUT LIB_DIR SIM_DIR MODE...: runs the C suites that the VM
# ran (DIR/result-MODE.txt, with their per-check traces) on the emulator with the same
# settings (driver 2.6, GDRSIM_PERSISTENT of the mode) and compares them check by check (a
# check is a FILE:LINE of a suite; its outcome the set of P/F it gave). Prints the checks that
# only one side ran (the fault-injection cases the VM skips, the branches a driver's answer
# chose) and fails when a check that both ran had a different outcome.
set -u
dir=$1 abi=$2 rel=$3 lib=$4 sim=$5
shift 5
fail=0
declare -A prog=([abi-api]=$abi/api [abi-handles]=$abi/handles [abi-threads]=$abi/threads
    [abi-fork]=$abi/fork [rel-forkhold]=$rel/forkhold [rel-stress]="$rel/stress 40 4 2")

for m in "$@"; do
    f=$dir/result-$m.txt
    [ -s "$f" ] || continue
    p=1; [ "$m" = nonpersistent ] && p=0
    echo
    echo "emulator vs gdrdrv module, $m mode (checks: both / emulator only / module only / differing)"
    for name in $(awk '$1 == "gdrvm-trace:" { print $2 }' "$f" | awk '!seen[$0]++'); do
        [ -n "${prog[$name]:-}" ] || continue
        awk -v n="$name" '$1 == "gdrvm-trace:" && $2 == n { print $3, $4 }' "$f" | sort -u > "$dir/trace-vm.txt"
        env LD_PRELOAD="$sim/libcuda.so.1" LD_LIBRARY_PATH="$sim:$lib" GDRAPI_TEST_OURS=1 \
            GDRSIM_PERSISTENT=$p GDRSIM_DRIVER_VERSION=2.6 GDRAPI_CHECK_TRACE=1 \
            timeout 300 ${prog[$name]} 2>&1 | awk '$1 == "check-trace:" { print $2, $3 }' | sort -u \
            > "$dir/trace-sim.txt"
        # FILE:LINE -> outcomes, per side
        join -a1 -a2 -e - -o 0,1.2,2.2 \
            <(awk '{ o[$1] = o[$1] $2 } END { for (k in o) print k, o[k] }' "$dir/trace-sim.txt" | sort) \
            <(awk '{ o[$1] = o[$1] $2 } END { for (k in o) print k, o[k] }' "$dir/trace-vm.txt" | sort) \
            > "$dir/trace-join.txt"
        both=$(awk '$2 != "-" && $3 != "-"' "$dir/trace-join.txt" | wc -l)
        simonly=$(awk '$3 == "-"' "$dir/trace-join.txt" | wc -l)
        vmonly=$(awk '$2 == "-"' "$dir/trace-join.txt" | wc -l)
        differ=$(awk '$2 != "-" && $3 != "-" && $2 != $3' "$dir/trace-join.txt" | wc -l)
        printf '  %-14s %4d / %3d / %3d / %d\n' "$name" "$both" "$simonly" "$vmonly" "$differ"
        # Per side, the lines of the checks only it ran, one line per file.
        for side in emulator module; do
            col=3; [ $side = module ] && col=2
            awk -v c=$col '$c == "-" { split($1, a, ":"); l[a[1]] = l[a[1]] " " a[2] }
                END { for (f in l) print f ":" l[f] }' "$dir/trace-join.txt" |
                while read -r fl lines; do
                    echo "    $side only, $fl $(echo $lines | tr ' ' '\n' | sort -n | tr '\n' ' ')"
                done
        done
        awk '$2 != "-" && $3 != "-" && $2 != $3 { printf "    DIFFERS: %s emulator %s, module %s\n", $1, $2, $3 }' \
            "$dir/trace-join.txt"
        [ "$differ" -eq 0 ] || fail=1
    done
done
rm -f "$dir/trace-vm.txt" "$dir/trace-sim.txt" "$dir/trace-join.txt"

# NVIDIA's sanity (with this project's library), test by test, when the VM ran it.
up=${UPSTREAM_TESTS:-}
for m in "$@"; do
    f=$dir/result-$m.txt
    [ -n "$up" ] && grep -q '^gdrvm-case: upstream-sanity-ours ' "$f" 2>/dev/null || continue
    p=1; [ "$m" = nonpersistent ] && p=0
    echo
    echo "gdrcopy_sanity (this library), emulator vs gdrdrv module, $m mode:"
    same=0
    for t in $(awk '$1 == "gdrvm-case:" && $2 == "upstream-sanity-ours" { print $3 }' "$f"); do
        vm=$(awk -v t="$t" '$2 == "upstream-sanity-ours" && $3 == t { print $4; exit }' "$f")
        out=$(env LD_PRELOAD="$sim/libcuda.so.1" LD_LIBRARY_PATH="$sim:$lib" GDRSIM_PERSISTENT=$p GDRSIM_DBG_ENABLED=1 \
            GDRSIM_DRIVER_VERSION=2.6 timeout 120 "$up/gdrcopy_sanity" -v -t "$t" 2>&1)
        rc=$?
        em=$(echo "$out" | grep -oE '^&&&& (PASSED|FAILED|WAIVED) ' | tail -1 | cut -d' ' -f2)
        [ -n "$em" ] || em=HUNG-OR-CRASHED
        [ $rc -eq 0 ] || [ "$em" != PASSED ] || em=FAILED
        if [ "$em" = "$vm" ]; then same=$((same + 1)); else printf '  %-60s emulator %s, module %s\n' "$t" "$em" "$vm"; fi
    done
    echo "  $same tests with the same outcome"
done
exit $fail
