#!/bin/bash
# check-elf.sh LIB_DIR HEADER ALLOWLIST
# The shared library's ELF facts: exported symbols are exactly the allowlist
# (the 17 functions of gdrcopy 2.6 plus the two copy aliases), none carries a
# symbol version, SONAME is libgdrapi.so.2, DT_NEEDED names only the C runtime
# (never libcuda), calls of its own entries bind locally, the two links exist,
# and every function the header declares is exported.
# CHECK_ELF_GLIBC_SPLIT=1 also allows libpthread.so.0 and libdl.so.2: a library
# linked against a glibc older than 2.34 (the manylinux wheels, glibc 2.17)
# names them, as they were not yet merged into libc.so.6.
set -u
lib_dir=$1 header=$2 allowlist=$3
lib=$lib_dir/libgdrapi.so.2.6
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "check-elf: FAILED: $*"; }

if [ ! -f "$lib" ]; then
    echo "check-elf: $lib missing"
    echo "0 passed, 1 failed"
    exit 1
fi

exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort)
wanted=$(sort "$allowlist")
if [ "$exported" = "$wanted" ]; then ok; else
    bad "exported symbols differ from $(basename "$allowlist") (< exported, > wanted):"
    diff <(echo "$exported") <(echo "$wanted") | grep '^[<>]'
fi

# No version definitions, and no defined symbol bound to a version.
if readelf -V "$lib" | grep -q "Version definition section"; then
    bad "the library defines symbol versions (.gnu.version_d present)"
else ok; fi
if echo "$exported" | grep -q '@'; then bad "versioned exports: $(echo "$exported" | grep '@')"; else ok; fi

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = "libgdrapi.so.2" ]; then ok; else bad "SONAME is '$soname', want libgdrapi.so.2"; fi

needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for n in $needed; do
    case "$n" in
        libc.so.6 | ld-linux-x86-64.so.2 | ld-linux-aarch64.so.1 | ld64.so.2) ok ;;
        libpthread.so.0 | libdl.so.2) if [ "${CHECK_ELF_GLIBC_SPLIT:-0}" = 1 ]; then ok; else
            bad "unexpected DT_NEEDED $n (a link against glibc < 2.34?)"; fi ;;
        *) bad "unexpected DT_NEEDED $n" ;;
    esac
done
if echo "$needed" | grep -q libcuda; then bad "DT_NEEDED on libcuda"; else ok; fi
# Every symbol the library imports comes from the C library (weak hooks aside): the unwinder
# is linked in statically (build-aux/cc-static-unwind), nothing from libgcc_s.
foreign=$(nm -D --undefined-only "$lib" | awk '$1 != "w" { print $NF }' | grep -v '@GLIBC_' || true)
if [ -z "$foreign" ]; then ok; else bad "imports from outside the C library: $foreign"; fi
if echo "$needed" | grep -qx libc.so.6; then ok; else bad "no DT_NEEDED on libc.so.6"; fi

# The library's calls of its own entries (gdr_map asks through gdr_get_info_v2) bind to its
# own code (-Bsymbolic): no dynamic relocation names an exported symbol, so no
# other library's function of that name (another libgdrapi, a preloaded shim) can answer them.
bound=$(readelf -rW "$lib" | awk '$5 ~ /^gdr_/ { print $3, $5 }' | sort -u)
if [ -z "$bound" ]; then ok; else bad "calls of the library's own entries bind at run time: $bound"; fi

if [ "$(readlink "$lib_dir/libgdrapi.so.2")" = "libgdrapi.so.2.6" ]; then ok; else
    bad "$lib_dir/libgdrapi.so.2 is not a link to libgdrapi.so.2.6"; fi
if [ "$(readlink "$lib_dir/libgdrapi.so")" = "libgdrapi.so.2" ]; then ok; else
    bad "$lib_dir/libgdrapi.so is not a link to libgdrapi.so.2"; fi

# Every function the header declares is exported (gdr_get_info is a macro
# there, its symbol the legacy entry point).
declared=$(grep -oE '^[a-z_ ]+[ *]gdr_[a-z0-9_]+\(' "$header" | grep -oE 'gdr_[a-z0-9_]+\(' | tr -d '(' | sort -u)
for f in $declared; do
    if echo "$exported" | grep -qx "$f"; then ok; else bad "declared in the header but not exported: $f"; fi
done
if [ "$(echo "$declared" | wc -l)" -eq 18 ]; then ok; else
    bad "the header declares $(echo "$declared" | wc -l) functions, want 18"; fi

echo "check-elf"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
