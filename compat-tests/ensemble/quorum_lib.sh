# Helpers of the quorum security suites (quorum_tls.sh, quorum_sasl.sh): 3-member
# ensembles from ensemble/lib.sh on BASE, member I's ports BASE+10*(I-1)+1.. (client,
# quorum, election). Source after lib.sh and need_kazoo_and_keel (VENV).
#   kz write|read PORT PATH [DATA]; replicates FROM_PORT TO_PORT PATH; reads_back PORT
#   PATH DATA; DIRS (stopped on exit); cport/qport/eport BASE I; pick_base BASE; running DIR; modes_of DIR I...;
#   wait_modes DIR WANT I...; stays_out DIR; logged FILE... -- PATTERN;
#   mixed_forms LABEL KINDS DIR BASE ZK_MEMBER KEEL_MEMBER WHAT PREFIX;
#   restart_member DIR I (its zoo.cfg lines matching RESTART_DROP replaced by
#   $ENSEMBLE_MEMBER_CFG I's)
# The ensembles a suite started (it adds each DIR): stopped when the suite exits.
DIRS=()
cleanup() { local d; for d in "${DIRS[@]}"; do stop_ensemble "$d"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Kazoo: `write PORT PATH DATA` creates PATH; `read PORT PATH` syncs and prints its data.
kz() {
  "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from kazoo.client import KazooClient
op, port, path = sys.argv[1:4]
zk = KazooClient(hosts="127.0.0.1:" + port, timeout=10)
zk.start(timeout=20)
if op == "write":
    zk.create(path, sys.argv[4].encode(), makepath=True)
    print("written")
else:
    zk.sync(path)
    print(zk.get(path)[0].decode())
zk.stop()
PY
}
replicates() { # FROM_PORT TO_PORT PATH
  [ "$(kz write "$1" "$3" "via-$1")" = written ] && reads_back "$2" "$3" "via-$1"
}
reads_back() { # PORT PATH DATA
  local got; got=$(kz read "$1" "$2")
  [ "$got" = "$3" ] || { echo "  $2 on port $1: '$got', wanted '$3'" >&2; return 1; }
}

cport() { echo $(($1 + 10 * ($2 - 1) + 1)); }  # BASE I: member I's client port
# The suites' ports lie below Linux's ephemeral range (32768-60999: an outgoing
# connection's local port there can take a member's port before it binds), and a
# socket of an earlier run may still hold one: each ensemble takes BASE, or BASE+500
# when one of BASE's ports is in use.
pick_base() { # BASE
  local i p
  for i in 1 2 3; do
    for p in 1 2 3; do
      if [ -n "$(ss -Htan "( sport = :$(($1 + 10 * (i - 1) + p)) )" 2>/dev/null)" ]; then
        echo $(($1 + 500)); return
      fi
    done
  done
  echo "$1"
}
running() { # DIR: every member's process is alive
  local i
  for i in 1 2 3; do
    kill -0 "$(cat "$1/m$i/pid")" 2>/dev/null || { tail -n 3 "$1/m$i/log" >&2; return 1; }
  done
}
qport() { echo $(($1 + 10 * ($2 - 1) + 2)); }
eport() { echo $(($1 + 10 * ($2 - 1) + 3)); }

modes_of() { # DIR I... : the members' modes, sorted, space-separated
  local dir=$1 i; shift
  for i in "$@"; do member_mode "$(cat "$dir/m$i/port")"; done | sort | tr '\n' ' '
}
wait_modes() { # DIR WANT I...   (WANT: "follower leader ")
  local dir=$1 want=$2; shift 2
  for _ in $(seq 150); do [ "$(modes_of "$dir" "$@")" = "$want" ] && return 0; sleep 0.2; done
  echo "  modes of members $*: '$(modes_of "$dir" "$@")', wanted '$want'" >&2
  return 1
}
# member 3 serves nobody for 4 s (it is LOOKING, refused by the others)
stays_out() { # DIR
  for _ in $(seq 8); do [ -z "$(member_mode "$(cat "$1/m3/port")")" ] || return 1; sleep 0.5; done
}
logged() { # FILE... -- PATTERN : some file has a line matching PATTERN
  local files=() f
  while [ "$1" != -- ]; do files+=("$1"); shift; done
  for _ in $(seq 20); do
    for f in "${files[@]}"; do grep -qE "$2" "$f" 2>/dev/null && return 0; done
    sleep 0.25
  done
  echo "  no line matching '$2' in ${files[*]}" >&2
  return 1
}

# Check 3 of both suites: KINDS (a keel / ZooKeeper mix) with WHAT on every member forms
# on DIR and BASE, and a write via ZooKeeper reads back on keel and the reverse (paths
# PREFIX-zk, PREFIX-keel).
mixed_forms() { # LABEL KINDS DIR BASE ZK_MEMBER KEEL_MEMBER WHAT PREFIX
  check "$1: $2 with $7 on every member forms" start_ensemble "$2" "$3" "$4"
  check "$1: $2: a write via ZooKeeper (member $5) reads back on keel (member $6)" \
    replicates "$(cport "$4" "$5")" "$(cport "$4" "$6")" "$8-zk"
  check "$1: $2: a write via keel (member $6) reads back on ZooKeeper (member $5)" \
    replicates "$(cport "$4" "$6")" "$(cport "$4" "$5")" "$8-keel"
}

# Stops member I (TERM, then KILL after 5 s) and starts it again on the same dataDir,
# its zoo.cfg's lines matching the sed regex RESTART_DROP replaced by what the suite's
# ENSEMBLE_MEMBER_CFG function gives for I now.
restart_member() { # DIR I
  local i=$2 m=$1/m$2
  kill "$(cat "$m/pid")" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$(cat "$m/pid")" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$(cat "$m/pid")" 2>/dev/null
  sed -i "/$RESTART_DROP/d" "$m/zoo.cfg"
  "$ENSEMBLE_MEMBER_CFG" "$i" >> "$m/zoo.cfg"
  mv "$m/log" "$m/log.$(date +%s%N)"
  setsid "$(cat "$m/cmd")" "$m/zoo.cfg" >"$m/log" 2>&1 &
  echo $! > "$m/pid"
}
