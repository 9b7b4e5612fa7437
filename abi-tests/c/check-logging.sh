#!/bin/bash
# check-logging.sh PROBE - the library's logging, as gdrcopy 2.6 defines it:
# silent unless GDRCOPY_ENABLE_LOGGING is set (to anything, even empty);
# GDRCOPY_LOG_LEVEL picks the threshold (default 4: errors only; 1: all);
# every line starts with "DBG:  ", "INFO: ", "WARN: " or "ERR:  " and goes to
# stderr; a failing gdr_open says why. Runs PROBE on the emulator, whose
# settings come from the environment (LD_PRELOAD etc. set by the caller).
set -u
probe=$1
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "check-logging: FAILED: $*"
    sed 's/^/    stderr: /' "$tmp/err" | head -20
}

# run NAME MODE [VAR=VALUE...]: the probe with a clean logging environment.
run() {
    local name=$1 mode=$2
    shift 2
    env -u GDRCOPY_ENABLE_LOGGING -u GDRCOPY_LOG_LEVEL "$@" "$probe" "$mode" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -ne 0 ]; then bad "$name: probe exited $rc ($(tr '\n' ' ' <"$tmp/out"))"; return 1; fi
    ok
}
silent() { if [ -s "$tmp/err" ]; then bad "$1: wrote to stderr"; else ok; fi; }
has() { if grep -qE -- "$2" "$tmp/err"; then ok; else bad "$1: no stderr line matching /$2/"; fi; }
hasnt() { if grep -qE -- "$2" "$tmp/err"; then bad "$1: stderr line matching /$2/"; else ok; fi; }
prefixed() {
    if grep -vqE '^(DBG:  |INFO: |WARN: |ERR:  )' "$tmp/err"; then bad "$1: line without a level prefix"; else ok; fi
    if grep -qE '^(DBG|INFO|WARN|ERR)' "$tmp/out"; then bad "$1: log line on stdout"; else ok; fi
}

# Silent by default: a probe open/close, an error, a failed open.
run "default probe" probe && silent "default probe"
run "default error" error && silent "default error"
run "default error, level 1 without enable" error GDRCOPY_LOG_LEVEL=1 && silent "level without enable"
run "default fail" fail GDRSIM_NO_DEVICE=1 GDRSIM_DMABUF=0 && silent "default fail"

# Enabled at the default level: errors only.
run "enabled probe" probe GDRCOPY_ENABLE_LOGGING=1 && silent "enabled probe (no error, level 4)"
run "enabled error" error GDRCOPY_ENABLE_LOGGING=1 && { has "enabled error" '^ERR:  '; prefixed "enabled error"; hasnt "enabled error" '^(DBG|INFO|WARN)'; }
run "enabled empty" error GDRCOPY_ENABLE_LOGGING= && has "GDRCOPY_ENABLE_LOGGING empty" '^ERR:  '
run "enabled 0" error GDRCOPY_ENABLE_LOGGING=0 && has "GDRCOPY_ENABLE_LOGGING=0" '^ERR:  '

# Levels.
run "level 1" error GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 && {
    has "level 1" '^INFO: '; has "level 1" '^ERR:  '; prefixed "level 1"; }
run "level 2" error GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 && {
    has "level 2" '^INFO: '; hasnt "level 2" '^DBG:  '; prefixed "level 2"; }
run "level 0" probe GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=0 && has "level 0 prints all" '^INFO: '
run "level junk" probe GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=junk && has "non-numeric level prints all" '^INFO: '
run "level 5" error GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=5 && silent "level 5"

# Upstream's DEBUG line of CPU features at every gdr_open, in its words.
case "$(uname -m)" in
x86_64)
    run "cpu flags" probe GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 &&
        has "cpu flags: upstream's line" '^DBG:  vendor_intel=[01] movdir64b=[01] movdiri=[01] avx512=[01] avx2=[01] sse4_1=[01] avx=[01] sse=[01] sse2=[01]$' ;;
aarch64)
    run "cpu flags" probe GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 &&
        has "cpu flags: upstream's line" '^DBG:  ls64=[01] neon=[01] sve=[01]$' ;;
esac
run "gdrdrv chosen" probe GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 &&
    has "gdrdrv chosen: upstream's line" '^INFO: Using gdrdrv backend$'

# A failed open says why.
run "no device" fail GDRSIM_NO_DEVICE=1 GDRSIM_DMABUF=0 GDRCOPY_ENABLE_LOGGING=1 && {
    has "no device" '^ERR:  .*(errno=2|No such file or directory)'; prefixed "no device"; }
run "device 0600" fail GDRSIM_DEVICE_MODE=0600 GDRSIM_AS_USER=1 GDRSIM_DMABUF=0 GDRCOPY_ENABLE_LOGGING=1 && {
    has "device 0600" '^ERR:  .*(errno=13|Permission denied)'; prefixed "device 0600"; }
if [ "${GDRAPI_TEST_OURS:-0}" = 1 ]; then
    # This library also tells how to fix it.
    run "no device, hint" fail GDRSIM_NO_DEVICE=1 GDRSIM_DMABUF=0 GDRCOPY_ENABLE_LOGGING=1 &&
        has "no device: names the driver and how to load it" '^ERR:  .*gdrdrv.*(modprobe|insmod|load|mknod)|^ERR:  .*(modprobe|insmod|load|mknod).*gdrdrv'
    run "device 0600, hint" fail GDRSIM_DEVICE_MODE=0600 GDRSIM_AS_USER=1 GDRSIM_DMABUF=0 GDRCOPY_ENABLE_LOGGING=1 &&
        has "device 0600: tells about permissions" '^ERR:  .*([Pp]ermission|udev|chmod|mode)'
fi

echo "check-logging"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
