#!/bin/bash
# The suite of gdrapi_ext.h (libgdrapi_ext.so.0) on the emulator, on every backend libgdrapi can
# pick: gdrdrv (the default), DMA-BUF (no /dev/gdrdrv) and the Vulkan import (a cloud GPU's
# situation: no gdrdrv node, CUDA 13.0, GDRAPI_USE_VULKAN=1, the emulator's Vulkan stand-in
# first on the library path). For each: the API with both kinds of memory, threads, fork, 1000
# flags written and read by both sides, fault injection; then the gdrdrv variants that change
# what the allocator meets (driver 2.4, non-persistent, the coherent profile), the refusal when
# no backend serves and its log line, silence without GDRCOPY_ENABLE_LOGGING, the README's C
# example, the ELF facts of both libraries, and valgrind on the api and fault programs.
# Usage: run.sh OUT_DIR LIB_DIR SIM_DIR   (EXT_SUITES="api threads fork flags faults variants
# refused readme elf valgrind" picks parts; EXT_VALGRIND=0 leaves valgrind out)
set -u
OUT=$1 LIB=$2 SIM=$3
T=$OUT/ext_test F=$OUT/flags FAULTS=$OUT/ext_faults
LOGS=$OUT/logs
mkdir -p "$LOGS"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../suite.sh"
SUITE_UNSET="GDRCOPY_USE_DMABUF_MMAP GDRSIM_FAIL GDRSIM_NO_DEVICE GDRSIM_DMABUF GDRSIM_CUDA_VERSION
    GDRSIM_VULKAN GDRAPI_USE_VULKAN GDRAPI_TEST_ALLOC GDRSIM_DRIVER_VERSION GDRSIM_PERSISTENT
    GDRSIM_PROFILE GDRAPI_READ_FENCE"
SUITE_ENV="LD_PRELOAD=$SIM/libcuda.so.1 LD_LIBRARY_PATH=$SIM/vulkan:$SIM:$LIB GDRAPI_TEST_OURS=1 GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2"
suites=${EXT_SUITES:-api threads fork flags faults variants refused readme elf valgrind}
[ "${EXT_VALGRIND:-1}" = 0 ] && suites=${suites//valgrind/}
want() { [[ " $suites " == *" $1 "* ]]; }

env_of() { # the emulator's situation for a backend
    case $1 in
    gdrdrv) echo "" ;;
    dmabuf) echo "GDRSIM_NO_DEVICE=1" ;;
    vulkan) echo "GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRAPI_USE_VULKAN=1" ;;
    esac
}
name_of() { case $1 in gdrdrv) echo gdrdrv ;; dmabuf) echo dma-buf ;; vulkan) echo vulkan ;; esac; }

for b in gdrdrv dmabuf vulkan; do
    E=$(env_of $b) N=$(name_of $b)
    if want api; then
        # shellcheck disable=SC2086
        case_ api-$b "INFO: gdrx_open: device 0, $N backend, cuMemCreate \\(POSIX fd, GPUDirect RDMA\\) memory, 2048 KiB chunks" \
            $E -- "$T" api $b
        also api-$b "INFO: Using $N backend"
        also api-$b 'ERR:  gdrx_free: 0x[0-9a-f]+ is not a live allocation of this allocator'
        also api-$b 'ERR:  gdrx_copy_to: offset [0-9]+ \+ 1 bytes is outside the [0-9]+ bytes allocated'
        also api-$b 'ERR:  gdrx_open: no CUDA device 4096'
        if [ $b = vulkan ]; then
            # shellcheck disable=SC2086
            case_ api-$b-cumemalloc 'ERR:  gdrx_open: GDRX_OPEN_CUMEMALLOC: the vulkan backend maps only cuMemCreate memory' \
                $E -- "$T" api $b cumemalloc
        else
            # shellcheck disable=SC2086
            case_ api-$b-cumemalloc "INFO: gdrx_open: device 0, $N backend, cuMemAlloc memory" \
                $E -- "$T" api $b cumemalloc
        fi
    fi
    # shellcheck disable=SC2086
    want threads && case_ threads-$b '^0 failed|passed, 0 failed' $E -- "$T" threads $b
    # shellcheck disable=SC2086
    want fork && case_ fork-$b '' $E -- "$T" fork $b
    # shellcheck disable=SC2086
    want flags && case_ flags-$b "flags: 1000 flags, 1 pin\\(s\\) of 2048 KiB, backend $N, memory cuMemCreate" \
        $E -- "$F" 1000 200
    if want faults; then
        # shellcheck disable=SC2086
        case_ faults-$b "faults: gdrx on the $b backend, [0-9]+ runs, [0-9]+ faults injected, 0 runs with a leak" \
            $E -- "$FAULTS" $b
        grep -E '^faults:' "$LOGS/faults-$b.log"
        if [ $b != vulkan ]; then
            # shellcheck disable=SC2086
            case_ faults-$b-cumemalloc "faults: gdrx on the $b backend \\(cuMemAlloc\\), [0-9]+ runs, [0-9]+ faults injected, 0 runs with a leak" \
                $E -- "$FAULTS" $b cumemalloc noinit
            grep -E '^faults:' "$LOGS/faults-$b-cumemalloc.log"
        fi
    fi
done

if want variants; then
    # What changes the allocator's driver calls or the mappings it gets.
    case_ api-driver-2.4 '' GDRSIM_DRIVER_VERSION=2.4 -- "$T" api gdrdrv
    case_ api-nonpersistent '' GDRSIM_PERSISTENT=0 -- "$T" api gdrdrv
    case_ api-coherent '' GDRSIM_PROFILE=coherent -- "$T" api gdrdrv
    case_ api-read-fence '' GDRAPI_READ_FENCE=1 -- "$T" api gdrdrv cumemalloc
fi

if want refused; then
    # No backend: gdrx_open says what to do.
    case_ refused 'ERR:  gdrx_open: gdr_open failed: no backend of libgdrapi can map GPU memory here\. Install and load the gdrdrv module' \
        GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 -- "$T" refused
    also refused 'set GDRAPI_USE_VULKAN=1 in the environment of the process'
    # Silent by default: nothing on stderr, even for refusals.
    err=$(env -u GDRCOPY_ENABLE_LOGGING LD_PRELOAD="$SIM/libcuda.so.1" LD_LIBRARY_PATH="$SIM:$LIB" \
        GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 "$T" refused 2>&1 >/dev/null)
    if [ -z "$err" ]; then echo "ok   silent without GDRCOPY_ENABLE_LOGGING"; pass=$((pass + 1))
    else echo "FAIL silent without GDRCOPY_ENABLE_LOGGING: stderr has: $err"; fail=$((fail + 1)); fi
fi

if want readme; then
    # The README's C example (section "Host-written GPU memory") builds and runs as shown.
    awk '/^## Host-written GPU memory/ {s = 1} s && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
        "$here/../../README.md" >"$OUT/readme_example.c"
    if [ -s "$OUT/readme_example.c" ] &&
        ${CC:-cc} -std=c11 -Wall -Wextra -Werror -Iinclude "$OUT/readme_example.c" -o "$OUT/readme_example" \
            -L"$LIB" -Wl,-rpath-link,"$LIB" -lgdrapi_ext >"$LOGS/readme-build.log" 2>&1; then
        echo "ok   readme: the C example builds"; pass=$((pass + 1))
        for b in gdrdrv vulkan; do
            # shellcheck disable=SC2046
            case_ readme-$b 'flag at device address 0x[0-9a-f]+: 1$' $(env_of $b) -- "$OUT/readme_example"
        done
    else echo "FAIL readme: the C example does not build"; cat "$LOGS/readme-build.log"; fail=$((fail + 1)); fi
fi

if want elf; then
    # libgdrapi.so.2 exports exactly what it exported before; the extension only its functions.
    if "$here/../c/check-elf.sh" "$LIB" include/gdrapi.h abi-tests/c/symbols.txt >"$LOGS/elf-gdrapi.log" 2>&1; then
        echo "ok   libgdrapi.so.2: $(tail -1 "$LOGS/elf-gdrapi.log") (check-elf.sh: its 19 symbols)"; pass=$((pass + 1))
    else echo "FAIL libgdrapi.so.2 ELF facts"; tail -20 "$LOGS/elf-gdrapi.log"; fail=$((fail + 1)); fi
    ext=$(readlink -f "$LIB/libgdrapi_ext.so.0")
    elf_check() { # NAME ACTUAL EXPECTED
        if [ "$2" = "$3" ]; then echo "ok   $1"; pass=$((pass + 1))
        else echo "FAIL $1: got '$2', want '$3'"; fail=$((fail + 1)); fi
    }
    elf_check "libgdrapi_ext: exported symbols" "$(nm -D --defined-only "$ext" | awk '{print $3}' | sort | tr '\n' ' ')" \
        "$(sort "$here/symbols.txt" | tr '\n' ' ')"
    elf_check "libgdrapi_ext: SONAME" "$(readelf -d "$ext" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" libgdrapi_ext.so.0
    elf_check "libgdrapi_ext: DT_NEEDED libgdrapi.so.2 and the C library only" \
        "$(readelf -d "$ext" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -vE '^ld-linux' | sort | tr '\n' ' ')" \
        "libc.so.6 libgdrapi.so.2 "
    elf_check "libgdrapi_ext: RUNPATH \$ORIGIN" "$(readelf -d "$ext" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')" '$ORIGIN'
    elf_check "libgdrapi_ext: calls only gdrapi.h's functions of libgdrapi" \
        "$(nm -D --undefined-only "$ext" | awk '{print $2}' | grep '^gdr_' | grep -vxFf abi-tests/c/symbols.txt)" ""
    elf_check "libgdrapi_ext: no symbol versions of its own" "$(readelf -V "$ext" | grep -c 'Version definition')" 0
    elf_check "libgdrapi_ext.so.0 and libgdrapi_ext.so links" \
        "$(readlink "$LIB/libgdrapi_ext.so.0") $(readlink "$LIB/libgdrapi_ext.so")" "$(basename "$ext") libgdrapi_ext.so.0"
fi

if want valgrind; then
    if command -v valgrind >/dev/null; then
        VG=(valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
            --child-silent-after-fork=yes)
        for run in "gdrdrv api" "gdrdrv faults" "vulkan api" "vulkan faults"; do
            set -- $run
            # shellcheck disable=SC2046
            if [ "$2" = api ]; then cmd=("$T" api "$1"); else cmd=("$FAULTS" "$1" noinit); fi
            env $(for v in $SUITE_UNSET; do printf -- '-u %s ' "$v"; done) -u GDRCOPY_ENABLE_LOGGING \
                LD_PRELOAD="$SIM/libcuda.so.1" LD_LIBRARY_PATH="$SIM/vulkan:$SIM:$LIB" $(env_of "$1") \
                timeout 900 "${VG[@]}" "${cmd[@]}" >"$LOGS/valgrind-$1-$2.log" 2>&1
            rc=$?
            if [ $rc -eq 0 ]; then
                echo "ok   valgrind $1 $2: $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOGS/valgrind-$1-$2.log" | tail -1)"
                pass=$((pass + 1))
            else
                echo "FAIL valgrind $1 $2: exit $rc"; grep -E '^==[0-9]+==' "$LOGS/valgrind-$1-$2.log" | head -30
                fail=$((fail + 1))
            fi
        done
    elif [ -n "${CI:-}" ]; then echo "FAIL valgrind: not installed (CI is set; .ci/run installs it)"; fail=$((fail + 1))
    else echo "skip valgrind: not installed"; fi
fi

suite_done ext
