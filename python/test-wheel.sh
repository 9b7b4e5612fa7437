#!/bin/bash
# test-wheel.sh: the wheels of `make wheel`, checked as a user gets them.
#
# For each wheel: its file list (the library under its three names, header, pkg-config file,
# the four programs, console scripts; libgdrapi_ext under its three, its header and .pc file),
# the library's ELF facts (abi-tests/c/check-elf.sh:
# symbols, soname, no libgcc_s; DT_NEEDED may also name libpthread.so.0 and libdl.so.2, the
# parts of glibc that glibc 2.34 merged into libc.so.6 and that a glibc-2.17 link still names),
# libgdrapi_ext's (NEEDED libgdrapi.so.2, found beside it through RUNPATH $ORIGIN), and
# `auditwheel show`: a manylinux tag and no external library but glibc's.
# x86_64, in a fresh venv: pip install (offline), `python -m gdrapi_rs` answers (--libdir,
# --cflags, --libs, --pkgconfigdir, --version, --self-test), a C program built with those flags
# and one with pkg-config, dlopen by both names through LD_LIBRARY_PATH=$(--libdir) on the
# emulator, a program of host-written memory built with --ext-libs and with pkg-config gdrapi_ext
# allocating on the emulator, the Python API's pytest suite against the installed package on
# the emulator as gdrdrv, DMA-BUF and the Vulkan import (a second venv that sees the system's
# pytest and numpy), `--self-test` using that API, the doctor from the installed console script on the emulator, the
# other console scripts, then pip uninstall leaving nothing of the package.
# aarch64, under qemu-user on the emulator built for aarch64: dlopen by both names, the wheel's
# doctor (which pins, maps and copies), and host-written memory through libgdrapi_ext.
#
# Environment (set by mk/85-wheel.mk): WHEEL_DIR, SIM_DIR, SIM_AARCH64_DIR (the emulator built
# for aarch64), WHEEL_VERSION, CC, AUDITWHEEL.
set -u
cd "$(dirname "$0")/.."
root=$PWD
: "${WHEEL_DIR:?}" "${SIM_DIR:?}" "${SIM_AARCH64_DIR:?}" "${WHEEL_VERSION:?}" "${CC:=cc}" "${AUDITWHEEL:=auditwheel}"
WHEEL_DIR=$(realpath "$WHEEL_DIR") SIM_DIR=$(realpath "$SIM_DIR") SIM_AARCH64_DIR=$(realpath "$SIM_AARCH64_DIR")
work=$(mktemp -d "${TMPDIR:-/tmp}/gdrapi-wheel-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "FAILED - $*"; }
expect() { # expect DESCRIPTION COMMAND...: the command must succeed.
    local what=$1; shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
same() { # same DESCRIPTION ACTUAL EXPECTED
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}
has() { # has DESCRIPTION TEXT PATTERN (grep -E)
    if grep -qE -- "$3" <<<"$2"; then ok "$1"; else bad "$1: no /$3/ in:"; echo "$2" | sed 's/^/    /'; fi
}
# What the doctor tests set: no container markers of this machine.
DOCTOR_ENV=(GDRCOPY_DOCTOR_DOCKERENV=/nonexistent GDRCOPY_DOCTOR_CONTAINERENV=/nonexistent
            GDRCOPY_DOCTOR_CGROUP=/nonexistent)

check_wheel() { # check_wheel ARCH: file list, ELF facts, auditwheel; unpacks into $work/ARCH
    local arch=$1 whl names unpack audit lib
    whl=$(ls "$WHEEL_DIR"/gdrapi_rs-"$WHEEL_VERSION"-py3-none-manylinux_2_17_"$arch"*.whl 2>/dev/null)
    if [ -z "$whl" ]; then bad "$arch: no wheel in $WHEEL_DIR"; return 1; fi
    ok "$arch: $(basename "$whl")"
    names=$(python3 -c 'import sys, zipfile; print("\n".join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))' "$whl")
    local want
    for want in lib/libgdrapi.so.2.6 lib/libgdrapi.so.2 lib/libgdrapi.so lib/pkgconfig/gdrapi.pc \
                include/gdrapi.h include/gdrconfig.h bin/gdrcopy bin/gdrcopy_copybw \
                lib/libgdrapi_ext.so.0.1 lib/libgdrapi_ext.so.0 lib/libgdrapi_ext.so \
                lib/pkgconfig/gdrapi_ext.pc include/gdrapi_ext.h \
                bin/gdrcopy_copylat bin/gdrcopy_apiperf __init__.py __main__.py _tools.py \
                _lib.py _errors.py _device.py _views.py _session.py _alloc.py py.typed; do
        has "$arch: the wheel holds gdrapi_rs/$want" "$names" "^gdrapi_rs/$want\$"
    done
    has "$arch: console scripts declared" \
        "$(unzip -p "$whl" "gdrapi_rs-$WHEEL_VERSION.dist-info/entry_points.txt")" \
        '^gdrcopy_apiperf = gdrapi_rs._tools:gdrcopy_apiperf$'
    unpack=$work/$arch
    mkdir -p "$unpack" && (cd "$unpack" && unzip -q "$whl")
    lib=$unpack/gdrapi_rs/lib
    expect "$arch: the three library names are one file's copies" \
        cmp -s "$lib/libgdrapi.so.2.6" "$lib/libgdrapi.so.2"
    expect "$arch: libgdrapi.so is the same file" cmp -s "$lib/libgdrapi.so.2.6" "$lib/libgdrapi.so"
    expect "$arch: libgdrapi_ext's three names are one file's copies" \
        bash -c 'cmp -s "$1/libgdrapi_ext.so.0.1" "$1/libgdrapi_ext.so.0" && cmp -s "$1/libgdrapi_ext.so.0.1" "$1/libgdrapi_ext.so"' _ "$lib"
    local ext_needed
    ext_needed=$(readelf -d "$lib/libgdrapi_ext.so.0.1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    has "$arch: libgdrapi_ext needs libgdrapi.so.2 and glibc only ($ext_needed)" "$ext_needed" \
        '^((ld-linux[^ ]*|libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|libm\.so\.6|librt\.so\.1|libgdrapi\.so\.2) )+$'
    has "$arch: libgdrapi_ext finds libgdrapi.so.2 beside it (RUNPATH \$ORIGIN)" \
        "$(readelf -d "$lib/libgdrapi_ext.so.0.1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')" '^\$ORIGIN$'
    has "$arch: libgdrapi_ext exports exactly its functions (abi-tests/ext/symbols.txt)" \
        "$(nm -D --defined-only "$lib/libgdrapi_ext.so.0.1" | awk '{print $3}' | sort | tr '\n' ' ')" \
        "^$(sort abi-tests/ext/symbols.txt | tr '\n' ' ')\$"
    # check-elf.sh wants the links of a system install: give it those beside the wheel's file.
    mkdir -p "$work/elf-$arch"
    cp "$lib/libgdrapi.so.2.6" "$work/elf-$arch/"
    ln -s libgdrapi.so.2.6 "$work/elf-$arch/libgdrapi.so.2"
    ln -s libgdrapi.so.2 "$work/elf-$arch/libgdrapi.so"
    expect "$arch: ELF facts of the wheel's library (check-elf.sh)" env \
        CHECK_ELF_GLIBC_SPLIT=1 abi-tests/c/check-elf.sh "$work/elf-$arch" include/gdrapi.h abi-tests/c/symbols.txt
    local f needed
    for f in "$lib/libgdrapi.so.2.6" "$unpack"/gdrapi_rs/bin/*; do
        needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
        if grep -qvE '^(libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|libm\.so\.6|librt\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$' \
            <<<"$(tr ' ' '\n' <<<"${needed% }")"; then
            bad "$arch: $(basename "$f") needs more than glibc: $needed"
        else ok "$arch: $(basename "$f") needs glibc only ($needed)"; fi
    done
    audit=$("$AUDITWHEEL" show "$whl" 2>&1)
    echo "$audit" | sed 's/^/    | /'
    has "$arch: auditwheel: manylinux_2_17 tag" "$audit" "^\"manylinux_2_17_$arch\"\.\$"
    if grep -q "external shared libraries are required" <<<"$audit" &&
        ! grep -qE "required by the wheel: \{\}" <<<"$audit"; then
        bad "$arch: auditwheel lists external libraries"
    else ok "$arch: auditwheel: no external library but glibc's"; fi
}

# ---- x86_64 ----
if check_wheel x86_64; then
    venv=$work/venv
    expect "x86_64: fresh venv" python3 -m venv "$venv"
    py=$venv/bin/python
    whl=$(ls "$WHEEL_DIR"/gdrapi_rs-*x86_64*.whl)
    expect "x86_64: pip install (offline)" \
        "$py" -m pip install -q --no-index --disable-pip-version-check "$whl"
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    same "--libdir" "$("$py" -m gdrapi_rs --libdir)" "$site/gdrapi_rs/lib"
    same "--cflags" "$("$py" -m gdrapi_rs --cflags)" "-I$site/gdrapi_rs/include"
    same "--libs" "$("$py" -m gdrapi_rs --libs)" \
        "-L$site/gdrapi_rs/lib -Wl,-rpath,$site/gdrapi_rs/lib -lgdrapi"
    same "--version (the library's gdr_runtime_get_version)" "$("$py" -m gdrapi_rs --version)" "2.6"
    out=$("$py" -m gdrapi_rs --self-test 2>&1); rc=$?
    echo "$out" | sed 's/^/    | /'
    same "--self-test exit status" "$rc" 0
    has "--self-test loaded libgdrapi.so" "$out" "^ok   .*/libgdrapi\.so: gdr_runtime_get_version\(\) = 2\.6"
    has "--self-test loaded libgdrapi.so.2" "$out" "^ok   .*/libgdrapi\.so\.2: gdr_runtime_get_version\(\) = 2\.6"
    out=$(env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR" "$py" -m gdrapi_rs --self-test 2>&1)
    has "--self-test on the emulator opens and closes a gdr_t" "$out" "^ok   gdr_open\(\) gave a handle, gdr_close\(\) = 0"
    has "--self-test on the emulator uses the Python API" "$out" "^ok   the API: host-written memory"

    # The Python API's suite against the installed package (python/tests with
    # GDRAPI_PY_TEST_INSTALLED=1: gdrapi_rs and the library it loads come from the wheel), on
    # the emulator as each backend; pytest and numpy from the system (a venv that sees them).
    if python3 -c 'import pytest' 2>/dev/null; then
        tvenv=$work/venv-tests
        expect "x86_64: a venv with the system's pytest" python3 -m venv --system-site-packages "$tvenv"
        expect "x86_64: pip install into it (offline)" \
            "$tvenv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$whl"
        for b in gdrdrv dmabuf vulkan; do
            case $b in gdrdrv) e=() ;; dmabuf) e=(GDRSIM_NO_DEVICE=1) ;;
            vulkan) e=(GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRAPI_USE_VULKAN=1) ;; esac
            out=$(env "${e[@]}" GDRAPI_PY_TEST_INSTALLED=1 GDRAPI_PY_TEST_BACKEND=$b \
                LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR/vulkan:$SIM_DIR" \
                "$tvenv/bin/python" -m pytest -p no:cacheprovider -q python/tests 2>&1); rc=$?
            echo "$out" | tail -3 | sed 's/^/    | /'
            same "the Python suite from the installed wheel, $b backend: pytest's exit status" "$rc" 0
        done
    else
        bad "the Python suite from the installed wheel: pytest is not installed (.ci/requirements.txt)"
    fi

    # A C program built with the package's flags runs without LD_LIBRARY_PATH (run path).
    cat >"$work/use.c" <<'C'
#include <gdrapi.h>
#include <stdio.h>
int main(void) { int a, b; gdr_runtime_get_version(&a, &b); printf("%d.%d\n", a, b); return 0; }
C
    # shellcheck disable=SC2046
    expect "a C program builds with --cflags --libs" \
        $CC -o "$work/use" "$work/use.c" $("$py" -m gdrapi_rs --cflags --libs)
    same "and runs from the wheel's library" "$("$work/use")" "2.6"
    same "it needs libgdrapi.so.2" "$(readelf -d "$work/use" | sed -n 's/.*(NEEDED).*\[\(libgdrapi[^]]*\)\]/\1/p')" \
        "libgdrapi.so.2"
    # Host-written memory: built with --ext-libs (run path) and with pkg-config, on the emulator.
    same "--ext-libs" "$("$py" -m gdrapi_rs --ext-libs)" \
        "-L$site/gdrapi_rs/lib -Wl,-rpath,$site/gdrapi_rs/lib -lgdrapi_ext"
    has "--self-test loaded libgdrapi_ext.so.0" "$("$py" -m gdrapi_rs --self-test 2>&1)" \
        "^ok   .*/libgdrapi_ext\.so\.0: gdrx_runtime_get_version\(\) = 0\.1"
    # shellcheck disable=SC2046
    expect "ext_smoke.c builds with --cflags --ext-libs" \
        $CC -o "$work/ext-smoke" abi-tests/pkg/ext_smoke.c $("$py" -m gdrapi_rs --cflags --ext-libs) -ldl
    expect "and allocates, copies and frees on the emulator from the wheel's libgdrapi_ext (run path)" \
        env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR" \
        "$work/ext-smoke" "$site/gdrapi_rs/lib/libgdrapi_ext.so.0" open
    # shellcheck disable=SC2046
    expect "ext_smoke.c builds with pkg-config gdrapi_ext (relative to the wheel)" \
        $CC -o "$work/ext-smoke-pc" abi-tests/pkg/ext_smoke.c \
        $(PKG_CONFIG_PATH=$("$py" -m gdrapi_rs --pkgconfigdir) pkg-config --cflags --libs gdrapi_ext) -ldl
    expect "and runs with LD_LIBRARY_PATH=\$(--libdir) on the emulator" \
        env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$site/gdrapi_rs/lib:$SIM_DIR" \
        "$work/ext-smoke-pc" "$site/gdrapi_rs/lib/libgdrapi_ext.so.0" open

    pc=$(PKG_CONFIG_PATH=$("$py" -m gdrapi_rs --pkgconfigdir) pkg-config --cflags --libs gdrapi)
    # pkg-config keeps ${pcfiledir}/../.. as written: compare the directories it names.
    pc_dirs=$(for f in $pc; do case $f in -I* | -L*) printf '%s%s ' "${f:0:2}" "$(realpath -m "${f:2}")";;
        *) printf '%s ' "$f";; esac; done)
    same "pkg-config gdrapi (relative to the wheel)" "$pc_dirs" "-I$site/gdrapi_rs/include -L$site/gdrapi_rs/lib -lgdrapi "
    # shellcheck disable=SC2086
    expect "a C program builds with pkg-config's flags" $CC -o "$work/use-pc" "$work/use.c" $pc
    same "and runs with LD_LIBRARY_PATH=\$(--libdir)" \
        "$(LD_LIBRARY_PATH=$("$py" -m gdrapi_rs --libdir) "$work/use-pc")" "2.6"

    # dlopen("libgdrapi.so") and dlopen("libgdrapi.so.2") as consumers do, on the emulator.
    expect "dlopen_main builds" $CC -std=c11 -Wall -Iinclude -Iharness \
        abi-tests/c/dlopen_main.c -o "$work/dlopen_main" -ldl
    expect "dlopen by both names finds the wheel's library and opens a gdr_t (dlopen_main)" \
        env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$site/gdrapi_rs/lib:$SIM_DIR" \
        "$work/dlopen_main" "$site/gdrapi_rs/lib"

    # The doctor from the installed console script, on the emulator.
    # The emulator's directory on the path for its NVML (libnvidia-ml.so.1); the console script
    # puts the wheel's library in front of it.
    json=$(env "${DOCTOR_ENV[@]}" LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR" \
        "$venv/bin/gdrcopy" doctor --json 2>&1); rc=$?
    same "console script gdrcopy doctor --json on the emulator: exit status" "$rc" 0
    DOCTOR_JSON=$json SITE=$site "$py" - <<'PY'
import json, os, sys
d = json.loads(os.environ["DOCTOR_JSON"])
checks = {c["id"]: c for c in d["checks"]}
want_dir = os.path.join(os.environ["SITE"], "gdrapi_rs", "lib")
failed = [c["id"] + "=" + c["status"] for c in d["checks"] if c["status"] == "fail"]
print("    | " + ", ".join("%s=%s" % (c["id"], c["status"]) for c in d["checks"]))
lib = json.dumps(checks.get("library", {}))
ok = not failed and want_dir in lib and checks.get("bar1", {}).get("status") == "pass"
print("ok - the doctor passes, names the wheel's library and reads BAR1 from NVML" if ok else
      "FAILED - the doctor: failed checks %s; library check %s" % (failed, lib))
sys.exit(0 if ok else 1)
PY
    if [ $? -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    for t in gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf; do
        expect "console script $t -h" "$venv/bin/$t" -h >/dev/null
    done
    out=$(env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR" \
        "$venv/bin/gdrcopy_copylat" -s 4096 -w 2 -r 2 2>&1); rc=$?
    same "console script gdrcopy_copylat on the emulator: exit status" "$rc" 0

    expect "pip uninstall" "$py" -m pip uninstall -q -y gdrapi-rs
    left=$(ls -d "$site"/gdrapi_rs* "$venv"/bin/gdrcopy* 2>/dev/null)
    same "nothing of the package is left" "$left" ""
fi

# ---- aarch64 (qemu-user, on the emulator built for aarch64) ----
if check_wheel aarch64; then
    a=$work/aarch64/gdrapi_rs
    QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_PRELOAD="$SIM_AARCH64_DIR/libcuda.so.1"
          -E LD_LIBRARY_PATH="$a/lib:$SIM_AARCH64_DIR")
    for e in "${DOCTOR_ENV[@]}"; do QEMU+=(-E "$e"); done
    expect "aarch64: dlopen_main builds with aarch64-linux-gnu-gcc" aarch64-linux-gnu-gcc -std=c11 -Wall \
        -Iinclude -Iharness abi-tests/c/dlopen_main.c -o "$work/dlopen_main-aarch64" -ldl
    expect "aarch64: dlopen by both names finds the wheel's library and opens a gdr_t (dlopen_main)" \
        "${QEMU[@]}" "$work/dlopen_main-aarch64" "$a/lib"
    out=$("${QEMU[@]}" "$a/bin/gdrcopy" doctor 2>&1); rc=$?
    echo "$out" | sed 's/^/    | /'
    same "aarch64: the wheel's doctor on the emulator: exit status" "$rc" 0
    has "aarch64: the doctor loaded the wheel's library" "$out" "^\[PASS\] library +libgdrapi 2\.6 loaded from $a/lib/libgdrapi\.so\.2\$"
    has "aarch64: the doctor's pin, map and copy round trip passed" "$out" "^\[PASS\] roundtrip "
    expect "aarch64: ext_smoke.c builds with aarch64-linux-gnu-gcc against the wheel's libgdrapi_ext" \
        aarch64-linux-gnu-gcc -Wall -Iinclude abi-tests/pkg/ext_smoke.c -o "$work/ext-smoke-aarch64" \
        -L"$a/lib" -Wl,-rpath-link,"$a/lib" -lgdrapi_ext -ldl
    out=$("${QEMU[@]}" "$work/ext-smoke-aarch64" "$a/lib/libgdrapi_ext.so.0" open 2>&1); rc=$?
    same "aarch64: host-written memory allocates, copies and frees on the emulator: exit status" "$rc" 0
    [ $rc -eq 0 ] || echo "$out" | sed 's/^/    | /'
fi

echo "test-wheel"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
