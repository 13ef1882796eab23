#!/bin/bash
# Locks die with their owner (issue 17 item 3). For POSIX (F_SETLKW), OFD (F_OFD_SETLKW) and
# flock(LOCK_EX) locks, on one mount and across two:
#   holder killed -9           -> a fresh process takes the lock, non-blocking, within 1 s;
#   waiter killed -9 in a wait -> it exits at once, the holder still holds the lock, and after
#                                 the holder unlocks a fresh process takes it within 1 s;
#   waiter hit by SIGALRM      -> the call fails with EINTR, the waiter (still alive, fd open)
#                                 is never granted the lock afterwards: after the holder
#                                 unlocks, fresh processes take it within 1 s, twice;
#   closes and forks           -> a POSIX lock goes at the close of any descriptor of the file
#                                 by its process, and with the process (not with a child that
#                                 shares the descriptor); OFD and flock locks stay until the
#                                 last close of their open file description (a dup, a child);
# then the conflict table: POSIX against POSIX, flock against flock, OFD against POSIX conflict
# (EAGAIN, then free after the unlock); flock and POSIX/OFD locks never conflict (Linux). Last,
# more blocked waiters than a mount has FUSE worker threads (mount C, max_threads=2): the mount
# still answers, and every waiter killed -9 exits at once.
# The test shell keeps every case's file open on both mounts, as another process of a real
# application would, so that a lock is freed by its owner's close and not by the mount's last
# close of the file. Across mounts the second mount opens read-only (a write open there would
# recall the first mount's write lease, a cost these cases do not measure), so its POSIX and OFD
# requests are read locks: they
# conflict with the holder's write lock, and the check that a withdrawn waiter was never granted
# is a write lock taken on the first mount. lock_tool.py is the lock-taking process.
source "$(dirname "$0")/lib.sh"
TOOL="$(dirname "$0")/lock_tool.py"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
C=$AQ_SCRATCH/c
aq_start_cluster
aq_mount "$A"
aq_mount "$B"
aq_mount "$C" -o max_threads=2

declare -a FAILED=()
declare -a CASE_PIDS=()
CASE=""
CD=""
N=0
# Lock processes are killed -9 without waiting (one stuck in a lock call would not die before its
# mount does); teardown then stops the mounts, which ends any such call.
trap 'rc=$?; set +e; kill -KILL "${CASE_PIDS[@]}" 2>/dev/null; (exit $rc); aq_teardown' EXIT

bad() {
  aq_log "FAIL [$CASE] $*"
  FAILED+=("$CASE: $*")
}

# lt ARGS...: a one-shot lock_tool.py; its exit status is returned, its output logged.
lt() {
  local rc=0 out
  out=$(timeout "$T" /usr/bin/python3 "$TOOL" "$@" 2>&1) || rc=$?
  aq_log "  lock_tool $1 $2 ${3#"$AQ_SCRATCH"/}: rc=$rc $out"
  return $rc
}

# lt_bg NAME ARGS...: a lock_tool.py in the background (output in $CD/NAME.out); sets BG.
lt_bg() {
  local name=$1
  shift
  /usr/bin/python3 "$TOOL" "$@" >"$CD/$name.out" 2>&1 &
  BG=$!
  CASE_PIDS+=("$BG")
}

# Inside fcntl(2) (72) or flock(2) (73) on x86-64: blocked in the lock call.
in_lock_call() {
  local nr
  read -r nr _ <"/proc/$1/syscall" && { [ "$nr" = 72 ] || [ "$nr" = 73 ]; }
}

wait_for_file() { aq_wait_until "$1" test -e "$2"; }

wait_gone() {  # wait_gone SECONDS PID: true when PID exited within SECONDS
  local deadline=$((SECONDS + $1))
  while kill -0 "$2" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.02
  done
}

# begin_case NAME HOLD_MOUNT OTHER_MOUNT [nokeep]: a fresh file, open on both mounts in this
# shell (unless nokeep).
begin_case() {
  CASE=$1
  N=$((N + 1))
  CD=$AQ_SCRATCH/case$N
  mkdir -p "$CD"
  HF=$2/lk$N
  OF=$3/lk$N
  : >"$HF"
  aq_wait_for 5 "lk$N visible" test -e "$OF"
  KEEP=${4:-keep}
  [ "$KEEP" = nokeep ] || exec 8<"$HF" 9<"$OF"
  aq_log "case $CASE (case$N)"
}

end_case() {
  local p
  [ ${#CASE_PIDS[@]} -eq 0 ] || kill -KILL "${CASE_PIDS[@]}" 2>/dev/null || true
  for p in "${CASE_PIDS[@]}"; do
    wait_gone 5 "$p" || bad "process $p still there 5 s after kill -9"
  done
  CASE_PIDS=()
  [ "$KEEP" = nokeep ] || exec 8<&- 9<&-
}

# start_holder KIND FILE: a holder that has the lock (fails the case if it cannot take it).
start_holder() {
  lt_bg holder hold "$1" "$2" "$CD" --within 1
  HOLDER=$BG
  wait_for_file 5 "$CD/held" && return 0
  bad "holder did not get the lock: $(cat "$CD/holder.out")"
  return 1
}

expect_held() {  # expect_held KIND FILE WHAT
  local rc=0
  lt take "$1" "$2" || rc=$?
  [ $rc = 3 ] || bad "$3: expected the lock held (rc 3), got rc $rc"
}

expect_free_within_1s() {  # expect_free_within_1s KIND FILE WHAT
  local rc=0
  lt take "$1" "$2" --within 1 || rc=$?
  [ $rc = 0 ] || bad "$3: a fresh process did not get the lock within 1 s (rc $rc)"
}

unlock_holder() {
  touch "$CD/unlock"
  wait_for_file 5 "$CD/unlocked" || bad "holder did not unlock: $(cat "$CD/holder.out")"
}

# case_holder_killed LABEL HOLD_KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT
case_holder_killed() {
  begin_case "$1 holder killed -9" "$3" "$5"
  if start_holder "$2" "$HF"; then
    expect_held "$4" "$OF" "probe while the holder lives"
    kill -KILL "$HOLDER"
    wait_gone 5 "$HOLDER" || bad "killed holder did not exit"
    expect_free_within_1s "$4" "$OF" "after the holder was killed"
    expect_free_within_1s "$2" "$HF" "after the holder was killed (holder's mount)"
  fi
  end_case
}

# case_waiter_killed LABEL HOLD_KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT
case_waiter_killed() {
  begin_case "$1 waiter killed -9" "$3" "$5"
  if start_holder "$2" "$HF"; then
    lt_bg waiter wait "$4" "$OF" "$CD"
    local waiter=$BG
    aq_wait_until 5 in_lock_call "$waiter" ||
      bad "waiter not blocked in the lock call: $(cat "$CD/waiter.out")"
    kill -KILL "$waiter"
    wait_gone 2 "$waiter" || bad "killed waiter still in the lock call 2 s later"
    expect_held "$4" "$OF" "probe after the waiter was killed"
    unlock_holder
    expect_free_within_1s "$2" "$HF" "after the unlock"
    expect_free_within_1s "$4" "$OF" "after the unlock (waiter's mount)"
    [ ! -e "$CD/acquired" ] || bad "the killed waiter was granted the lock"
  fi
  end_case
}

# case_waiter_alarm LABEL HOLD_KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT
case_waiter_alarm() {
  begin_case "$1 waiter interrupted by SIGALRM" "$3" "$5"
  if start_holder "$2" "$HF"; then
    lt_bg waiter wait "$4" "$OF" "$CD" --alarm 0.5
    local waiter=$BG
    if wait_for_file 3 "$CD/eintr"; then
      local took
      took=$(cat "$CD/eintr")
      aq_log "  waiter got EINTR after ${took}s"
      awk -v t="$took" 'BEGIN { exit !(t < 1.5) }' || bad "EINTR only after ${took}s (alarm at 0.5 s)"
    else
      bad "waiter got no EINTR within 3 s: $(cat "$CD/waiter.out")"
    fi
    kill -0 "$waiter" 2>/dev/null || bad "interrupted waiter exited: $(cat "$CD/waiter.out")"
    expect_held "$4" "$OF" "probe after the interrupt"
    unlock_holder
    expect_free_within_1s "$2" "$HF" "after the unlock"
    expect_free_within_1s "$2" "$HF" "after the unlock, again"
    expect_free_within_1s "$4" "$OF" "after the unlock (waiter's mount)"
    [ ! -e "$CD/acquired" ] || bad "the interrupted waiter was granted the lock"
  fi
  end_case
}

# case_closes LABEL KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT: the holder closes a second open of
# the file, then its first descriptor, then a dup of it.
case_closes() {
  begin_case "$1 closes" "$3" "$5"
  lt_bg holder closes "$2" "$HF" "$CD" --within 1
  if wait_for_file 5 "$CD/held"; then
    local name
    for name in other first dup; do
      touch "$CD/close-$name"
      wait_for_file 5 "$CD/closed-$name" || bad "holder did not close $name: $(cat "$CD/holder.out")"
      if [ "${2%-*}" = posix ]; then
        # Any close by the owning process frees a POSIX lock.
        [ $name != other ] || expect_free_within_1s "$4" "$OF" "after closing another open"
      elif [ $name = dup ]; then
        expect_free_within_1s "$4" "$OF" "after the last close of the open file description"
      else
        expect_held "$4" "$OF" "after closing $name (the description is still open)"
      fi
    done
  else
    bad "holder did not get the lock: $(cat "$CD/holder.out")"
  fi
  end_case
}

# case_fork LABEL KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT: the holder forks, then is killed -9,
# then its child is.
case_fork() {
  begin_case "$1 fork" "$3" "$5"
  lt_bg holder hold "$2" "$HF" "$CD" --within 1 --fork 1
  HOLDER=$BG
  if wait_for_file 5 "$CD/held" && wait_for_file 5 "$CD/child"; then
    local child
    child=$(cat "$CD/child")
    CASE_PIDS+=("$child")
    kill -KILL "$HOLDER"
    wait_gone 5 "$HOLDER" || bad "killed holder did not exit"
    if [ "${2%-*}" = posix ]; then
      expect_free_within_1s "$4" "$OF" "after the holder was killed (a child has the fd)"
    else
      expect_held "$4" "$OF" "after the holder was killed (its child shares the description)"
    fi
    kill -KILL "$child"
    wait_gone 5 "$child" || bad "killed child did not exit"
    expect_free_within_1s "$4" "$OF" "after the child was killed too"
  else
    bad "holder did not get the lock or fork: $(cat "$CD/holder.out")"
  fi
  end_case
}

# case_conflict LABEL HOLD_KIND HOLD_MOUNT OTHER_KIND OTHER_MOUNT CONFLICTS(yes|no)
case_conflict() {
  begin_case "$1 conflict" "$3" "$5"
  if start_holder "$2" "$HF"; then
    if [ "$6" = yes ]; then
      expect_held "$4" "$OF" "$4 against a held $2"
      unlock_holder
      expect_free_within_1s "$4" "$OF" "$4 after the $2 unlock"
    else
      local rc=0
      lt take "$4" "$OF" || rc=$?
      [ $rc = 0 ] || bad "$4 against a held $2 should not conflict (rc $rc)"
    fi
  fi
  end_case
}

# AQ_LOCK_CASES="holder_killed waiter_killed waiter_alarm closes fork conflict getlk many" and
# AQ_LOCK_TOPOLOGIES="one two" pick a subset (default: all).
want() { [ -z "${AQ_LOCK_CASES:-}" ] || [[ " $AQ_LOCK_CASES " == *" $1 "* ]]; }
start=$SECONDS
# Kinds on one mount (both sides write/exclusive) and across two (the second side read-only).
for topo in ${AQ_LOCK_TOPOLOGIES:-one two}; do
  if [ $topo = one ]; then
    OM=$A
    posix_o=posix-w ofd_o=ofd-w
  else
    OM=$B
    posix_o=posix-r ofd_o=ofd-r
  fi
  for c in case_holder_killed case_waiter_killed case_waiter_alarm case_closes case_fork; do
    want "${c#case_}" || continue
    $c "posix $topo" posix-w "$A" "$posix_o" "$OM"
    $c "ofd $topo" ofd-w "$A" "$ofd_o" "$OM"
    $c "flock $topo" flock-ex "$A" flock-ex "$OM"
  done
  want conflict || continue
  case_conflict "posix/posix $topo" posix-w "$A" "$posix_o" "$OM" yes
  case_conflict "flock/flock $topo" flock-ex "$A" flock-ex "$OM" yes
  case_conflict "ofd/posix $topo" ofd-w "$A" "$posix_o" "$OM" yes
  case_conflict "posix/ofd $topo" posix-w "$A" "$ofd_o" "$OM" yes
  case_conflict "flock/posix $topo" flock-ex "$A" "$posix_o" "$OM" no
  case_conflict "posix/flock $topo" posix-w "$A" flock-ex "$OM" no
  case_conflict "ofd/flock $topo" ofd-w "$A" flock-ex "$OM" no
done
# F_GETLK across mounts names the holder's write lock.
begin_case "getlk two" "$A" "$B"
if want getlk && start_holder posix-w "$HF"; then
  got=$(timeout "$T" /usr/bin/python3 "$TOOL" getlk posix-r "$OF" 2>&1) || bad "getlk: $got"
  [ "$got" = write ] || bad "F_GETLK on B saw '$got', expected write"
  unlock_holder
  got=$(timeout "$T" /usr/bin/python3 "$TOOL" getlk posix-r "$OF" 2>&1) || bad "getlk: $got"
  [ "$got" = unlocked ] || bad "F_GETLK on B after the unlock saw '$got'"
fi
end_case
# Four waiters blocked on mount C, which has two FUSE worker threads. The shell itself keeps
# nothing open on C and touches it only through commands under timeout.
begin_case "posix waiters past the worker threads" "$A" "$C" nokeep
if want many && start_holder posix-w "$HF"; then
  declare -a waiters=()
  for i in 1 2 3 4; do
    mkdir -p "$CD/w$i"
    /usr/bin/python3 "$TOOL" wait posix-r "$OF" "$CD/w$i" >"$CD/w$i.out" 2>&1 &
    waiters+=($!)
    CASE_PIDS+=($!)
  done
  for w in "${waiters[@]}"; do
    aq_wait_until 5 in_lock_call "$w" ||
      bad "waiter $w not blocked in the lock call (syscall $(cut -d' ' -f1 "/proc/$w/syscall" 2>&1))"
  done
  timeout 5 stat -c %s "$OF" >/dev/null 2>&1 &
  stat_pid=$!
  wait_gone 2 "$stat_pid" || bad "mount C did not answer a stat within 2 s while 4 waiters wait"
  kill -KILL "${waiters[@]}" 2>/dev/null || true
  for w in "${waiters[@]}"; do
    wait_gone 2 "$w" || bad "killed waiter $w still in the lock call 2 s later"
  done
  unlock_holder
  expect_free_within_1s posix-w "$HF" "after the unlock"
  CASE_PIDS+=("$stat_pid")
fi
end_case
aq_log "$N cases in $((SECONDS - start)) s, ${#FAILED[@]} failures"
if [ ${#FAILED[@]} -gt 0 ]; then
  printf '  %s\n' "${FAILED[@]}" >&2
  aq_fail "${#FAILED[@]} lock checks failed"
fi
echo "PASS locks"
