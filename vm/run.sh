#!/bin/bash
# run.sh MODE DIR: boots the test VM once in gdrdrv's MODE (persistent | nonpersistent) with
# DIR/vmlinuz and DIR/initramfs.cpio.gz, QEMU from DIR/root (unpacked by fetch.sh), and the
# "GPU memory" file DIR/vram.img behind an ivshmem-plain BAR. The console goes to
# DIR/console-MODE.log. Fails on a kernel panic, oops, BUG or warning, on a hang (GDRVM_TIMEOUT
# seconds, default 900), and when the guest's tests fail.
set -uo pipefail
mode=$1 dir=$2
limit=${GDRVM_TIMEOUT:-900}
root=$dir/root
log=$dir/console-$mode.log
vram=${GDRVM_VRAM:-256M}
export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Debian builds the accelerators and some devices as modules.
export QEMU_MODULE_DIR=$root/usr/lib/x86_64-linux-gnu/qemu

# KVM would need /dev/kvm, which this machine (itself a VM) does not offer: TCG emulates.
accel=tcg
if [ -w /dev/kvm ] && [ "${GDRVM_KVM:-0}" = 1 ]; then accel=kvm; fi

rm -f "$dir/vram.img"
start=$(date +%s.%N)
timeout -k 10 "$limit" "$root/usr/bin/qemu-system-x86_64" \
    -L "$root/usr/share/seabios" -L "$root/usr/share/qemu" \
    -machine q35,accel=$accel -cpu max -smp "${GDRVM_CPUS:-2}" -m "${GDRVM_MEM:-1536M}" \
    -nodefaults -nographic -no-reboot -serial stdio -monitor none \
    -kernel "$dir/vmlinuz" -initrd "$dir/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=4 gdrvm.mode=$mode ${GDRVM_APPEND:-}" \
    -object memory-backend-file,id=vram,share=on,mem-path="$dir/vram.img",size=$vram \
    -device ivshmem-plain,memdev=vram \
    < /dev/null > "$log" 2>&1
qrc=$?
end=$(date +%s.%N)
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
rm -f "$dir/vram.img"

grep -E '^gdrvm(-result|-case|-trace)?:' "$log" | tr -d '\r'
bad=$(grep -nE 'Kernel panic|Oops|BUG:|WARNING:|general protection|Call Trace' "$log" | head -5)
if [ -n "$bad" ]; then
    echo "gdrdrv VM ($mode): the kernel reported a fault; console log: $log"
    echo "$bad"
    exit 1
fi
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
    echo "gdrdrv VM ($mode): no result within ${limit}s (hang); console log: $log"
    tail -20 "$log"
    exit 1
fi
rc=$(sed -n 's/^gdrvm: done rc=\([0-9]*\).*/\1/p' "$log" | tr -d '\r' | tail -1)
if [ -z "$rc" ]; then
    echo "gdrdrv VM ($mode): the guest stopped without finishing (qemu exit $qrc); console log: $log"
    tail -20 "$log"
    exit 1
fi
echo "gdrdrv VM ($mode): ${secs}s wall, guest rc=$rc; console log: $log"
exit $([ "$rc" = 0 ] && echo 0 || echo 1)
