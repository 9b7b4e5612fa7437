#!/bin/bash
# test-rpm.sh: the RPMs of `make rpm`, installed and removed as an administrator would.
#
# 1. The three packages exist, with the dependencies that let them replace NVIDIA's gdrcopy
#    (gdrcopy provides libgdrapi.so.2, gdrcopy-devel and gdrcopy-tools require it), and need
#    no glibc newer than 2.17, nor libcuda or libgcc_s.
# 2. Their file lists equal those of the .deb files (`make deb`, built if build/deb has none)
#    package by package (libgdrapi2 and libgdrapi-ext0 / gdrcopy, libgdrapi-dev / gdrcopy-devel,
#    gdrcopy-tools),
#    after mapping /usr/lib/<triplet> to the RPM libdir and leaving out each format's own
#    documentation directory (/usr/share/doc, /usr/share/licenses) and lintian's overrides.
# 3. rpm --root into a scratch root (--nodeps: Debian's rpm database knows no glibc): all three
#    install, rpm -V finds every file as packaged, the links are right, check-elf.sh passes on
#    the installed library, and the installed doctor and copylat run on the emulator with it;
#    host-written memory (abi-tests/pkg/ext_smoke.c, built with the installed gdrapi_ext.pc)
#    allocates and copies on the emulator with the installed libgdrapi_ext.so.0.1.
# 4. rpm --root -e removes them and leaves no file but rpm's own database.
#
# Environment (set by mk/86-rpm.mk): BUILD_DIR, RPM_DIR, SIM_DIR, PKG_VERSION, MAKE.
set -u
cd "$(dirname "$0")/.."
: "${BUILD_DIR:?}" "${RPM_DIR:?}" "${SIM_DIR:?}" "${PKG_VERSION:?}" "${MAKE:=make}"
work=$(mktemp -d "${TMPDIR:-/tmp}/gdrapi-rpm-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "FAILED - $*"; }
expect() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
has() { # has DESCRIPTION TEXT PATTERN (grep -E)
    if grep -qE -- "$3" <<<"$2"; then ok "$1"; else bad "$1: no /$3/ in:"; echo "$2" | sed 's/^/    /'; fi
}
finish() { echo "test-rpm"; echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

arch=$(rpm --eval '%{_arch}')
libdir=$(rpm --eval '%{_libdir}')
rpmfile() { echo "$RPM_DIR/$1-$PKG_VERSION-1.$arch.rpm"; }
PAIRS=(libgdrapi2+libgdrapi-ext0:gdrcopy libgdrapi-dev:gdrcopy-devel gdrcopy-tools:gdrcopy-tools)
RPMS=()
for p in "${PAIRS[@]}"; do
    f=$(rpmfile "${p#*:}")
    if [ -f "$f" ]; then ok "built $(basename "$f")"; RPMS+=("$f"); else bad "missing $f"; fi
done
[ "${#RPMS[@]}" -eq 3 ] || finish

# ---- 1. what they provide and require ----
has "gdrcopy provides libgdrapi.so.2()(64bit)" "$(rpm -qp --provides "$(rpmfile gdrcopy)")" '^libgdrapi\.so\.2\(\)\(64bit\)'
has "gdrcopy provides gdrapi-rs" "$(rpm -qp --provides "$(rpmfile gdrcopy)")" "^gdrapi-rs = $PKG_VERSION-1"
has "gdrcopy-devel requires the same gdrcopy" "$(rpm -qp --requires "$(rpmfile gdrcopy-devel)")" \
    "^gdrcopy\(.*\) = $PKG_VERSION-1\$"
has "gdrcopy-tools requires gdrcopy" "$(rpm -qp --requires "$(rpmfile gdrcopy-tools)")" '^gdrcopy\(.*\) >= 2\.6\.0$'
has "gdrcopy-tools conflicts with NVIDIA's gdrcopy (same programs)" \
    "$(rpm -qp --conflicts "$(rpmfile gdrcopy-tools)")" '^gdrcopy < 2\.6\.0$'
for p in gdrcopy gdrcopy-tools; do
    req=$(rpm -qp --requires "$(rpmfile $p)")
    if grep -qiE 'libcuda|libgcc_s' <<<"$req"; then bad "$p requires libcuda or libgcc_s: $req"
    else ok "$p requires neither libcuda nor libgcc_s"; fi
    # Built against glibc 2.17 (make rpm): nothing newer, so that RHEL 8 and SUSE 15 take it.
    new=$(grep -oE 'GLIBC_[0-9.]+' <<<"$req" | sort -uV | awk -F_ '{ split($2, v, "."); if (v[1] > 2 || v[2] > 17) print }')
    if [ -z "$new" ]; then ok "$p needs glibc 2.17 at most ($(grep -oE 'GLIBC_[0-9.]+' <<<"$req" | sort -V | tail -1))"
    else bad "$p needs a newer glibc than 2.17: $new"; fi
done

# ---- 2. file lists against the .deb files ----
DEB_DIR=$BUILD_DIR/deb
if ! ls "$DEB_DIR"/libgdrapi2_*.deb >/dev/null 2>&1; then
    echo "test-rpm: no .deb in $DEB_DIR: make deb"
    "$MAKE" --no-print-directory deb BUILD_DIR="$BUILD_DIR" >"$work/deb.log" 2>&1 ||
        { tail -n 40 "$work/deb.log"; bad "make deb"; finish; }
fi
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb_list() { # the files and links of a .deb, lib dir mapped, docs left out
    dpkg-deb -c "$1" | awk '$1 !~ /^d/ { p = $6; sub(/^\./, "", p); print p }' |
        sed "s|^/usr/lib/$triplet/|$libdir/|" | grep -vE '^/usr/share/(doc|licenses|lintian)/' | sort
}
rpm_list() { # the files and links of an RPM, docs left out
    rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$1" | awk '$1 !~ /^d/ { print $2 }' |
        grep -vE '^/usr/share/(doc|licenses)/' | sort
}
for p in "${PAIRS[@]}"; do
    d=${p%%:*} r=${p#*:}
    : >"$work/$d.deb.txt"
    for one in ${d//+/ }; do # an RPM may hold what several .deb files hold
        deb=$(ls "$DEB_DIR/${one}_"*.deb 2>/dev/null | grep -v dbgsym | head -1)
        if [ -z "$deb" ]; then bad "no $one .deb in $DEB_DIR"; continue 2; fi
        deb_list "$deb" >>"$work/$d.deb.txt"
    done
    sort -o "$work/$d.deb.txt" "$work/$d.deb.txt"
    rpm_list "$(rpmfile "$r")" >"$work/$r.rpm.txt"
    if diff -u "$work/$d.deb.txt" "$work/$r.rpm.txt" >"$work/diff.txt"; then
        ok "$r has the files of $d ($(wc -l <"$work/$r.rpm.txt") files and links):"
        sed 's/^/    /' "$work/$r.rpm.txt"
    else
        bad "$r and $d differ (- deb, + rpm):"; sed 's/^/    /' "$work/diff.txt"
    fi
done

# ---- 3. install into a scratch root ----
root=$work/root
R=(rpm --root "$root")
expect "rpm --initdb" "${R[@]}" --initdb
expect "rpm --root -i --nodeps (the three packages)" "${R[@]}" -i --nodeps "${RPMS[@]}"
has "all three are installed" "$("${R[@]}" -qa --qf '%{NAME}\n' | sort | tr '\n' ' ')" \
    '^gdrcopy gdrcopy-devel gdrcopy-tools $'
expect "rpm -V: every installed file as packaged" "${R[@]}" -V --nodeps gdrcopy gdrcopy-devel gdrcopy-tools
expect "libgdrapi.so.2 -> libgdrapi.so.2.6" test "$(readlink "$root$libdir/libgdrapi.so.2")" = libgdrapi.so.2.6
expect "libgdrapi.so -> libgdrapi.so.2" test "$(readlink "$root$libdir/libgdrapi.so")" = libgdrapi.so.2
expect "copylat -> gdrcopy_copylat" test "$(readlink "$root/usr/bin/copylat")" = gdrcopy_copylat
expect "libgdrapi_ext.so.0 -> libgdrapi_ext.so.0.1, libgdrapi_ext.so -> libgdrapi_ext.so.0" \
    test "$(readlink "$root$libdir/libgdrapi_ext.so.0") $(readlink "$root$libdir/libgdrapi_ext.so")" = \
    "libgdrapi_ext.so.0.1 libgdrapi_ext.so.0"
has "libgdrapi_ext.so.0.1 needs libgdrapi.so.2 and glibc only" \
    "$(readelf -d "$root$libdir/libgdrapi_ext.so.0.1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')" \
    '^(ld-linux[^ ]* )?libc\.so\.6 (libdl\.so\.2 )?libgdrapi\.so\.2 (libpthread\.so\.0 )?$'
has "gdrcopy provides libgdrapi_ext.so.0()(64bit)" "$(rpm -qp --provides "$(rpmfile gdrcopy)")" '^libgdrapi_ext\.so\.0\(\)\(64bit\)' 
expect "the installed library's ELF facts (check-elf.sh; glibc 2.17 names libpthread, libdl)" env \
    CHECK_ELF_GLIBC_SPLIT=1 abi-tests/c/check-elf.sh "$root$libdir" include/gdrapi.h abi-tests/c/symbols.txt
has "gdrapi.pc points at the installed files" "$(cat "$root$libdir/pkgconfig/gdrapi.pc")" "^libdir=\\$\\{exec_prefix\\}/lib64$"
SIM=(env LD_PRELOAD="$SIM_DIR/libcuda.so.1" LD_LIBRARY_PATH="$SIM_DIR:$root$libdir"
     GDRCOPY_DOCTOR_DOCKERENV=/nonexistent GDRCOPY_DOCTOR_CONTAINERENV=/nonexistent
     GDRCOPY_DOCTOR_CGROUP=/nonexistent)
out=$("${SIM[@]}" "$root/usr/bin/gdrcopy" doctor 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "$root$libdir/libgdrapi.so.2" <<<"$out"; then
    ok "the installed doctor passes on the emulator with the installed library"
else bad "the installed doctor (exit $rc):"; echo "$out" | sed 's/^/    /'; fi
expect "the installed copylat runs on the emulator" "${SIM[@]}" "$root/usr/bin/copylat" -s 4096 -w 2 -r 2
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
expect "a program of host-written memory builds with the installed gdrapi_ext.pc" \
    "${CC:-cc}" -Wall -Werror -o "$work/ext-smoke" abi-tests/pkg/ext_smoke.c \
    $(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root$libdir/pkgconfig" pkg-config --cflags --libs gdrapi_ext) -ldl
expect "and allocates and copies on the emulator with the installed libgdrapi_ext.so.0.1" \
    "${SIM[@]}" "$work/ext-smoke" "$root$libdir/libgdrapi_ext.so.0.1" open

# ---- 4. removal ----
expect "rpm --root -e (the three packages)" "${R[@]}" -e gdrcopy-tools gdrcopy-devel gdrcopy
dbpath=$(rpm --eval '%{_dbpath}')
left=$(cd "$root" && find . ! -type d | sed 's|^\.||' | grep -v "^$dbpath/" | sort)
if [ -z "$left" ]; then ok "nothing left but rpm's database ($dbpath)"
else bad "left behind:"; echo "$left" | sed 's/^/    /'; fi

finish
