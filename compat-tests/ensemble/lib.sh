#!/usr/bin/env bash
# A 3-member ensemble on loopback, of keel or of real ZooKeeper 3.8. Source this file.
#   start_ensemble KIND DIR BASE [EXTRA_CFG]   KIND = keel | zk, or one per member
#                                             (keel,zk,zk: a mixed ensemble, member i
#                                             the i-th; the last kind repeats for more);
#                                             waits for one leader and two followers
#   stop_ensemble DIR
#   ensemble_port DIR leader|follower         the client port of a member in that mode
# Member i (1..3) has clientPort BASE+10*(i-1)+1, quorum port +2, election port +3,
# dataDir DIR/m<i>/data; DIR/m<i>/{zoo.cfg,port,pid,log,cmd} (cmd: the program that runs
# a member on its zoo.cfg, so a test can restart one after kill -9).
# ENSEMBLE_PROXY_BASE, when set, makes member i dial member j (j != i) through a proxy the
# test runs: quorum port ENSEMBLE_PROXY_BASE+10*(i-1)+2*(j-1), election port one above
# (each member still listens on its own ports; only the addresses it dials change).
# ENSEMBLE_ADMIN_BASE, when set, enables each member's AdminServer on port
# ENSEMBLE_ADMIN_BASE+i (ZooKeeper then needs ZK_CP_EXTRA: Jetty and Jackson jars).
# ENSEMBLE_SERVER_CLIENT_PORTS=1 writes each member's client address into the server.N
# lines (`;127.0.0.1:PORT`), as ZooKeeper's dynamic-config form has it.
# ENSEMBLE_DYNAMIC_CONFIG=1 writes the server.N lines, each with its client address
# (`;127.0.0.1:PORT`), into DIR/m<i>/zoo.cfg.dynamic instead of zoo.cfg, which names it
# with `dynamicConfigFile=` (ZooKeeper's dynamic-reconfig layout; ENSEMBLE_PROXY_BASE
# still applies to the addresses in it).
# ENSEMBLE_OBSERVERS=K (0) adds members 4..3+K as observers (`server.N=...:observer`
# on every member, `peerType=observer` in theirs), ports numbered as above; the ensemble
# is then formed when they observe too.
# ENSEMBLE_MEMBER_CFG, when set, names a function called with I whose output is added to
# member I's zoo.cfg (per-member settings, e.g. each member's own key store).
# ENSEMBLE_NO_WAIT=1 makes start_ensemble return once the members are started, for a
# test that expects the ensemble not to form in full.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib.sh"

ENSEMBLE_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# need_kazoo_and_keel: sets VENV to Kazoo's venv (kazoo/setup.sh) and checks KEEL_BIN;
# exits 2 when either is missing.
need_kazoo_and_keel() {
  VENV=$(bash "$ENSEMBLE_HERE/../kazoo/setup.sh" | tail -n1) || { echo "kazoo/setup.sh failed" >&2; exit 2; }
  if [ ! -x "$KEEL_BIN" ]; then
    echo "keel binary not found at $KEEL_BIN (build it: cargo build --release, or set KEEL_BIN)" >&2
    exit 2
  fi
}

member_mode() { # PORT
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && cat <&3' _ "$1" 2>/dev/null \
    | sed -n 's/^Mode: //p'
}

ensemble_members() { seq $((3 + ${ENSEMBLE_OBSERVERS:-0})); }

wait_ensemble() { # DIR [TRIES]
  local dir=$1 modes="" want="follower follower leader " i
  for i in $(seq "${ENSEMBLE_OBSERVERS:-0}"); do want="${want}observer "; done
  for _ in $(seq "${2:-300}"); do
    modes=$(for i in $(ensemble_members); do member_mode "$(cat "$dir/m$i/port")"; done | sort | tr '\n' ' ')
    [ "$modes" = "$want" ] && return 0
    sleep 0.2
  done
  echo "ensemble in $dir did not form: modes '$modes'" >&2
  return 1
}

member_cmd() { # KIND: the program that runs a member of that kind on its zoo.cfg
  case $1 in
  keel) echo "$KEEL_BIN" ;;
  zk) echo "$ENSEMBLE_HERE/zk-exec.sh" ;;
  *) echo "start_ensemble: unknown kind $1" >&2; return 2 ;;
  esac
}

ensemble_server_lines() { # I BASE: the server.N lines member I is configured with
  local i=$1 base=$2 j q client
  for j in $(ensemble_members); do
    client=""
    if [ -n "${ENSEMBLE_SERVER_CLIENT_PORTS:-}${ENSEMBLE_DYNAMIC_CONFIG:-}" ]; then
      client=";127.0.0.1:$((base + 10 * (j - 1) + 1))"
    fi
    if [ -n "${ENSEMBLE_PROXY_BASE:-}" ] && [ "$j" != "$i" ] && [ "$j" -le 3 ]; then
      q=$((ENSEMBLE_PROXY_BASE + 10 * (i - 1) + 2 * (j - 1)))
      echo "server.$j=127.0.0.1:$q:$((q + 1))"
    else
      echo "server.$j=127.0.0.1:$((base + 10 * (j - 1) + 2)):$((base + 10 * (j - 1) + 3))$( [ "$j" -gt 3 ] && echo :observer)$client"
    fi
  done
}

start_ensemble() { # KIND DIR BASE [EXTRA_CFG]
  local dir=$2 base=$3 extra=${4:-} kinds cmd i m
  IFS=, read -r -a kinds <<< "$1"
  for i in "${kinds[@]}"; do member_cmd "$i" >/dev/null || return 2; done
  rm -rf "$dir"; mkdir -p "$dir"
  for i in $(ensemble_members); do
    cmd=$(member_cmd "${kinds[$(( i <= ${#kinds[@]} ? i - 1 : ${#kinds[@]} - 1 ))]}")
    m=$dir/m$i; mkdir -p "$m/data"; echo $i > "$m/data/myid"
    {
      echo "tickTime=${ENSEMBLE_TICK_MS:-500}"; echo "initLimit=10"; echo "syncLimit=5"
      echo "dataDir=$m/data"; echo "clientPort=$((base + 10 * (i - 1) + 1))"
      echo "maxClientCnxns=0"; echo "4lw.commands.whitelist=*"
      if [ -n "${ENSEMBLE_ADMIN_BASE:-}" ]; then
        echo "admin.enableServer=true"; echo "admin.serverPort=$((ENSEMBLE_ADMIN_BASE + i))"
      else
        echo "admin.enableServer=false"
      fi
      if [ -n "${ENSEMBLE_DYNAMIC_CONFIG:-}" ]; then
        echo "dynamicConfigFile=$m/zoo.cfg.dynamic"
        ensemble_server_lines "$i" "$base" > "$m/zoo.cfg.dynamic"
      else
        ensemble_server_lines "$i" "$base"
      fi
      [ "$i" -gt 3 ] && echo "peerType=observer"
      [ -n "$extra" ] && echo "$extra"
      [ -n "${ENSEMBLE_MEMBER_CFG:-}" ] && "$ENSEMBLE_MEMBER_CFG" "$i"
    } > "$m/zoo.cfg"
    echo "$((base + 10 * (i - 1) + 1))" > "$m/port"
    echo "$cmd" > "$m/cmd"
    setsid "$cmd" "$m/zoo.cfg" >"$m/log" 2>&1 &
    echo $! > "$m/pid"
  done
  [ -n "${ENSEMBLE_NO_WAIT:-}" ] || wait_ensemble "$dir"
}

stop_ensemble() { # DIR
  local p
  for p in "$1"/m*/pid; do [ -f "$p" ] && { kill -CONT "$(cat "$p")" 2>/dev/null; kill "$(cat "$p")" 2>/dev/null; }; done
  sleep 1
  for p in "$1"/m*/pid; do [ -f "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null; done
  true
}

ensemble_port() { # DIR leader|follower|observer
  local i p
  for i in $(ensemble_members); do
    p=$(cat "$1/m$i/port"); [ "$(member_mode "$p")" = "$2" ] && { echo "$p"; return 0; }
  done
  return 1
}

# ensemble_differential NAME CHECK_PY BASE WORK [EXTRA_CFG]: starts a ZooKeeper ensemble,
# then a keel one, on BASE with EXTRA_CFG; after SETTLE_S seconds (0) runs
# `python CHECK_PY DIR` against each (its stdout is the transcript, WORK/KIND.out), stops
# it, and compares the two transcripts. Prints one summary line "NAME: PASS|FAIL (...)";
# returns nonzero on a failed check or any difference. Needs VENV (need_kazoo_and_keel).
ensemble_differential() {
  local name=$1 check_py=$2 base=$3 work=$4 extra=${5:-} kind rc
  for kind in zk keel; do
    start_ensemble "$kind" "$work/$kind" "$base" "$extra" || { tail -n 20 "$work/$kind"/m*/log >&2; rc=1; }
    if [ "${rc:-0}" -eq 0 ]; then
      disown -a  # checks stop and start members: no job notices from this shell
      sleep "${SETTLE_S:-0}"
      "$VENV/bin/python" "$check_py" "$work/$kind" > "$work/$kind.out" 2> "$work/$kind.err"
      rc=$?
      [ $rc -eq 0 ] || tail -n 20 "$work/$kind.err" >&2
    fi
    stop_ensemble "$work/$kind"
    if [ "$rc" -ne 0 ]; then
      echo "$name: FAIL (the $kind ensemble's check failed; see $work)"
      return 1
    fi
  done
  if diff -u --label zk --label keel "$work/zk.out" "$work/keel.out" > "$work/diff"; then
    echo "$name: PASS (zk vs keel: $(wc -l < "$work/zk.out") facts identical; see $work)"
  else
    cat "$work/diff"
    echo "$name: FAIL (zk vs keel differ; see $work)"
    return 1
  fi
}
