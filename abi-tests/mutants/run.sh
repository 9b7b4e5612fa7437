#!/bin/bash
# run.sh WORK SHIM_DIR LIB_DIR SIM_DIR ABI_BIN DMABUF_BIN VULKAN_BIN LIST - the mutation check.
#
# For every mutant that LIST (mutants-list) names, runs the project's C suites against the
# shim in SHIM_DIR (a libgdrapi.so.2 that breaks that one function and forwards the rest to
# the real library in LIB_DIR) and records which suites fail: a mutant is killed when at
# least one does. A control run without a mutant comes first and must pass every suite, and
# every suite's programs must have loaded the shim (the Vulkan configurations included).
# A mutant that survives fails the check unless unobservable.txt lists it with the reason.
#
# Environment:
#   SIM_VULKAN_VARS the Vulkan import's settings (the Makefile's): the threads and fork suites'
#                   Vulkan configurations need them (run-all.sh adds the paths, the shim's)
#   MUTANTS         space-separated mutants to run (default: the whole catalogue)
#   MUTANTS_SUITES  suites to run per mutant (default below)
#   MUTANTS_JOBS    mutants run at once (default: the number of CPUs)
#   MUTANTS_FIRST_KILL=1  stop at the first suite that kills a mutant (faster, less detail)
#   MUTANTS_API_CONFIGS   the emulator settings of the api suite (see ABI_API_CONFIGS)
set -u
work=$1 shim=$(cd "$2" && pwd) lib=$(cd "$3" && pwd) sim=$(cd "$4" && pwd)
abi_bin=$(cd "$5" && pwd) dmabuf_bin=$(cd "$6" && pwd) vulkan_bin=$(cd "$7" && pwd) list=$8
here=$(cd "$(dirname "$0")" && pwd)
abi_run=$here/../c/run-all.sh
dmabuf_run=$here/../dmabuf/run.sh
vulkan_run=$here/../vulkan/run.sh
unobservable_file=$here/unobservable.txt

# Suites: the C ABI suites that exercise behaviour, and the DMA-BUF and Vulkan-import
# backends' suites. Left out: layout and elf (they read no behaviour, and the shim's symbol
# table is not the library's), and logging (the slowest; every mutant it killed, the api
# suite killed too).
suites=${MUTANTS_SUITES:-api handles threads fork loading dmabuf vulkan}
# The api suite under five of its fourteen settings: the current driver persistent and not,
# the coherent profile, 2.4 (GET_INFO_V2 but no v2 pin, no attributes) and 2.3 (v1 info).
api_configs=${MUTANTS_API_CONFIGS:-2.6/1 2.6/0 2.6/1/coherent 2.4/0 2.3/1}
jobs=${MUTANTS_JOBS:-$(nproc 2>/dev/null || echo 2)}
first_kill=${MUTANTS_FIRST_KILL:-0}

rm -rf "$work"
mkdir -p "$work/results" "$work/logs" "$work/hits" "$work/loads"

export GDRAPI_MUTANT_REAL=$lib/libgdrapi.so.2
export ABI_TIMEOUT=${ABI_TIMEOUT:-30}

# suite NAME DIR: runs one suite against the shim (GDRAPI_MUTANT comes from the caller);
# 0 when it passes. DIR is a scratch folder of this run.
suite() {
    local name=$1 dir=$2
    case $name in
    api)
        GDRAPI_TEST_OURS=1 ABI_SUITES=api ABI_API_CONFIGS="$api_configs" \
            "$abi_run" "$abi_bin" "$shim" "$sim" ;;
    handles | threads | fork | loading | logging)
        GDRAPI_TEST_OURS=1 ABI_SUITES=$name "$abi_run" "$abi_bin" "$shim" "$sim" ;;
    dmabuf)
        # run.sh keeps its logs next to its programs: a folder of links per run.
        mkdir -p "$dir/dmabuf"
        ln -sf "$dmabuf_bin/dmabuf_test" "$dmabuf_bin/dmabuf-probe" "$dir/dmabuf/"
        timeout -k 5 120 "$dmabuf_run" "$dir/dmabuf" "$shim" "$sim" ;;
    vulkan)
        # vulkan_test and pools are linked with -lgdrapi; nccl_pattern dlopens libgdrapi.so
        # by name: all find the shim, first on the library path under both names.
        mkdir -p "$dir/vulkan"
        ln -sf "$vulkan_bin/vulkan_test" "$vulkan_bin/nccl_pattern" "$vulkan_bin/pools" \
            "$dir/vulkan/"
        timeout -k 5 120 "$vulkan_run" "$dir/vulkan" "$shim" "$sim" ;;
    *)
        echo "mutants/run.sh: unknown suite $name"
        return 2 ;;
    esac
}

# mutant NAME: every suite with GDRAPI_MUTANT=NAME ("" = control); writes results/NAME
# ("killed-by SUITE..."), and logs/NAME.SUITE.log for each suite that failed; the control
# also loads/SUITE, the programs that loaded the shim.
mutant() {
    local name=$1 key=${1:-control} s killers=() loads
    # No ':' in the scratch folder: the Vulkan suite puts a folder of it on LD_LIBRARY_PATH.
    local dir=$work/runs/${key//:/-}
    mkdir -p "$dir"
    for s in $suites; do
        loads=
        [ -z "$name" ] && loads=$work/loads/$s
        if GDRAPI_MUTANT=$name GDRAPI_MUTANT_HITS=$work/hits/$key GDRAPI_MUTANT_LOADS=$loads \
            suite "$s" "$dir" >"$dir/$s.log" 2>&1; then
            rm -f "$dir/$s.log"
        else
            killers+=("$s")
            mv "$dir/$s.log" "$work/logs/$key.$s.log"
            [ "$first_kill" = 1 ] && break
        fi
    done
    rm -rf "$dir"
    echo "killed-by ${killers[*]}" >"$work/results/$key"
}

# The unobservable list: "function:kind" lines, each after the comment saying why.
declare -A unobservable=()
while read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [ -n "$line" ] && unobservable[$line]=1
done <"$unobservable_file"

mapfile -t catalogue < <("$list")
declare -A what=()
for entry in "${catalogue[@]}"; do what[${entry%%$'\t'*}]=${entry#*$'\t'}; done
if [ ${#what[@]} -eq 0 ]; then
    echo "mutants/run.sh: $list printed no mutants"
    exit 1
fi
names=${MUTANTS:-$(for entry in "${catalogue[@]}"; do echo "${entry%%$'\t'*}"; done)}
for m in $names; do
    [ -n "${what[$m]+x}" ] || { echo "mutants/run.sh: $m is not in the catalogue"; exit 1; }
done
for m in "${!unobservable[@]}"; do
    [ -n "${what[$m]+x}" ] || { echo "mutants/run.sh: unobservable.txt lists $m, not in the catalogue"; exit 1; }
done

start=$(date +%s)

# The control: the shim without a mutant must pass everything, else no result means anything.
mutant ""
read -r _ control_killers <"$work/results/control"
if [ -n "$control_killers" ]; then
    for s in $control_killers; do tail -30 "$work/logs/control.$s.log"; done
    echo "mutants/run.sh: the shim without a mutant fails: $control_killers"
    echo "0 passed, 1 failed"
    exit 1
fi
# ... through the shim: each suite's programs loaded it (a program that reached the real
# library directly would let every mutant survive unseen there), the Vulkan configurations
# (GDRAPI_USE_VULKAN=1) included, and every program of the Vulkan suite.
missing=()
loaded() { # SUITE PATTERN: a line of loads/SUITE matches
    grep -Eq -- "$2" "$work/loads/$1" 2>/dev/null || missing+=("$1 (${2:-any program})")
}
for s in $suites; do
    loaded "$s" ''
    case $s in
    threads | fork) loaded "$s" "^$s vulkan$" ;;
    dmabuf) loaded "$s" '^dmabuf_test ' ;;
    vulkan)
        loaded "$s" '^vulkan_test vulkan$'
        loaded "$s" '^nccl_pattern vulkan$'
        loaded "$s" '^pools vulkan$' ;;
    esac
done
if [ ${#missing[@]} -ne 0 ]; then
    printf 'mutants/run.sh: in the control, these did not load the shim: %s\n' "${missing[*]}"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "control (no mutant): every suite passes through the shim ($suites)"

# The mutants, MUTANTS_JOBS at a time.
running=0
for m in $names; do
    mutant "$m" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

killed=0 expected=0 survived=0 stale=0 total=0
printf '%-38s %-12s %s\n' "mutant" "result" "killed by"
for m in $names; do
    total=$((total + 1))
    read -r _ killers <"$work/results/$m" 2>/dev/null || killers="(no result)"
    if [ -n "${unobservable[$m]+x}" ]; then
        if [ -z "$killers" ]; then
            result="unobservable" expected=$((expected + 1))
        else
            # Listed as unobservable, yet a suite tells it apart: the list is wrong.
            result="KILLED-LISTED" stale=$((stale + 1))
        fi
    elif [ -n "$killers" ]; then
        result="killed" killed=$((killed + 1))
    else
        result="SURVIVED" survived=$((survived + 1))
        [ -s "$work/hits/$m" ] || killers="(the mutation never took effect)"
    fi
    printf '%-38s %-12s %s\n' "$m" "$result" "${killers:--}"
done
for m in $names; do
    read -r _ killers <"$work/results/$m" 2>/dev/null || continue
    if [ -z "$killers" ] && [ -z "${unobservable[$m]+x}" ]; then
        echo "survivor $m: ${what[$m]}"
    fi
done

observable=$((total - expected))
echo "mutation check: $total mutants, $killed of $observable observable ones killed" \
    "($((observable > 0 ? killed * 100 / observable : 100))%), $expected unobservable (listed)," \
    "$survived survived, $stale listed but killed; $(($(date +%s) - start)) s," \
    "$jobs at a time; logs in $work/logs"
echo "$((killed + expected)) passed, $((survived + stale)) failed"
[ $((survived + stale)) -eq 0 ]
