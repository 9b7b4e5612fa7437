#!/bin/busybox sh
# /init of the test VM: loads the provider and gdrdrv in the module mode named on the kernel
# command line (gdrvm.mode=persistent|nonpersistent), creates /dev/gdrdrv from
# /proc/devices, runs /t/tests.sh, unloads gdrdrv (whose exit checks that every pin was put
# back) and powers off. The host reads the console: "gdrvm: done rc=N" ends a run.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo 0 > /proc/sys/kernel/printk_ratelimit 2>/dev/null

say() { echo "gdrvm: $*"; }
finish() {
    say "done rc=$1"
    sync
    poweroff -f
    sleep 60
}

mode=persistent
for w in $(cat /proc/cmdline); do
    case $w in gdrvm.mode=*) mode=${w#gdrvm.mode=};; esac
done
case $mode in persistent) persist=1;; nonpersistent) persist=0;; *) say "bad mode $mode"; finish 2;; esac
say "init at $(cut -d' ' -f1 /proc/uptime)s, mode $mode, kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpus"

insmod /mods/nvp2p.ko || { say "insmod nvp2p failed"; finish 3; }
# dbg_enabled=1 adds /proc/driver/gdrdrv/nv_get_pages_refcount (NVIDIA's leakage test reads
# it); its messages stay in the ring buffer (loglevel=4), dumped below when a test fails.
insmod /mods/gdrdrv.ko use_persistent_mapping=$persist dbg_enabled=1 || { say "insmod gdrdrv failed"; finish 3; }
major=$(awk '$2 == "gdrdrv" { print $1 }' /proc/devices)
[ -n "$major" ] || { say "gdrdrv is not in /proc/devices"; finish 3; }
mknod -m 666 /dev/gdrdrv c "$major" 0
say "gdrdrv major $major; /proc/driver/gdrdrv/params:"
sed 's/^/  /' /proc/driver/gdrdrv/params

start=$(cut -d' ' -f1 /proc/uptime)
sh /t/tests.sh "$persist"
rc=$?
end=$(cut -d' ' -f1 /proc/uptime)
say "tests took $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')s"

if [ $rc -ne 0 ]; then
    say "kernel messages (last 60):"
    dmesg | tail -60 | sed 's/^/  /'
fi
say "nv_get_pages_refcount $(cat /proc/driver/gdrdrv/nv_get_pages_refcount)"
sed 's/^/  nvp2p /' /proc/driver/nvp2p
# gdrdrv's exit BUG()s when a pin was never put back (oops=panic makes that a failed run).
rmmod gdrdrv || { say "rmmod gdrdrv failed"; rc=4; }
pins=$(awk '$1 == "pins:" { print $2 }' /proc/driver/nvp2p)
allocs=$(awk '$1 == "allocations:" { print $2 }' /proc/driver/nvp2p)
free=$(awk '$1 == "free_bytes:" { print $2 }' /proc/driver/nvp2p)
bar=$(awk '$1 == "bar_bytes:" { print $2 }' /proc/driver/nvp2p)
if [ "$pins" != 0 ] || [ "$allocs" != 0 ] || [ "$free" != "$bar" ]; then
    say "provider leak: pins=$pins allocations=$allocs free=$free of $bar"
    rc=5
fi
rmmod nvp2p || { say "rmmod nvp2p failed"; rc=4; }
finish $rc
