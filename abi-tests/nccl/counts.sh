#!/bin/bash
# counts.sh LOG PROCESSES: what reached the library in a run made with the counting shim in
# front of it and the library's debug log on (GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1).
#
# The shim is harness/gdr_count.c built as a libgdrapi.so of its own (soname libgdrapi.so, needing
# libgdrapi.so.2): NCCL dlopens "libgdrapi.so" and takes every function with dlsym on that
# handle, which an LD_PRELOAD cannot interpose, so the shim's folder goes first on
# LD_LIBRARY_PATH instead. It counts pins (both versions), maps, unmaps, unpins and copies
# both ways, forwards each call to this library's libgdrapi.so.2, and each process prints one
# "GDRCOUNT to=.. from=.. pin=.. map=.. unmap=.. unpin=.." line at its exit.
#
# The library's own lines for the same calls, with the Vulkan import: one "DBG:  pinned va="
# per pin (the backend), one "DBG:  mapping_type=" per map and one "DBG:  unmapping va: 0x.."
# per unmap (the session). Copies log nothing.
#
# Prints one line:
#   counts: pin=P map=M unmap=U unpin=N to=T from=F processes=K; library log: pinned=P mapped=M unmapped=U
# and exits 1 when fewer than PROCESSES processes reported, or when the library log of the
# Vulkan import disagrees with the shim.
set -u
log=$1 procs=$2
read -r k pin map unmap unpin to from < <(awk '
    /^GDRCOUNT / {
        k++
        for (i = 2; i <= NF; i++) { split($i, kv, "="); n[kv[1]] += kv[2] }
    }
    END { printf "%d %d %d %d %d %d %d\n", k, n["pin"], n["map"], n["unmap"], n["unpin"], n["to"], n["from"] }
' "$log")
pinned=$(grep -c '^DBG:  pinned va=' "$log")
mapped=$(grep -c '^DBG:  mapping_type=' "$log")
unmapped=$(grep -cE '^DBG:  unmapping va: 0x[0-9a-f]+$' "$log")
echo "counts: pin=$pin map=$map unmap=$unmap unpin=$unpin to=$to from=$from processes=$k;" \
    "library log: pinned=$pinned mapped=$mapped unmapped=$unmapped"
rc=0
if [ "$k" -lt "$procs" ]; then
    echo "counts: FAILED: $k of $procs processes printed their GDRCOUNT line"
    rc=1
fi
if grep -q '^INFO: Using vulkan backend$' "$log"; then
    if [ "$pinned" -ne "$pin" ] || [ "$mapped" -ne "$map" ] || [ "$unmapped" -ne "$unmap" ]; then
        echo "counts: FAILED: the library logged $pinned pins, $mapped maps and $unmapped unmaps;" \
            "the shim counted $pin, $map and $unmap"
        rc=1
    fi
fi
exit $rc
