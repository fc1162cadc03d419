#!/usr/bin/env bash
# SASL DIGEST-MD5 for clients (issue 19), ZooKeeper vs keel, each a fresh standalone
# server with authProvider.1=SASLAuthenticationProvider, the JAAS file server.jaas
# (users super, alice, bob) as -Djava.security.auth.login.config and
# -Dzookeeper.superUser=super:
#  1. zkCli.sh differential: phases of commands, each a zkCli.sh whose JAAS Client
#     section logs in as one user (DIGEST-MD5), or without SASL: sasl ACLs (create,
#     setAcl/getAcl, allowed and denied access), whoami, the sasl super user, a wrong
#     password and an unknown user. Transcripts masked with ../zkcli/run.sh --mask and
#     diffed.
#  2. raw.py: raw-socket bad input (malformed tokens, a replayed response on a new
#     connection, tokens over 4096 bytes and over jute.maxbuffer, sasl before the
#     handshake, a null token, a token after completion), one line per outcome, diffed;
#     a bystander connection must answer after each case.
#  3. The zkCli.sh phases again against a follower of a 3-member keel ensemble (same
#     flags): the follower runs the exchange, and the writes it forwards carry the
#     connection's sasl (and super) ids to the leader's ACL checks (`auth` ACLs, super's
#     setAcl); diffed against ZooKeeper's standalone transcript.
#  4. Kerberos (GSSAPI): a KDC started here (kdc.sh, realm KEEL.TEST), each server with
#     a Krb5LoginModule Server section (zookeeper/localhost, keytab); zkCli.sh phases
#     whose Client section logs in from a keytab as alice or bob, without SASL, or as
#     mallory, a principal the KDC no longer knows: sasl ACLs for the Kerberos
#     identities, whoami, the refusal. Masked and diffed as 1. Then raw_gssapi.py: a
#     good exchange from raw tokens, a replayed AP-REQ, malformed tokens; diffed as 2.
#   usage: run.sh            Env: SASL_PORT_A / SASL_PORT_B (2130 / 2131),
#                            SASL_ENSEMBLE_BASE (2150: ports BASE+1..BASE+23),
#                            SASL_KDC_PORT (2145), KEEL_BIN.
# Exit 0 when every diff is empty. Work dir: ${WORK:-/tmp/keel-compat/sasl}.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"
# shellcheck source=../ensemble/lib.sh
source "$HERE/../ensemble/lib.sh"
PORT_A=${SASL_PORT_A:-2130}
PORT_B=${SASL_PORT_B:-2131}
ENSEMBLE_BASE=${SASL_ENSEMBLE_BASE:-2150}
WORK=${WORK:-/tmp/keel-compat/sasl}
ZKCLI=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
if [ ! -x "$KEEL_BIN" ]; then echo "sasl: FAIL (keel binary $KEEL_BIN not found)" >&2; exit 1; fi
rm -rf "$WORK"; mkdir -p "$WORK"

cat > "$WORK/server.jaas" <<'JAAS'
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="super_secret"
    user_alice="alice_pw"
    user_bob="bob_pw";
};
JAAS
client_jaas() { # USER PASSWORD -> file (with KRB5_CLIENT set: a Kerberos login of USER)
  local f=$WORK/client-$1-$2.jaas
  if [ -n "${KRB5_CLIENT:-}" ]; then
    printf 'Client {\n    com.sun.security.auth.module.Krb5LoginModule required\n    useKeyTab=true\n    keyTab="%s"\n    storeKey=true\n    useTicketCache=false\n    principal="%s@KEEL.TEST";\n};\n' "$KDC/$1.keytab" "$1" > "$f"
    echo "$f"; return
  fi
  printf 'Client {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    username="%s"\n    password="%s";\n};\n' "$1" "$2" > "$f"
  echo "$f"
}
FLAGS="-Djava.security.auth.login.config=$WORK/server.jaas -Dzookeeper.superUser=super"
export ZK_JVMFLAGS=$FLAGS SERVER_JVMFLAGS=$FLAGS
EXTRA_CFG='authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider'

# Phases: "USER PASSWORD" (or "- -": no SASL), then the commands, up to a blank line.
PHASES='alice alice_pw
whoami
create /s sdata sasl:alice:cdrwa
create /open odata
getAcl /s
get /s
setAcl /open sasl:bob:r
getAcl /open
get /open
create /bad x sasl:a@b@c:cdrwa
create /auth x auth::cdrwa
getAcl /auth

bob bob_pw
whoami
get /s
get /open
setAcl /open world:anyone:cdrwa
ls /

- -
whoami
get /s
getAcl /s
get /open
get /auth

super super_secret
whoami
get /s
setAcl /s sasl:bob:r
getAcl /s

alice wrong_pw
whoami
get /open

mallory mallory_pw
whoami
get /open
'

run_phases() { # KIND PORT TRANSCRIPT
  local kind=$1 port=$2 out=$3 user pass cmds
  : > "$out"
  while IFS= read -r header; do
    [ -z "$header" ] && continue
    read -r user pass <<< "$header"
    cmds=
    while IFS= read -r line && [ -n "$line" ]; do cmds+="$line"$'\n'; done
    echo "=== phase: $user" >> "$out"
    if [ "$user" = - ]; then
      CLIENT_JVMFLAGS= ; jaas=
    else
      jaas=$(client_jaas "$user" "$pass")
    fi
    # The pause before quit lets an AuthFailed event print before the client exits.
    { printf '%s' "$cmds"; sleep 2; echo quit; } |
      CLIENT_JVMFLAGS="${jaas:+-Djava.security.auth.login.config=$jaas} ${KRB5_CLIENT:-}" TZ=UTC timeout 120 \
        "$ZKCLI" -server "${SASL_HOST:-127.0.0.1}:$port" >> "$out" 2>&1
  done <<< "$PHASES"
}

# Lines that depend on the client's own threads and timing, not the server: the SASL
# client's INFO/WARN logging (slf4j-simple on stderr), the stack trace lines.
clean() { grep -v -E '^\[[^]]*\] (INFO|WARN|ERROR|DEBUG) |^	at |^SLF4J|^log4j|Client environment|^WATCHER::$|^$' ; }

fail=0
for kind in zk keel; do
  port=$PORT_A; [ "$kind" = keel ] && port=$PORT_B
  if ! start_server "$kind" "$WORK/$kind" "$port" "$EXTRA_CFG"; then echo "sasl: FAIL (could not start $kind)"; exit 1; fi
  run_phases "$kind" "$port" "$WORK/zkcli-$kind.raw"
  timeout 300 python3 "$HERE/raw.py" "$port" > "$WORK/raw-$kind.txt" 2>&1
  stop_server "$WORK/$kind"
  bash "$HERE/../zkcli/run.sh" --mask < "$WORK/zkcli-$kind.raw" | clean > "$WORK/zkcli-$kind.masked"
done
if start_ensemble keel "$WORK/ensemble" "$ENSEMBLE_BASE" "$EXTRA_CFG" && port=$(ensemble_port "$WORK/ensemble" follower); then
  run_phases keel-ensemble "$port" "$WORK/zkcli-keel-ensemble.raw"
  bash "$HERE/../zkcli/run.sh" --mask < "$WORK/zkcli-keel-ensemble.raw" | clean > "$WORK/zkcli-keel-ensemble.masked"
else
  echo "sasl: could not start the keel ensemble" > "$WORK/zkcli-keel-ensemble.masked"
fi
stop_ensemble "$WORK/ensemble"
if diff -u --label "zk (masked)" --label "keel ensemble follower (masked)" "$WORK/zkcli-zk.masked" "$WORK/zkcli-keel-ensemble.masked"; then
  echo "sasl: zkCli on a keel ensemble's follower PASS ($(wc -l < "$WORK/zkcli-keel-ensemble.masked") lines identical after masking)"
else fail=1; echo "sasl: zkCli on a keel ensemble's follower FAIL"; fi
if diff -u --label "zk (masked)" --label "keel (masked)" "$WORK/zkcli-zk.masked" "$WORK/zkcli-keel.masked"; then
  echo "sasl: zkCli PASS ($(wc -l < "$WORK/zkcli-zk.masked") lines identical after masking)"
else fail=1; echo "sasl: zkCli FAIL"; fi
if diff -u --label "zk" --label "keel" "$WORK/raw-zk.txt" "$WORK/raw-keel.txt"; then
  echo "sasl: raw PASS ($(grep -vc '^  bystander' "$WORK/raw-zk.txt") cases identical, bystander answered after each)"
else fail=1; echo "sasl: raw FAIL"; fi

# 4. Kerberos. The client names the server zookeeper/<host it connects to>: localhost.
# shellcheck source=kdc.sh
source "$HERE/kdc.sh"
KDC=$WORK/kdc
trap 'stop_kdc "$KDC"' EXIT
if start_kdc "$KDC" "${SASL_KDC_PORT:-2145}" KEEL.TEST &&
   kdc_principal "$KDC" zookeeper/localhost "$KDC/server.keytab" &&
   kdc_principal "$KDC" alice "$KDC/alice.keytab" &&
   kdc_principal "$KDC" bob "$KDC/bob.keytab" &&
   kdc_principal "$KDC" mallory "$KDC/mallory.keytab" &&
   kadmin.local -q "delprinc -force mallory" >> "$KDC/kadmin.log" 2>&1; then
  cat > "$WORK/server-krb5.jaas" <<JAAS
Server {
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="$KDC/server.keytab"
    storeKey=true
    useTicketCache=false
    principal="zookeeper/localhost@KEEL.TEST";
};
JAAS
  FLAGS="-Djava.security.auth.login.config=$WORK/server-krb5.jaas -Djava.security.krb5.conf=$KRB5_CONFIG -Dzookeeper.superUser=alice@KEEL.TEST"
  export ZK_JVMFLAGS=$FLAGS SERVER_JVMFLAGS=$FLAGS
  export KRB5_CLIENT="-Djava.security.krb5.conf=$KRB5_CONFIG" SASL_HOST=localhost
  # raw_gssapi.py runs in Kazoo's venv (the kerberos module) with a ticket of alice's.
  VENV=$(bash "$HERE/../kazoo/setup.sh" | tail -n1)
  KRB5CCNAME=FILE:$KDC/alice.ccache kinit -kt "$KDC/alice.keytab" alice@KEEL.TEST
  PHASES='alice -
whoami
create /k kdata sasl:alice@KEEL.TEST:cdrwa
create /kb bdata sasl:bob@KEEL.TEST:r
getAcl /k
get /k
get /kb

bob -
whoami
get /k
get /kb
setAcl /kb world:anyone:r

- -
whoami
get /k
get /kb

mallory -
whoami
get /kb
'
  for kind in zk keel; do
    port=$PORT_A; [ "$kind" = keel ] && port=$PORT_B
    if start_server "$kind" "$WORK/krb5-$kind" "$port" "$EXTRA_CFG"; then
      run_phases "$kind" "$port" "$WORK/krb5-$kind.raw"
      KRB5CCNAME=FILE:$KDC/alice.ccache timeout 300 "$VENV/bin/python" "$HERE/raw_gssapi.py" "$port" \
        > "$WORK/raw-krb5-$kind.txt" 2>&1
      stop_server "$WORK/krb5-$kind"
    else
      echo "could not start $kind" > "$WORK/krb5-$kind.raw"
    fi
    bash "$HERE/../zkcli/run.sh" --mask < "$WORK/krb5-$kind.raw" | clean > "$WORK/krb5-$kind.masked"
  done
  if diff -u --label "zk (masked)" --label "keel (masked)" "$WORK/krb5-zk.masked" "$WORK/krb5-keel.masked"; then
    echo "sasl: Kerberos zkCli PASS ($(wc -l < "$WORK/krb5-zk.masked") lines identical after masking)"
  else fail=1; echo "sasl: Kerberos zkCli FAIL"; fi
  if grep -q "has alice@KEEL.TEST: True" "$WORK/raw-krb5-zk.txt" &&
     diff -u --label "zk" --label "keel" "$WORK/raw-krb5-zk.txt" "$WORK/raw-krb5-keel.txt"; then
    echo "sasl: Kerberos raw PASS ($(grep -vc '^  bystander' "$WORK/raw-krb5-zk.txt") cases identical, bystander answered after each)"
  else fail=1; echo "sasl: Kerberos raw FAIL"; fi
else
  fail=1; echo "sasl: Kerberos FAIL (the test KDC did not start)"
fi
stop_kdc "$KDC"
exit $fail
