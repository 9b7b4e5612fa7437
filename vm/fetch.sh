#!/bin/bash
# fetch.sh DIR: brings the guest kernel, its headers and kbuild, QEMU and busybox into DIR,
# unpacked from Debian's packages (apt-get download + dpkg -x), nothing installed system-wide.
# Libraries QEMU needs that the host lacks are unpacked next to it. Prints the kernel release.
set -euo pipefail
dir=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$dir/debs" "$dir/root"
cd "$dir/debs"

# The versioned packages behind the metapackages, so that image and headers match.
dep_of() { apt-cache depends "$1" 2>/dev/null | awk -v p="$2" '$1 == "Depends:" && $2 ~ p { print $2; exit }'; }
image=$(dep_of linux-image-amd64 '^linux-image-')
headers=$(dep_of linux-headers-amd64 '^linux-headers-')
[ -n "$image" ] && [ -n "$headers" ] || { echo "fetch.sh: apt-cache knows no linux-image-amd64/linux-headers-amd64 (apt-get update?)" >&2; exit 1; }
common=$(dep_of "$headers" '^linux-headers-.*-common')
kbuild=$(dep_of "$headers" '^linux-kbuild-')

# QEMU and the libraries it needs that are not installed here.
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
# The packages' dependencies that are not installed here, recursively (QEMU's libraries).
qemu_pkgs="qemu-system-x86 qemu-system-common qemu-system-data seabios"
queue="qemu-system-x86 qemu-system-common"
seen=" "
while [ -n "$queue" ]; do
    set -- $queue; p=$1; shift; queue="$*"
    for d in $(apt-cache depends "$p" | awk '$1 == "Depends:" && $2 !~ /^</ { print $2 }'); do
        case "$seen" in *" $d "*) continue;; esac
        seen="$seen$d "
        case "$d" in qemu-system-x86|qemu-system-common|qemu-system-data|seabios|ipxe-qemu) continue;; esac
        installed "$d" && continue
        qemu_pkgs="$qemu_pkgs $d"
        queue="$queue $d"
    done
done

want="$image $headers $common $kbuild busybox-static $qemu_pkgs"
missing=
for p in $want; do ls "${p}"_*.deb >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    echo "fetch.sh: apt-get download$missing" >&2
    apt-get download $missing >&2
fi
if [ ! -e "$dir/root/.unpacked" ]; then
    for f in *.deb; do dpkg -x "$f" "$dir/root"; done
    # The headers' Makefile includes the common part by its installed path: point it here.
    sed -i "s|^include /usr/src/|include $dir/root/usr/src/|" "$dir/root/usr/src/$headers/Makefile"
    touch "$dir/root/.unpacked"
fi
echo "${image#linux-image-}"
