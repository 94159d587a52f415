#!/usr/bin/env bash
# Exact checks on the processes the scripts start (scripts/up, scripts/down, scripts/controlplane,
# test/node/cluster, test/e2e/run), sourced, never run.
#
# Why exact: `setsid CMD &` forks; until the child has exec'd CMD (a loaded machine can delay that
# by seconds), /proc/PID/cmdline and /proc/PID/exe still name bash or setsid. A start-up check that
# reads "is it CMD?" in that window sees a process that died when it is only starting; that was
# scripts/up's "the webhook exited" one run in four. So a check asks one of two questions:
#   proc_running PID      has this process (our own child, or one recorded a moment ago) not
#                         exited? Any state but zombie/dead; does not look at what it runs.
#   proc_runs PID BIN     is PID running the executable BIN? (/proc/PID/exe, resolved; not the
#                         command line, which a process may rewrite.) For pid files of earlier
#                         runs, where the pid may have been reused by another program.
# and a start waits for the exec before it looks at what runs (proc_wait_exec).
# Functions return non-zero, never exit.

# proc_state PID: the one-letter state of /proc/PID/stat (R, S, D, Z, ...), empty when gone. The
# command name in parentheses may itself hold spaces and parentheses: match the last ") ".
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  printf '%s' "${stat%% *}"
}

# proc_running PID: the process exists and has not exited.
proc_running() {
  local st
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  st=$(proc_state "$1") || return 1
  [[ -n $st && $st != Z && $st != X && $st != x ]]
}

# proc_runs PID BIN: PID is running and executes BIN (after a rebuild replaced the file, the
# kernel names it "BIN (deleted)": still BIN).
proc_runs() {
  local exe want
  proc_running "$1" || return 1
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  want=$(readlink -f "$2" 2>/dev/null) || return 1
  [[ ${exe% (deleted)} == "$want" ]]
}

# proc_start PIDFILE LOGFILE CMD...: starts CMD detached (own session, no stdin, output appended to
# LOGFILE) and records its pid. In a non-interactive shell the background child is not a process
# group leader, so setsid(1) calls setsid() and execs CMD in that same process: the recorded pid is
# CMD's once the exec has happened (proc_wait_exec).
proc_start() {
  local pidfile="$1" logfile="$2"; shift 2
  setsid "$@" </dev/null >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
}

# proc_wait_exec PID BIN SECONDS: waits until PID executes BIN. Returns 0 then; 1 when the process
# exited first (it never ran BIN, or BIN exited at once); 2 when SECONDS passed with the process
# still running something else.
proc_wait_exec() {
  local pid="$1" bin="$2" deadline=$((SECONDS + $3))
  while ((SECONDS <= deadline)); do
    proc_runs "$pid" "$bin" && return 0
    proc_running "$pid" || return 1
    sleep 0.02
  done
  proc_runs "$pid" "$bin" && return 0
  proc_running "$pid" || return 1
  return 2
}

# proc_pidfile_runs PIDFILE BIN: the pid recorded in PIDFILE is running BIN.
proc_pidfile_runs() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  proc_runs "$pid" "$2"
}

# proc_stop PIDFILE BIN [SECONDS]: when the pid in PIDFILE runs BIN (not whatever reused a stale
# pid), SIGTERM, up to SECONDS (default 10) for it to exit (a zombie counts as exited), then
# SIGKILL and 5 s more; PIDFILE is removed either way. Returns 0 when it stopped a process, 1 when
# none was running.
proc_stop() {
  local pidfile="$1" bin="$2" secs="${3:-10}" pid i rc=1
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if proc_runs "$pid" "$bin"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do proc_running "$pid" || break; sleep 0.1; done
    if proc_running "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do proc_running "$pid" || break; sleep 0.1; done
    fi
    rc=0
  fi
  rm -f "$pidfile"
  return $rc
}
