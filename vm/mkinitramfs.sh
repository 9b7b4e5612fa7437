#!/bin/bash
# mkinitramfs.sh STAGE BUSYBOX OUT: packs the directory STAGE (the guest's files, laid out as
# they appear under / in the guest) into the gzipped cpio OUT, adding the static BUSYBOX as
# /bin/busybox, vm/init.sh as /init, and every shared library the ELF files under STAGE need
# (their ldd closure, copied to the same paths as on this machine).
set -euo pipefail
stage=$1 busybox=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$stage/bin" "$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/root"
install -m 755 "$busybox" "$stage/bin/busybox"
install -m 755 "$here/init.sh" "$stage/init"

# The libraries: ldd of every dynamic ELF file in the stage, libraries the stage itself
# provides excepted (LD_LIBRARY_PATH in the guest points at those).
declare -A seen=()
while IFS= read -r -d '' f; do
    head -c4 "$f" 2>/dev/null | grep -q $'\x7fELF' || continue
    while read -r path; do
        [ -n "$path" ] && [ -z "${seen[$path]:-}" ] || continue
        seen[$path]=1
    done < <(ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }')
done < <(find "$stage" -type f -print0)
for path in "${!seen[@]}"; do
    case "$path" in "$stage"/*) continue;; esac
    mkdir -p "$stage$(dirname "$path")"
    cp -L "$path" "$stage$path"
done
# The dynamic loader under its canonical name.
if [ -e /lib64/ld-linux-x86-64.so.2 ]; then
    mkdir -p "$stage/lib64"
    cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib64/"
fi

# busybox packs the archive: the host needs no cpio of its own.
(cd "$stage" && find . | "$stage/bin/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 > "$out"
