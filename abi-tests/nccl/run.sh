#!/bin/bash
# make test-nccl: real NCCL (from a pip wheel) on two GPUs, its network transport forced on
# loopback, gdrcopy enabled through this library with no kernel module (the Vulkan import).
# See abi-tests/nccl/README.md for what it proves and why each setting is there.
#
# Usage: run.sh BUILD_DIR [--build-only]
#   BUILD_DIR holds lib/ (the library, `make lib`); the script builds BUILD_DIR/nccl/allreduce
#   (abi-tests/nccl/allreduce.c) against the NCCL it finds, and nccl/count/libgdrapi.so, the
#   counting shim (harness/gdr_count.c as a libgdrapi.so in front of the library, as
#   mk/69-nccl.mk builds it for test-nccl-count). --build-only builds and stops (no GPU needed).
#
# Steps: skips (exit 0) with a reason where fewer than two GPUs are visible; finds NCCL and the
# CUDA runtime (locate.py: NCCL_HOME, CUDA_HOME, else this python3's pip wheels, else
# /usr/local/cuda; where none is installed and pip reaches an index, a scratch venv in
# BUILD_DIR/nccl/venv); builds; one counted run (the shim in front of the library, its debug
# log on) whose checks are printed one a line; then NCCL_TEST_RUNS (5) alternating runs with
# and without NCCL_GDRCOPY_ENABLE, and a latency table (median per size over the runs, the
# runs' range, the ratio). Every run's whole output is in BUILD_DIR/nccl/logs/, this script's
# in BUILD_DIR/nccl/test-nccl.log, the table in BUILD_DIR/nccl/latency.txt.
#
# Settings: NCCL_TEST_MODE=fork (one process a rank, the default) or all (ncclCommInitAll in
# one process); NCCL_TEST_RUNS (5); NCCL_TEST_ARGS (more arguments of allreduce, e.g.
# "-e 1048576"); NCCL_TEST_TIMEOUT (seconds a run may take, 300); NCCL_TEST_BACKEND=vulkan
# (the backend the library must pick; "any" accepts gdrdrv or DMA-BUF too); NCCL_TEST_ENV
# (more VAR=value settings for every run); NCCL_PYTHON (python3); NCCL_VENV=0 (never make a
# venv); NCCL_PIP_PACKAGES (what the venv installs).
set -u
B=$(cd "$1" && pwd)
build_only=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$B/nccl
LOGS=$OUT/logs
mode=${NCCL_TEST_MODE:-fork}
runs=${NCCL_TEST_RUNS:-5}
limit=${NCCL_TEST_TIMEOUT:-300}
want_backend=${NCCL_TEST_BACKEND:-vulkan}
py=${NCCL_PYTHON:-python3}
mkdir -p "$LOGS"

passed=0 failed=0 broken=()
ok() { printf 'test-nccl: %-60s ok\n' "$1"; passed=$((passed + 1)); }
bad() {
    printf 'test-nccl: %-60s FAILED\n' "$1"
    [ $# -gt 1 ] && printf 'test-nccl:     %s\n' "${@:2}"
    failed=$((failed + 1)) broken+=("$1")
}
# all_passed RC LINE: the program exited 0 with "N passed, 0 failed".
all_passed() { [ "$1" -eq 0 ] && [ -n "$2" ] && [ "${2#* passed, }" = "0 failed" ]; }
# check NAME CONDITION-COMMAND...: ok when the command succeeds.
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

gpus() {
    local n
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || n=0
    if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
        local v
        v=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
        [ "$v" -lt "$n" ] && n=$v
    fi
    echo "$n"
}

locate() {
    local out
    if out=$("$1" "$HERE/locate.py"); then
        eval "$out"
        return 0
    fi
    eval "$out"
    return 1
}

# A scratch venv with the wheels, where none are installed and pip can reach an index.
venv() {
    local v=$OUT/venv pkgs=${NCCL_PIP_PACKAGES:-nvidia-nccl-cu13 nvidia-cuda-runtime nvidia-cuda-crt nvidia-cuda-cccl}
    [ "${NCCL_VENV:-1}" = 0 ] && return 1
    if [ ! -x "$v/bin/python3" ]; then
        echo "test-nccl: no NCCL installed here; making a scratch venv in $v ($pkgs)"
        "$py" -m venv "$v" || return 1
    fi
    # shellcheck disable=SC2086
    timeout 900 "$v/bin/pip" install -q --disable-pip-version-check --retries 1 --timeout 20 $pkgs || return 1
    locate "$v/bin/python3"
}

build() {
    local WHY=
    if ! locate "$py" && ! venv; then
        echo "test-nccl: FAILED: ${WHY:-no NCCL}; set NCCL_HOME=<folder with include/nccl.h and lib/libnccl.so.2> and CUDA_HOME"
        return 1
    fi
    echo "test-nccl: NCCL from $NCCL_FROM"
    echo "test-nccl: CUDA runtime from $CUDART_FROM ($CUDART_LIB)"
    # NCCL's and CUDA's headers as system headers: their own warnings are not this program's.
    # Warnings are errors in the compile check (--build-only), not on a GPU machine whose
    # headers differ from the ones it was checked with.
    local werror=
    [ "$build_only" = --build-only ] && werror=-Werror
    # shellcheck disable=SC2086
    ${CC:-cc} -std=gnu11 -Wall -Wextra $werror -O2 -g -isystem "$NCCL_INCLUDE" $CUDART_CFLAGS \
        "$HERE/allreduce.c" -o "$OUT/allreduce" \
        -L"$NCCL_LIBDIR" -l:libnccl.so.2 -L"$CUDART_LIBDIR" -l:"$CUDART_LIB" \
        -Wl,-rpath,"$NCCL_LIBDIR:$CUDART_LIBDIR" || return 1
    mkdir -p "$OUT/count"
    ${CC:-cc} -O1 -g -Wall -Werror -shared -fPIC -I"$ROOT/include" -Wl,-soname,libgdrapi.so "$ROOT/harness/gdr_count.c" \
        -o "$OUT/count/libgdrapi.so" -Wl,--no-as-needed -L"$B/lib" -l:libgdrapi.so.2 -ldl || return 1
    echo "test-nccl: built $OUT/allreduce and $OUT/count/libgdrapi.so"
}

main() {
    if [ "$build_only" != --build-only ]; then
        local n
        n=$(gpus)
        if [ "$n" -lt 2 ]; then
            echo "test-nccl: skipped: $n GPU(s) visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES); two are needed"
            return 0
        fi
    fi
    # A copy of build/lib that lost its links (libgdrapi.so.2 -> .so.2.N, libgdrapi.so -> .so.2).
    local real
    real=$(cd "$B/lib" 2>/dev/null && ls libgdrapi.so.2.[0-9]* 2>/dev/null | head -1)
    if [ -n "$real" ]; then
        [ -e "$B/lib/libgdrapi.so.2" ] || ln -sfn "$real" "$B/lib/libgdrapi.so.2"
        [ -e "$B/lib/libgdrapi.so" ] || ln -sfn libgdrapi.so.2 "$B/lib/libgdrapi.so"
    fi
    if [ ! -e "$B/lib/libgdrapi.so.2" ]; then
        echo "test-nccl: FAILED: no $B/lib/libgdrapi.so.2 (make lib; with PREBUILT=1, carry build/lib here)"
        return 1
    fi
    build || return 1
    [ "$build_only" = --build-only ] && return 0

    local version procs
    version=$(basename "$(readlink -f "$B/lib/libgdrapi.so.2")" | sed 's/^libgdrapi\.so\.//')
    case $mode in
    fork) procs=2 ;;
    all) procs=1 ;;
    *) echo "test-nccl: FAILED: NCCL_TEST_MODE=$mode (fork or all)"; return 1 ;;
    esac
    nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>/dev/null |
        sed 's/^/test-nccl: GPU /'
    echo "test-nccl: libgdrapi $version from $B/lib; mode $mode ($procs process(es)); $runs runs each way"

    # Nothing inherited steers NCCL or the library: only the settings below (and NCCL_TEST_ENV).
    local v
    for v in $(compgen -e | grep -E '^(NCCL_|GDRCOPY_|GDRAPI_)' | grep -vE '^NCCL_(TEST_|PYTHON$|VENV$|PIP_PACKAGES$|HOME$)'); do
        unset "$v"
    done
    # The network transport between two GPUs of one host: no P2P, no shared memory, NCCL's
    # socket transport on the loopback interface, no external net plugin, no PXN (the proxy
    # of each connection is its own rank's), no NVLink multicast (NVLS: never on the shared
    # GPU machines). cuMem allocations (their default, POSIX fd handles: what the Vulkan
    # import maps); gdrcopy through the library (NCCL 2.31+'s own DMA-BUF code is not used),
    # its sync words and work FIFO (NCCL's defaults, set explicitly).
    local -a env_common=(env -u LD_PRELOAD
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo
        NCCL_NET_PLUGIN=none NCCL_IB_DISABLE=1 NCCL_PXN_DISABLE=1 NCCL_NVLS_ENABLE=0
        NCCL_CUMEM_ENABLE=1 NCCL_MNNVL_ENABLE=0 NCCL_GDRCOPY_USE_INTERNAL_DMABUF=0
        NCCL_GDRCOPY_SYNC_ENABLE=1 NCCL_GDRCOPY_FIFO_ENABLE=1 NCCL_DEBUG=INFO
        GDRAPI_USE_VULKAN=1 ${NCCL_TEST_ENV:-})
    local libs=$B/lib:$NCCL_LIBDIR:$CUDART_LIBDIR
    local -a prog=("$OUT/allreduce" -m "$mode" -t $((limit - 20)))
    # shellcheck disable=SC2206
    prog+=(${NCCL_TEST_ARGS:-})
    printf 'test-nccl: settings: %s\n' "${env_common[*]:3}"

    # The counted run: the shim in front of the library, the library's debug log on.
    local log=$LOGS/counted.log rc
    echo "test-nccl: counted run: NCCL_GDRCOPY_ENABLE=1, harness/gdr_count.c in front, GDRCOPY_LOG_LEVEL=1 ($log)"
    timeout -k 10 "$limit" "${env_common[@]}" NCCL_GDRCOPY_ENABLE=1 \
        LD_LIBRARY_PATH="$OUT/count:$libs" GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 \
        "${prog[@]}" >"$log" 2>&1
    rc=$?
    grep -E '^(rank [0-9]|allreduce):' "$log" | grep -vE '^allreduce: +([0-9]|bytes)' | head -20 |
        sed 's/^/test-nccl:   /'
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    check "all-reduce sums: ${line:-no summary}" all_passed "$rc" "$line"
    local rc_prog=$rc line_prog=$line
    local nccl_on
    nccl_on=$(grep -cE "NCCL INFO GDRCOPY enabled library $version (driver $version|using DMA-BUF mmap backend)$" "$log")
    check "NCCL: GDRCOPY enabled library $version driver $version ($nccl_on of $procs)" test "$nccl_on" -eq "$procs"
    grep -m1 -E 'NCCL INFO GDRCOPY enabled' "$log" | sed 's/^/test-nccl:   /'
    local backend
    backend=$(sed -n 's/^INFO: Using \(.*\) backend$/\1/p' "$log" | sort | uniq -c | sed 's/^ *//' | paste -sd, -)
    if [ "$want_backend" = any ]; then
        check "library backend: ${backend:-none}" test -n "$backend"
    else
        check "library backend: ${backend:-none} (want $procs $want_backend)" test "$backend" = "$procs $want_backend"
    fi
    check "not NCCL's internal DMA-BUF code" \
        bash -c '! grep -qE "NCCL internal DMA-BUF|falling back to NCCL internal" "$1"' _ "$log"
    local net other
    net=$(grep -c 'via NET/Socket' "$log") other=$(grep -cE 'via (P2P|SHM)' "$log")
    check "network transport: $net connections via NET/Socket, $other via P2P or SHM" \
        test "$net" -gt 0 -a "$other" -eq 0
    local counts
    counts=$("$HERE/counts.sh" "$log" "$procs")
    rc=$?
    echo "$counts" | sed 's/^/test-nccl:   /'
    local pin map unmap unpin to from
    read -r pin map unmap unpin to from < <(echo "$counts" | head -1 |
        sed -E 's/^counts: pin=([0-9]+) map=([0-9]+) unmap=([0-9]+) unpin=([0-9]+) to=([0-9]+) from=([0-9]+).*/\1 \2 \3 \4 \5 \6/')
    # Each rank: its work FIFO, and a sync word for each send and receive connection.
    check "NCCL's pins and maps went through the library ($pin pins, $map maps)" \
        test "$rc" -eq 0 -a "${pin:-0}" -ge 6 -a "${map:-0}" -eq "${pin:-0}"
    if [ "${unmap:-0}" -ne "${map:-0}" ] || [ "${unpin:-0}" -ne "${pin:-0}" ]; then
        echo "test-nccl:   note: after ncclCommDestroy, $unmap of $map maps were unmapped and $unpin of $pin pins unpinned"
    fi
    echo "test-nccl:   copies: gdr_copy_to_mapping $to, gdr_copy_from_mapping $from (on x86 NCCL writes its"
    echo "test-nccl:   mapped sync words and work FIFO with plain stores and an sfence, not with copies)"
    local errs
    errs=$(grep '^ERR: ' "$log" | grep -vE '/dev/gdrdrv does not exist|dmabuf mmap backend unavailable' | sort | uniq -c)
    [ -n "$errs" ] && echo "$errs" | head -5 | sed 's/^/test-nccl:   library error line: /'

    # Alternating timed runs: the library alone on the path, logging off. Not after a counted
    # run that did not finish its sums: each would take as long to fail.
    if ! all_passed "$rc_prog" "$line_prog"; then
        echo "test-nccl: the counted run did not pass; no timed runs (its log: $LOGS/counted.log)"
        runs=0
    fi
    local i arm
    for i in $(seq 1 "$runs"); do
        for arm in with without; do
            log=$LOGS/$arm-$i.log
            local flag=1
            [ $arm = without ] && flag=0
            timeout -k 10 "$limit" "${env_common[@]}" NCCL_GDRCOPY_ENABLE=$flag \
                LD_LIBRARY_PATH="$libs" "${prog[@]}" >"$log" 2>&1
            rc=$?
            line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
            nccl_on=$(grep -c 'NCCL INFO GDRCOPY enabled' "$log")
            local want=$procs
            [ $arm = without ] && want=0
            if all_passed "$rc" "$line" && [ "$nccl_on" -eq "$want" ]; then
                ok "run $i $arm gdrcopy: $line, GDRCOPY enabled in $nccl_on"
            else
                bad "run $i $arm gdrcopy: exit $rc, ${line:-no summary}, GDRCOPY enabled in $nccl_on of $want" \
                    "$(grep -E 'FAILED|WARN' "$log" | head -3)"
            fi
        done
    done
    [ "$runs" -gt 0 ] && "$py" - "$LOGS" "$runs" <<'EOF' | tee "$OUT/latency.txt"
import re, statistics, sys
logs, runs = sys.argv[1], int(sys.argv[2])
row = re.compile(r"^allreduce:\s+(\d+)\s+\d+\s+([0-9.]+)\s+[0-9.]+\s+\S+$")
med = {"with": {}, "without": {}}
for arm in med:
    for i in range(1, runs + 1):
        try:
            for line in open("%s/%s-%d.log" % (logs, arm, i)):
                m = row.match(line)
                if m:
                    med[arm].setdefault(int(m.group(1)), []).append(float(m.group(2)))
        except OSError:
            pass
sizes = sorted(set(med["with"]) | set(med["without"]))
print("test-nccl: all-reduce latency in us: median over %d runs of each run's median (the runs' range);" % runs)
print("test-nccl: ratio = with gdrcopy / without (below 1: faster with gdrcopy)")
print("test-nccl: %10s %24s %24s %7s" % ("bytes", "gdrcopy", "no gdrcopy", "ratio"))
def cell(v):
    if not v:
        return "-", None
    m = statistics.median(v)
    return "%.2f (%.2f-%.2f)" % (m, min(v), max(v)), m
for s in sizes:
    a, ma = cell(med["with"].get(s))
    b, mb = cell(med["without"].get(s))
    ratio = "%.2f" % (ma / mb) if ma and mb else "-"
    print("test-nccl: %10d %24s %24s %7s" % (s, a, b, ratio))
EOF

    echo "test-nccl: $passed passed, $failed failed"
    if [ $failed -ne 0 ]; then
        printf 'failing: %s\n' "${broken[@]}"
        return 1
    fi
}

main 2>&1 | tee "$OUT/test-nccl.log"
exit "${PIPESTATUS[0]}"
