#!/bin/bash
# report.sh DIR MODE...: the results of the VM runs (DIR/result-MODE.txt, written by run.sh)
# side by side: each suite's passed/failed count per module mode, the totals, and for
# NVIDIA's gdrcopy_sanity each test's outcome with NVIDIA's library and with this project's.
# Fails when a mode has no results, a suite failed, or NVIDIA's sanity gave a test different
# outcomes with the two libraries (tests that fail with both are listed, not failed: the VM's
# known limits, see vm/README.md).
set -u
dir=$1
shift
modes=("$@")
fail=0

printf '\n%-28s' "suite"
for m in "${modes[@]}"; do printf ' %22s' "$m"; done
printf '\n'
names=$(for m in "${modes[@]}"; do
    awk '$1 == "gdrvm-result:" { print $2 }' "$dir/result-$m.txt" 2>/dev/null
done | awk '!seen[$0]++')
declare -A tp=() tf=()
for n in $names; do
    printf '%-28s' "$n"
    for m in "${modes[@]}"; do
        r=$(awk -v n="$n" '$1 == "gdrvm-result:" && $2 == n { print $3, $4, $5 }' "$dir/result-$m.txt")
        if [ -z "$r" ]; then printf ' %22s' "-"; fail=1; continue; fi
        set -- $r
        printf ' %22s' "$1 passed, $2 failed"
        tp[$m]=$(( ${tp[$m]:-0} + $1 )) tf[$m]=$(( ${tf[$m]:-0} + $2 ))
        # NVIDIA's sanity is judged by the test-by-test comparison below.
        case $n in upstream-sanity-*) ;; *) [ "$2" -eq 0 ] || fail=1;; esac
    done
    printf '\n'
done
printf '%-28s' "total"
for m in "${modes[@]}"; do
    [ -s "$dir/result-$m.txt" ] || fail=1
    printf ' %22s' "${tp[$m]:-0} passed, ${tf[$m]:-0} failed"
done
printf '\n'

# NVIDIA's sanity, test by test: NVIDIA's library against this project's, per mode.
for m in "${modes[@]}"; do
    f=$dir/result-$m.txt
    grep -q '^gdrvm-case: upstream-sanity-' "$f" 2>/dev/null || continue
    printf '\ngdrcopy_sanity, %s mode: %-36s %8s %8s\n' "$m" "test" "NVIDIA" "ours"
    tests=$(awk '$1 == "gdrvm-case:" && $2 ~ /^upstream-sanity-/ { print $3 }' "$f" | awk '!seen[$0]++')
    diff=0
    for t in $tests; do
        a=$(awk -v t="$t" '$2 == "upstream-sanity-theirs" && $3 == t { print $4; exit }' "$f")
        b=$(awk -v t="$t" '$2 == "upstream-sanity-ours" && $3 == t { print $4; exit }' "$f")
        mark=; [ "$a" = "$b" ] || { mark="  <- differs"; diff=1; }
        printf '  %-62s %8s %8s%s\n' "$t" "${a:--}" "${b:--}" "$mark"
    done
    [ $diff -eq 0 ] || { echo "  the two libraries differ"; fail=1; }
done
exit $fail
