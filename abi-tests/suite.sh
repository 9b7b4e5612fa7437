# suite.sh - the shell harness of the backend suites (abi-tests/dmabuf/run.sh,
# abi-tests/vulkan/run.sh): source it, set LOGS, SUITE_UNSET and SUITE_ENV, call case_, also
# and absent, then suite_done.
#
#   LOGS         directory for one log per case
#   SUITE_UNSET  variables removed from every case's environment (the ones cases set)
#   SUITE_ENV    VAR=VALUE words every case starts with (the emulator, logging on)
pass=0 fail=0

# case_ NAME PATTERN [VAR=VALUE...] -- PROGRAM ARGS...
# Runs PROGRAM with SUITE_ENV and the variables; passes when it exits 0 and its output (stdout
# and stderr) matches the extended regex PATTERN ("" = no check).
case_() {
    local name=$1 pattern=$2
    shift 2
    local vars=()
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    local log=$LOGS/$name.log unset=() v
    for v in $SUITE_UNSET; do unset+=(-u "$v"); done
    env "${unset[@]}" $SUITE_ENV "${vars[@]}" "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL $name: exit status $rc (log: $log)"; sed 's/^/    /' "$log" | tail -25
        fail=$((fail + 1)); return
    fi
    if [ -n "$pattern" ] && ! grep -Eq "$pattern" "$log"; then
        echo "FAIL $name: output lacks /$pattern/ (log: $log)"; sed 's/^/    /' "$log" | tail -25
        fail=$((fail + 1)); return
    fi
    echo "ok   $name"
    pass=$((pass + 1))
}

# also NAME PATTERN: the log of an earlier case matches PATTERN too.
also() {
    if grep -Eq "$2" "$LOGS/$1.log"; then
        echo "ok   $1: /$2/"; pass=$((pass + 1))
    else
        echo "FAIL $1: output lacks /$2/"; fail=$((fail + 1))
    fi
}

# absent NAME PATTERN: the log of an earlier case does not match PATTERN.
absent() {
    if grep -Eq "$2" "$LOGS/$1.log"; then
        echo "FAIL $1: output has /$2/"; fail=$((fail + 1))
    else
        echo "ok   $1: no /$2/"; pass=$((pass + 1))
    fi
}

# suite_done NAME: the summary line; the exit status of the suite.
suite_done() {
    echo "$1 suite: $pass passed, $fail failed"
    [ $fail -eq 0 ]
}
