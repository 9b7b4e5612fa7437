#!/usr/bin/env bash
# The install and package test (make test-pkg).
#
# 1. make deb (dpkg-buildpackage, then lintian: no error or warning left unexplained);
#    check what each package holds and declares.
# 2. dpkg -i the packages; build a C program with `pkg-config --cflags --libs gdrapi` and one
#    that only dlopens; run both without a driver and on the emulator, checking that the
#    linked library, dlopen("libgdrapi.so") and dlopen("libgdrapi.so.2") all land on the
#    installed file; the same for host-written memory (libgdrapi-ext0, `pkg-config gdrapi_ext`,
#    ext_smoke.c allocating on the emulator); check what dpkg-shlibdeps derives from the
#    symbols file.
# 3. make install into temporary prefixes (prefix=, DESTDIR=, libdir=): include/ and exactly
#    one of lib/ or lib64/, a gdrapi.pc and a gdrapi_ext.pc that work; make uninstall leaves
#    the prefix empty.
#    With the default prefix (/usr/local, under a private tmpfs), uninstall keeps the
#    system's directories.
# 4. dpkg --purge; every file the packages had installed is gone, ldconfig forgets the library.
# 5. Moving between NVIDIA's packages and these: with stand-ins for NVIDIA's libgdrapi and
#    gdrcopy-tests 2.6-1 (same files, same names) and a program's package that depends on
#    libgdrapi (>= 2.6-1), dpkg -i of ours replaces NVIDIA's and keeps that program's
#    dependency satisfied; apt-get install of NVIDIA's brings it back the same way.
# The machine ends as it started: whatever happens, the packages are purged on exit.
#
# Needs root (dpkg -i) and dpkg; without either it says so and skips (with CI set it fails).
# Refuses to run (fails) when libgdrapi is already installed on the machine, because it would
# then change it.
#
# Environment (set by mk/80-deb.mk): BUILD_DIR, LIB_DIR, SIM_DIR, CC, MAKE.
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${BUILD_DIR:?}" "${LIB_DIR:?}" "${SIM_DIR:?}"
CC=${CC:-cc}
MAKE=${MAKE:-make}
export BUILD_DIR LIB_DIR SIM_DIR MAKE
DEB_DIR=$BUILD_DIR/deb
# Every package whose files ours would replace (NVIDIA's included).
CONFLICTING=(libgdrapi2 libgdrapi-ext0 libgdrapi-dev gdrcopy-tools libgdrapi gdrcopy-tests gdrapi-rs-test-consumer)
TOOLS=(gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf gdrcopy)

passed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { echo "test-pkg: FAIL: $*" >&2; exit 1; }
expect() { # expect DESCRIPTION COMMAND...: the command must succeed.
    local what=$1; shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
# Under CI (CI set) nothing may be missing: a skip is a failure there.
skip() {
    if [ -n "${CI:-}" ]; then echo "test-pkg: FAILED: $* (CI is set)" >&2; exit 1; fi
    echo "test-pkg: SKIP: $*"; exit 0
}

[ "$(id -u)" = 0 ] || skip "needs root to install and purge packages with dpkg (CI runs as root)"
command -v dpkg >/dev/null && command -v dpkg-query >/dev/null ||
    skip "dpkg is missing (not a Debian-based system)"

# Two runs at once (several checkouts on one machine) would see each other's packages: wait.
exec 9<"$0"
flock 9

installed() { # installed PKG: true when dpkg knows PKG in any state but not-installed
    local s
    s=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "$s" != not-installed ]
}
for p in "${CONFLICTING[@]}"; do
    if installed "$p"; then
        fail "package $p is already on this machine; this test installs and purges libgdrapi" \
            "packages and would change it. Remove $p first (dpkg --purge $p)."
    fi
done
if /sbin/ldconfig -p | grep -q 'libgdrapi\.so'; then
    fail "a libgdrapi is already known to ld.so (ldconfig -p: $(/sbin/ldconfig -p | grep libgdrapi |
        tr -s ' \n' ' ')); the test could not tell it from the packaged one. Remove it first."
fi

stray=()
for f in /usr/lib/*/libgdrapi.so* /usr/lib/*/libgdrapi_ext.so* /usr/include/gdrapi.h \
    /usr/include/gdrconfig.h /usr/include/gdrapi_ext.h \
    /usr/bin/{gdrcopy_copybw,gdrcopy_copylat,gdrcopy_apiperf,gdrcopy,copybw,copylat,apiperf}; do
    if [ -e "$f" ] || [ -L "$f" ]; then stray+=("$f"); fi
done
if [ ${#stray[@]} -gt 0 ]; then
    fail "files the packages would own already exist, outside any package: ${stray[*]};" \
        "the test would overwrite and then delete them. Remove them first."
fi

shadow=()
for f in /usr/local/lib/pkgconfig/gdrapi.pc /usr/local/lib/*/pkgconfig/gdrapi.pc \
    /usr/local/include/gdrapi.h /usr/local/lib/libgdrapi.so* /usr/local/lib/libgdrapi_ext.so* \
    /usr/local/include/gdrapi_ext.h; do
    if [ -e "$f" ] || [ -L "$f" ]; then shadow+=("$f"); fi
done
if [ ${#shadow[@]} -gt 0 ]; then
    fail "an installation in /usr/local would shadow the packages (${shadow[*]});" \
        "remove it first (make uninstall)."
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test-pkg.XXXXXX")
we_installed=()
cleanup() {
    local p left=()
    for p in "${we_installed[@]}"; do
        if installed "$p"; then left+=("$p"); fi
    done
    if [ ${#left[@]} -gt 0 ]; then
        echo "test-pkg: cleanup: dpkg --purge ${left[*]}"
        dpkg --purge "${left[@]}" >/dev/null || echo "test-pkg: cleanup: could not purge ${left[*]}" >&2
    fi
    # An interrupted apt-get leaves the ldconfig trigger pending: run it.
    dpkg --triggers-only -a >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# ---------------------------------------------------------------------------------------
# 1. Build the packages and look inside.
echo "test-pkg: make deb"
"$MAKE" --no-print-directory deb BUILD_DIR="$BUILD_DIR" >"$TMP/deb.log" 2>&1 || {
    tail -n 60 "$TMP/deb.log" >&2
    fail "make deb (log above)"
}
ok "make deb: dpkg-buildpackage -us -uc -b and lintian (--fail-on error,warning) pass"
grep -E '^[EWI]: ' "$TMP/deb.log" | sed 's/^/test-pkg: lintian: /' || true

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(dpkg-deb -f "$DEB_DIR"/libgdrapi2_*_"$arch".deb Version)
deb() { echo "$DEB_DIR/${1}_${version}_$arch.deb"; }
stage_bin=$DEB_DIR/src/gdrapi-rs/debian/build-area/bin
debs=("$(deb libgdrapi2)" "$(deb libgdrapi-ext0)" "$(deb libgdrapi-dev)")
with_tools=0
if compgen -G "$stage_bin/gdrcopy*" >/dev/null; then
    with_tools=1
    debs+=("$(deb gdrcopy-tools)")
fi
for f in "${debs[@]}" "$(deb libgdrapi2-dbgsym)" "$(deb libgdrapi-ext0-dbgsym)"; do
    expect "package built: ${f##*/}" test -f "$f"
done
if [ $with_tools = 0 ]; then
    expect "no gdrcopy-tools package while the tools do not build" \
        test ! -e "$(deb gdrcopy-tools)"
fi

contents() { # contents DEB: "path type target" lines, directories left out
    dpkg-deb --fsys-tarfile "$1" | tar -tvf - |
        awk '$1 !~ /^d/ { p = $6; sub(/^\.\//, "/", p);
                          print p, substr($1, 1, 1) ($7 == "->" ? " " $8 : "") }' | sort
}
libdir=/usr/lib/$multiarch
contents "$(deb libgdrapi2)" >"$TMP/lib.list"
cat >"$TMP/lib.want" <<EOF
$libdir/libgdrapi.so l libgdrapi.so.2
$libdir/libgdrapi.so.2 l libgdrapi.so.2.6
$libdir/libgdrapi.so.2.6 -
/usr/share/doc/libgdrapi2/README.Debian -
/usr/share/doc/libgdrapi2/changelog.gz -
/usr/share/doc/libgdrapi2/copyright -
/usr/share/lintian/overrides/libgdrapi2 -
EOF
expect "libgdrapi2 holds libgdrapi.so.2.6, the .so.2 and .so links, and its docs" \
    diff -u "$TMP/lib.want" "$TMP/lib.list"
contents "$(deb libgdrapi-ext0)" >"$TMP/ext.list"
printf '%s\n' "$libdir/libgdrapi_ext.so.0 l libgdrapi_ext.so.0.1" "$libdir/libgdrapi_ext.so.0.1 -" \
    "/usr/share/doc/libgdrapi-ext0/changelog.gz -" "/usr/share/doc/libgdrapi-ext0/copyright -" \
    | sort >"$TMP/ext.want"
expect "libgdrapi-ext0 holds libgdrapi_ext.so.0.1, the .so.0 link, and its docs" \
    diff -u "$TMP/ext.want" "$TMP/ext.list"
contents "$(deb libgdrapi-dev)" | grep -v '^/usr/share/doc/' >"$TMP/dev.list"
printf '%s\n' "$libdir/pkgconfig/gdrapi.pc -" "/usr/include/gdrapi.h -" \
    "/usr/include/gdrconfig.h -" "/usr/include/gdrapi_ext.h -" "$libdir/pkgconfig/gdrapi_ext.pc -" \
    "$libdir/libgdrapi_ext.so l libgdrapi_ext.so.0" | sort >"$TMP/dev.want"
expect "libgdrapi-dev holds gdrapi.h, gdrconfig.h, gdrapi.pc, gdrapi_ext.h, gdrapi_ext.pc, the libgdrapi_ext.so link" \
    diff -u "$TMP/dev.want" "$TMP/dev.list"
if [ $with_tools = 1 ]; then
    contents "$(deb gdrcopy-tools)" | grep -v '^/usr/share/doc/' >"$TMP/tools.list"
    {
        for t in "${TOOLS[@]}"; do echo "/usr/bin/$t -"; done
        for t in "${TOOLS[@]}"; do echo "/usr/share/man/man1/$t.1.gz -"; done
        for t in copybw copylat apiperf; do
            echo "/usr/bin/$t l gdrcopy_$t"
            echo "/usr/share/man/man1/$t.1.gz l gdrcopy_$t.1.gz"
        done
    } | sort >"$TMP/tools.want"
    expect "gdrcopy-tools holds the 4 programs, their man pages, the 3 compat links and theirs" \
        diff -u "$TMP/tools.want" "$TMP/tools.list"
fi

field() { dpkg-deb -f "$(deb "$1")" "$2"; }
expect "libgdrapi2 is Multi-Arch: same" test "$(field libgdrapi2 Multi-Arch)" = same
expect "libgdrapi2 Provides libgdrapi (= $version)" \
    test "$(field libgdrapi2 Provides)" = "libgdrapi (= $version)"
expect "libgdrapi2 Conflicts with and Replaces NVIDIA's libgdrapi" \
    bash -c '[[ ", $1, " == *", libgdrapi, "* && ", $2, " == *", libgdrapi, "* ]]' _ \
    "$(field libgdrapi2 Conflicts)" "$(field libgdrapi2 Replaces)"
expect "libgdrapi2 Depends on libc6 (from shlibs)" \
    bash -c '[[ "$1" == *"libc6 (>= "* ]]' _ "$(field libgdrapi2 Depends)"
expect "libgdrapi-dev Depends on libgdrapi2 (= $version)" \
    bash -c '[[ "$1" == *"libgdrapi2 (= $2)"* ]]' _ "$(field libgdrapi-dev Depends)" "$version"
expect "libgdrapi-dev Depends on libgdrapi-ext0 (= $version)" \
    bash -c '[[ "$1" == *"libgdrapi-ext0 (= $2)"* ]]' _ "$(field libgdrapi-dev Depends)" "$version"
expect "libgdrapi-ext0 is Multi-Arch: same" test "$(field libgdrapi-ext0 Multi-Arch)" = same
expect "libgdrapi-ext0 Depends on libgdrapi2 (= $version) (it needs this library, which is thread-safe)" \
    bash -c '[[ "$1" == *"libgdrapi2 (= $2)"* ]]' _ "$(field libgdrapi-ext0 Depends)" "$version"
if [ $with_tools = 1 ]; then
    expect "gdrcopy-tools Conflicts with and Replaces NVIDIA's gdrcopy-tests" \
        bash -c '[[ "$1" == *gdrcopy-tests* && "$2" == *gdrcopy-tests* ]]' _ \
        "$(field gdrcopy-tools Conflicts)" "$(field gdrcopy-tools Replaces)"
fi

mkdir -p "$TMP/ctrl" "$TMP/root"
dpkg-deb -e "$(deb libgdrapi2)" "$TMP/ctrl"
dpkg-deb -x "$(deb libgdrapi2)" "$TMP/root"
expect "libgdrapi2 activates the ldconfig trigger" grep -qx 'activate-noawait ldconfig' "$TMP/ctrl/triggers"
sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' "$TMP/ctrl/symbols" | sort >"$TMP/symbols.file"
nm -D --defined-only "$TMP/root$libdir/libgdrapi.so.2.6" | awk '{print $3}' | sort >"$TMP/symbols.lib"
expect "symbols file lists 19 functions" test "$(wc -l <"$TMP/symbols.file")" = 19
expect "symbols file lists exactly what the shipped library exports" \
    diff -u "$TMP/symbols.file" "$TMP/symbols.lib"
expect "shipped library is stripped, with SONAME libgdrapi.so.2" \
    bash -c '! readelf -S "$1" | grep -q "\.debug_info" && readelf -d "$1" | grep -q "SONAME.*\[libgdrapi\.so\.2\]"' \
    _ "$TMP/root$libdir/libgdrapi.so.2.6"
mkdir -p "$TMP/ctrl-ext" "$TMP/root-ext"
dpkg-deb -e "$(deb libgdrapi-ext0)" "$TMP/ctrl-ext"
dpkg-deb -x "$(deb libgdrapi-ext0)" "$TMP/root-ext"
expect "libgdrapi-ext0 activates the ldconfig trigger" grep -qx 'activate-noawait ldconfig' "$TMP/ctrl-ext/triggers"
sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' "$TMP/ctrl-ext/symbols" | sort >"$TMP/ext-symbols.file"
nm -D --defined-only "$TMP/root-ext$libdir/libgdrapi_ext.so.0.1" | awk '{print $3}' | sort >"$TMP/ext-symbols.lib"
sort abi-tests/ext/symbols.txt >"$TMP/ext-symbols.want"
expect "libgdrapi-ext0's symbols file lists exactly what it exports (abi-tests/ext/symbols.txt)" \
    bash -c 'diff -u "$1" "$2" && diff -u "$1" "$3"' _ "$TMP/ext-symbols.file" "$TMP/ext-symbols.lib" \
    "$TMP/ext-symbols.want"
expect "shipped libgdrapi_ext is stripped, with SONAME libgdrapi_ext.so.0 and NEEDED libgdrapi.so.2" \
    bash -c '! readelf -S "$1" | grep -q "\.debug_info" && readelf -d "$1" | grep -q "SONAME.*\[libgdrapi_ext\.so\.0\]" &&
             readelf -d "$1" | grep -q "NEEDED.*\[libgdrapi\.so\.2\]"' _ "$TMP/root-ext$libdir/libgdrapi_ext.so.0.1"

# ---------------------------------------------------------------------------------------
# 2. Install them and use them.
pkgs=()
for f in "${debs[@]}"; do pkgs+=("$(dpkg-deb -f "$f" Package)"); done
we_installed=("${pkgs[@]}")
dpkg -i "${debs[@]}" >"$TMP/dpkg-i.log" 2>&1 || { cat "$TMP/dpkg-i.log" >&2; fail "dpkg -i"; }
for p in "${pkgs[@]}"; do expect "dpkg -i: $p is installed" installed "$p"; done
# (with merged /usr, ldconfig may name /lib/<triplet> for /usr/lib/<triplet>)
expect "ldconfig (trigger) knows libgdrapi.so.2 in $libdir" \
    bash -c '/sbin/ldconfig -p | grep -Eq "libgdrapi\.so\.2 .*=> (/usr)?/lib/$1/libgdrapi\.so\.2$"' _ "$multiarch"
expect "pkg-config --modversion gdrapi is 2.6" test "$(pkg-config --modversion gdrapi)" = 2.6
expect "pkg-config --libs gdrapi is -lgdrapi" test "$(pkg-config --libs gdrapi | xargs)" = -lgdrapi
expect "pkg-config libdir is $libdir" test "$(pkg-config --variable=libdir gdrapi)" = "$libdir"
expect "pkg-config --modversion gdrapi_ext is 0.1" test "$(pkg-config --modversion gdrapi_ext)" = 0.1
expect "pkg-config --libs gdrapi_ext is -lgdrapi_ext" test "$(pkg-config --libs gdrapi_ext | xargs)" = -lgdrapi_ext

src=abi-tests/pkg/pkg_smoke.c
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
expect "cc ... \$(pkg-config --cflags --libs gdrapi) builds a program against the package" \
    "$CC" -Wall -Wextra -Werror -Iharness -o "$TMP/smoke" "$src" $(pkg-config --cflags --libs gdrapi) -ldl
# shellcheck disable=SC2046
expect "a program that only dlopens builds with \$(pkg-config --cflags gdrapi)" \
    "$CC" -Wall -Wextra -Werror -Iharness -DDLOPEN_ONLY -o "$TMP/smoke-dl" "$src" $(pkg-config --cflags gdrapi) -ldl
expect "the program records DT_NEEDED libgdrapi.so.2" \
    bash -c 'readelf -d "$1" | grep -q "NEEDED.*\[libgdrapi\.so\.2\]"' _ "$TMP/smoke"

expect "the package's autopkgtest (debian/tests/smoke) passes" \
    bash -c 'AUTOPKGTEST_TMP="$1" CC="$2" debian/tests/smoke >"$1/autopkgtest.log" 2>&1 ||
             { cat "$1/autopkgtest.log" >&2; exit 1; }' _ "$(mkdir -p "$TMP/apt" && echo "$TMP/apt")" "$CC"

real=$libdir/libgdrapi.so.2.6
# Without the emulator, gdr_open must fail on a machine with no driver (CI); elsewhere the
# test does not know what the machine has.
bare=any
if [ ! -e /dev/gdrdrv ] && ! /sbin/ldconfig -p | grep -q 'libcuda\.so'; then bare=null; fi
run_smoke() { # run_smoke PROGRAM MODE [VAR=VALUE...]
    local prog=$1 mode=$2; shift 2
    env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@" "$prog" "$real" "$mode" >"$TMP/smoke.out" 2>&1 || {
        sed 's/^/    /' "$TMP/smoke.out" >&2
        return 1
    }
}
expect "linked program, no emulator: library, dlopen(libgdrapi.so), dlopen(libgdrapi.so.2) are $real; gdr_open ($bare)" \
    run_smoke "$TMP/smoke" "$bare"
expect "dlopen-only program, no emulator: both names resolve to $real; gdr_open ($bare)" \
    run_smoke "$TMP/smoke-dl" "$bare"
expect "linked program on the emulator: gdr_open, gdr_driver_get_version and gdr_close succeed" \
    run_smoke "$TMP/smoke" open LD_PRELOAD="$SIM_DIR/libcuda.so.1"
expect "dlopen-only program on the emulator: same through both names" \
    run_smoke "$TMP/smoke-dl" open LD_PRELOAD="$SIM_DIR/libcuda.so.1"

ext_src=abi-tests/pkg/ext_smoke.c
ext_real=$libdir/libgdrapi_ext.so.0.1
# shellcheck disable=SC2046
expect "cc ... \$(pkg-config --cflags --libs gdrapi_ext) builds a program of host-written memory" \
    "$CC" -Wall -Wextra -Werror -o "$TMP/ext-smoke" "$ext_src" $(pkg-config --cflags --libs gdrapi_ext) -ldl
expect "it records DT_NEEDED libgdrapi_ext.so.0 (and not libgdrapi.so.2: the library brings that)" \
    bash -c 'readelf -d "$1" | grep -q "NEEDED.*\[libgdrapi_ext\.so\.0\]" && ! readelf -d "$1" | grep -q "NEEDED.*\[libgdrapi\.so\.2\]"' _ "$TMP/ext-smoke"
ext_smoke() { # ext_smoke PROGRAM EXPECTED MODE [VAR=VALUE...]
    local prog=$1 want=$2 mode=$3; shift 3
    env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@" "$prog" "$want" "$mode" >"$TMP/ext-smoke.out" 2>&1 || {
        sed 's/^/    /' "$TMP/ext-smoke.out" >&2
        return 1
    }
}
expect "host-written memory, no emulator: the installed $ext_real loads with libgdrapi.so.2 (gdrx_open: any)" \
    ext_smoke "$TMP/ext-smoke" "$ext_real" any
expect "host-written memory on the emulator: allocated, copied both ways, freed" \
    ext_smoke "$TMP/ext-smoke" "$ext_real" open LD_PRELOAD="$SIM_DIR/libcuda.so.1"

if [ $with_tools = 1 ]; then
    expect "installed gdrcopy --version says 2.6.0" \
        bash -c '[[ "$(/usr/bin/gdrcopy --version)" == "gdrcopy 2.6.0" ]]'
    for t in copybw copylat apiperf; do
        expect "compat name $t runs (-h)" \
            bash -c '"$1" -h | grep -q "^Usage: "' _ "/usr/bin/$t"
    done
fi

# What programs built against the package will depend on (dpkg-shlibdeps and the symbols file).
mkdir -p "$TMP/shlibdeps/debian"
printf 'Source: t\n\nPackage: t\nArchitecture: any\n' >"$TMP/shlibdeps/debian/control"
cat >"$TMP/alias.c" <<'EOF'
#include <gdrapi.h>
int main(void) { return gdr_copy_to_mapped((gdr_mh_t){0}, 0, 0, 0); }
EOF
expect "a program calling the gdr_copy_to_mapped alias builds" \
    "$CC" -o "$TMP/shlibdeps/alias" "$TMP/alias.c" -lgdrapi
cp "$TMP/smoke" "$TMP/shlibdeps/smoke"
shlibdeps() { (cd "$TMP/shlibdeps" && dpkg-shlibdeps -O "$1" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'); }
dep_smoke=$(shlibdeps smoke)
dep_alias=$(shlibdeps alias)
echo "    smoke: $dep_smoke"
echo "    alias: $dep_alias"
expect "programs using the 2.6 API depend on 'libgdrapi2 (>= 2.0) | libgdrapi (>= 2.0)' (either library)" \
    bash -c '[[ ", $1, " == *", libgdrapi2 (>= 2.0) | libgdrapi (>= 2.0), "* ]]' _ "$dep_smoke"
expect "programs using the gdr_copy_*_mapped aliases also need libgdrapi2 (>= 2.6.0) (NVIDIA's lacks them)" \
    bash -c '[[ ", $1, " == *", libgdrapi2 (>= 2.6.0), "* ]]' _ "$dep_alias"

# ---------------------------------------------------------------------------------------
# 3. make install / uninstall into temporary prefixes.
make_q() { "$MAKE" --no-print-directory BUILD_DIR="$BUILD_DIR" "$@" >"$TMP/make.log" 2>&1 || {
    cat "$TMP/make.log" >&2
    return 1
}; }
P=$TMP/prefix
mkdir -p "$P"
expect "make install prefix=<tmp>" make_q install prefix="$P"
libs=0
for d in lib lib64; do [ -d "$P/$d" ] && libs=$((libs + 1)); done
expect "the prefix holds include/gdrapi.h, include/gdrconfig.h, include/gdrapi_ext.h" \
    test -f "$P/include/gdrapi.h" -a -f "$P/include/gdrconfig.h" -a -f "$P/include/gdrapi_ext.h"
expect "the prefix holds exactly one of lib/ or lib64/ (UCX takes lib64 whenever it exists)" test $libs = 1
expect "lib/ holds libgdrapi.so.2.6 and the links .so.2 -> .so.2.6, .so -> .so.2" \
    bash -c 'test -f "$1/libgdrapi.so.2.6" && test "$(readlink "$1/libgdrapi.so.2")" = libgdrapi.so.2.6 &&
             test "$(readlink "$1/libgdrapi.so")" = libgdrapi.so.2' _ "$P/lib"
expect "gdrapi.pc says prefix=<tmp>, libdir=\${exec_prefix}/lib, Version: 2.6" \
    bash -c 'grep -qx "prefix=$2" "$1" && grep -qx "libdir=\${exec_prefix}/lib" "$1" &&
             grep -qx "Version: 2.6" "$1"' _ "$P/lib/pkgconfig/gdrapi.pc" "$P"
expect "lib/ holds libgdrapi_ext.so.0.1 and the links .so.0 -> .so.0.1, .so -> .so.0" \
    bash -c 'test -f "$1/libgdrapi_ext.so.0.1" && test "$(readlink "$1/libgdrapi_ext.so.0")" = libgdrapi_ext.so.0.1 &&
             test "$(readlink "$1/libgdrapi_ext.so")" = libgdrapi_ext.so.0' _ "$P/lib"
expect "gdrapi_ext.pc says prefix=<tmp>, Version: 0.1, Requires.private: gdrapi" \
    bash -c 'grep -qx "prefix=$2" "$1" && grep -qx "Version: 0.1" "$1" && grep -qx "Requires.private: gdrapi" "$1"' \
    _ "$P/lib/pkgconfig/gdrapi_ext.pc" "$P"
if compgen -G "$BUILD_DIR/bin/gdrcopy*" >/dev/null; then
    for t in "${TOOLS[@]}"; do expect "bin/$t installed" test -x "$P/bin/$t"; done
    for t in copybw copylat apiperf; do
        expect "bin/$t -> gdrcopy_$t" test "$(readlink "$P/bin/$t")" = "gdrcopy_$t"
    done
else
    expect "no bin/ while the tools do not build" test ! -e "$P/bin"
fi
real=$P/lib/libgdrapi.so.2.6
# shellcheck disable=SC2046
expect "a program builds against the prefix with PKG_CONFIG_PATH=<tmp>/lib/pkgconfig" \
    "$CC" -Wall -Werror -Iharness -o "$TMP/smoke-prefix" "$src" \
    $(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs gdrapi) -ldl
expect "with LD_LIBRARY_PATH=<tmp>/lib every name resolves to the prefix's library" \
    run_smoke "$TMP/smoke-prefix" "$bare" LD_LIBRARY_PATH="$P/lib"
# shellcheck disable=SC2046
expect "a program of host-written memory builds against the prefix (pkg-config gdrapi_ext)" \
    "$CC" -Wall -Werror -o "$TMP/ext-smoke-prefix" "$ext_src" \
    $(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs gdrapi_ext) -ldl
expect "and runs on the emulator from the prefix (LD_LIBRARY_PATH=<tmp>/lib)" \
    ext_smoke "$TMP/ext-smoke-prefix" "$P/lib/libgdrapi_ext.so.0.1" open \
    LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$P/lib"
expect "make uninstall prefix=<tmp>" make_q uninstall prefix="$P"
expect "after make uninstall the prefix is empty" test -z "$(ls -A "$P")"

D=$TMP/destdir
expect "make install DESTDIR=<tmp> prefix=/opt/gdr libdir=/opt/gdr/lib64" \
    make_q install DESTDIR="$D" prefix=/opt/gdr libdir=/opt/gdr/lib64
expect "DESTDIR install: lib64/ and include/ under <tmp>/opt/gdr, no lib/" \
    test -f "$D/opt/gdr/lib64/libgdrapi.so.2.6" -a -f "$D/opt/gdr/include/gdrapi.h" -a ! -e "$D/opt/gdr/lib"
expect "DESTDIR install: gdrapi.pc names the final prefix, not DESTDIR" \
    bash -c 'grep -qx "prefix=/opt/gdr" "$1" && grep -qx "libdir=\${exec_prefix}/lib64" "$1"' \
    _ "$D/opt/gdr/lib64/pkgconfig/gdrapi.pc"
expect "make uninstall with the same DESTDIR/prefix/libdir" \
    make_q uninstall DESTDIR="$D" prefix=/opt/gdr libdir=/opt/gdr/lib64
expect "after make uninstall <tmp>/opt/gdr is empty" test -z "$(ls -A "$D/opt/gdr")"

# The default prefix, /usr/local, in a private mount namespace with a tmpfs over it (cargo is
# not run in there: the toolchain may live under /usr/local).
if unshare -m true 2>/dev/null; then
    expect "make install / uninstall with the default prefix /usr/local removes the files and keeps the system's directories" \
        unshare -m bash -c 'set -e
            mount -t tmpfs gdrapi-test /usr/local
            mkdir /usr/local/bin /usr/local/include /usr/local/lib
            mk() { "$MAKE" --no-print-directory -o lib -o ext -o tools -o "$LIB_DIR/libgdrapi.so.2.6" \
                       -o "$LIB_DIR/libgdrapi_ext.so.0.1" \
                       BUILD_DIR="$BUILD_DIR" "$@" >/dev/null; }
            mk install
            test -f /usr/local/lib/libgdrapi.so.2.6 -a -f /usr/local/include/gdrapi.h
            test -f /usr/local/lib/libgdrapi_ext.so.0.1 -a -f /usr/local/include/gdrapi_ext.h
            grep -qx "prefix=/usr/local" /usr/local/lib/pkgconfig/gdrapi.pc
            mk uninstall
            test -z "$(find /usr/local ! -type d)"
            test -d /usr/local/bin -a -d /usr/local/include -a -d /usr/local/lib'
else
    echo "test-pkg: note: unshare -m is not allowed here; the default-prefix check did not run"
fi

# ---------------------------------------------------------------------------------------
# 4. Purge; nothing may be left behind.
dpkg -L "${pkgs[@]}" | sort -u >"$TMP/owned"
dpkg --purge "${pkgs[@]}" >"$TMP/purge.log" 2>&1 || { cat "$TMP/purge.log" >&2; fail "dpkg --purge"; }
not_installed() { ! installed "$1"; }
for p in "${pkgs[@]}"; do expect "dpkg --purge: $p is gone from dpkg's database" not_installed "$p"; done
left=()
while IFS= read -r f; do
    [ -d "$f" ] && [ ! -L "$f" ] && continue # shared directories (/usr/lib/<triplet>) stay
    if [ -e "$f" ] || [ -L "$f" ]; then left+=("$f"); fi
done <"$TMP/owned"
[ ${#left[@]} = 0 ] || printf 'test-pkg: left behind: %s\n' "${left[@]}" >&2
expect "every file the packages installed ($(grep -c . "$TMP/owned") paths listed by dpkg -L) is gone" \
    test ${#left[@]} = 0
for p in "${pkgs[@]}"; do
    expect "/usr/share/doc/$p is gone" test ! -e "/usr/share/doc/$p"
done
expect "ldconfig no longer knows libgdrapi" bash -c '! /sbin/ldconfig -p | grep -q libgdrapi'

# ---------------------------------------------------------------------------------------
# 5. Moving from NVIDIA's packages to these and back.
fake() { # fake NAME VERSION ARCH FIELDS FILES...: builds a stand-in package, prints its path
    local name=$1 ver=$2 arch_=$3 fields=$4 dir=$TMP/fake/$1; shift 4
    mkdir -p "$dir/DEBIAN"
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <test@example.org>\n%sDescription: stand-in for the package test\n' \
        "$name" "$ver" "$arch_" "$fields" >"$dir/DEBIAN/control"
    local f
    for f in "$@"; do # PATH=CONTENT file, or PATH->TARGET link
        if [[ $f == *'->'* ]]; then
            mkdir -p "$dir/$(dirname "${f%%->*}")"
            ln -s "${f#*->}" "$dir/${f%%->*}"
        else
            mkdir -p "$dir/$(dirname "${f%%=*}")"
            printf '%s\n' "${f#*=}" >"$dir/${f%%=*}"
        fi
    done
    # (apt-get wants the usual NAME_VERSION_ARCH.deb file name)
    dpkg-deb --root-owner-group -b "$dir" "$TMP/fake/${name}_${ver}_${arch_}.deb" >/dev/null
    echo "$TMP/fake/${name}_${ver}_${arch_}.deb"
}
nv_lib=$(fake libgdrapi 2.6-1 "$arch" $'Multi-Arch: same\nConflicts: gdrcopy (<= 2.2-1)\n' \
    "usr/lib/$multiarch/libgdrapi.so.2.6=stand-in for NVIDIA's library" \
    "usr/lib/$multiarch/libgdrapi.so.2->libgdrapi.so.2.6" "usr/lib/$multiarch/libgdrapi.so->libgdrapi.so.2" \
    "usr/include/gdrapi.h=/* NVIDIA */" "usr/include/gdrconfig.h=/* NVIDIA */")
consumer=$(fake gdrapi-rs-test-consumer 1.0 all $'Depends: libgdrapi (>= 2.6-1)\n' \
    "usr/share/doc/gdrapi-rs-test-consumer/README=depends on libgdrapi")
nv=("$nv_lib" "$consumer")
if [ $with_tools = 1 ]; then
    nv+=("$(fake gdrcopy-tests 2.6-1 "$arch" $'Depends: libgdrapi (>= 2.6-1)\n' \
        "usr/bin/gdrcopy_copybw=stand-in" "usr/bin/gdrcopy_sanity=stand-in" "usr/bin/copybw->gdrcopy_copybw")")
fi
nv_pkgs=(libgdrapi gdrapi-rs-test-consumer)
[ $with_tools = 1 ] && nv_pkgs+=(gdrcopy-tests)
we_installed=("${nv_pkgs[@]}" "${pkgs[@]}")
dpkg -i "${nv[@]}" >"$TMP/nv.log" 2>&1 || { cat "$TMP/nv.log" >&2; fail "dpkg -i of the stand-ins"; }
expect "stand-ins for NVIDIA's packages and a dependent program are installed" \
    bash -c 'for p; do [ "$(dpkg-query -W -f="\${db:Status-Status}" "$p")" = installed ] || exit 1; done' _ "${nv_pkgs[@]}"
dpkg -i "${debs[@]}" >"$TMP/move.log" 2>&1 || { cat "$TMP/move.log" >&2; fail "dpkg -i of ours over NVIDIA's"; }
expect "dpkg -i of ours removes NVIDIA's libgdrapi (Conflicts + Replaces)" not_installed libgdrapi
[ $with_tools = 1 ] && expect "... and NVIDIA's gdrcopy-tests, whose gdrcopy_sanity goes with it" \
    bash -c '! dpkg-query -W -f="\${db:Status-Status}" gdrcopy-tests | grep -qx installed && test ! -e /usr/bin/gdrcopy_sanity'
expect "the program depending on libgdrapi (>= 2.6-1) stays installed, satisfied by Provides" \
    bash -c '[ "$(dpkg-query -W -f="\${db:Status-Status}" gdrapi-rs-test-consumer)" = installed ] && [ -z "$(dpkg --audit)" ]'
expect "$libdir/libgdrapi.so.2.6 and gdrapi.h are ours now" \
    bash -c 'cmp -s "$1" "$2" && ! grep -q NVIDIA /usr/include/gdrapi.h' _ "$TMP/root$libdir/libgdrapi.so.2.6" "$libdir/libgdrapi.so.2.6"
if command -v apt-get >/dev/null; then
    apt-get install -y -o Dpkg::Use-Pty=0 "$nv_lib" >"$TMP/back.log" 2>&1 ||
        { cat "$TMP/back.log" >&2; fail "apt-get install of NVIDIA's libgdrapi over ours"; }
    expect "apt-get left no package half-done (dpkg --audit is empty)" test -z "$(dpkg --audit)"
    expect "apt-get install of NVIDIA's libgdrapi removes libgdrapi2, libgdrapi-ext0 and libgdrapi-dev" \
        bash -c '! dpkg-query -W -f="\${db:Status-Status}\n" libgdrapi2 libgdrapi-ext0 libgdrapi-dev 2>/dev/null | grep -qx installed'
    expect "... and the dependent program stays installed" \
        bash -c '[ "$(dpkg-query -W -f="\${db:Status-Status}" gdrapi-rs-test-consumer)" = installed ] && [ -z "$(dpkg --audit)" ]'
    expect "NVIDIA's files are back" grep -q NVIDIA /usr/include/gdrapi.h
fi
all=()
for p in "${we_installed[@]}"; do installed "$p" && all+=("$p"); done
dpkg -L "${all[@]}" 2>/dev/null | sort -u >"$TMP/owned2"
dpkg --purge "${all[@]}" >"$TMP/purge2.log" 2>&1 || { cat "$TMP/purge2.log" >&2; fail "dpkg --purge (5)"; }
left=()
while IFS= read -r f; do
    [ -d "$f" ] && [ ! -L "$f" ] && continue
    if [ -e "$f" ] || [ -L "$f" ]; then left+=("$f"); fi
done <"$TMP/owned2"
[ ${#left[@]} = 0 ] || printf 'test-pkg: left behind: %s\n' "${left[@]}" >&2
expect "after purging the stand-ins and ours, nothing of them is left" test ${#left[@]} = 0
for p in "${we_installed[@]}"; do
    expect "$p is not installed at the end" not_installed "$p"
done

echo "test-pkg: all $passed checks passed"
