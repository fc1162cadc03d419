#!/usr/bin/env bash
# TLS on the secure client port with the stock Java client, keel against real ZooKeeper.
#   usage: run.sh [A_KIND] [B_KIND]      (kinds: zk | keel; default: zk keel)
# Certificates (made here with the openssl CLI): a test CA; a server certificate for
# localhost / 127.0.0.1; three client certificates from that CA (client1: CN=client1;
# client2: a many-part subject with a multi-valued RDN, DCs, an escaped comma and an
# e-mail attribute; client3: the x509 super user); "untrusted", signed by a second CA;
# and two X.509 v1 client certificates (no extensions), one from each CA.
# Each server gets clientPort + secureClientPort, PEM key and trust stores, ssl.clientAuth
# left at its default (need), and X509AuthenticationProvider.superUser=<client3's DN>.
#  1. zkCli.sh over TLS (Netty client socket, PEM key/trust stores) runs one script per
#     client: create/get/set/ls/delete, an x509 ACL readable by client1 only, getAcl,
#     whoami, addauth x509, an invalid x509 ACL id; client2 is refused (NoAuth) and
#     shows its DN; client3 (super) reads the node. The transcripts of A and B, masked as
#     compat-tests/zkcli does, must be identical.
#  2. Refusals, each checked on both servers: zkCli.sh with the untrusted certificate
#     fails (ConnectionLoss); openssl s_client with the untrusted certificate or with none
#     gets no answer to `ruok`, while the trusted one gets `imok` over TLS; a plaintext
#     client on the secure port gets nothing; the plain port still answers.
#  3. Both kinds: the same stores as JKS files (keytool -storetype JKS) serve TLS; with
#     only secureClientPort set, only the TLS port listens.
#  4. keel only: a missing, encrypted, PKCS12 or mismatched key store, a wrong JKS
#     password, and clientAuth=need without a trust store stop start-up with an error
#     naming the ssl.* key.
#  5. keel only: ssl.protocol=TLSv1.3 serves TLS 1.3 and refuses TLS 1.2.
# Exit 0 when every check passes; prints one line per check and a summary.
# Work dir: ${WORK:-/tmp/keel-compat/tls}. Ports 2700-2799 (TLS_PORT_BASE to move them).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"
# shellcheck source=../certs.sh
source "$HERE/../certs.sh"

A_KIND=${1:-zk}
B_KIND=${2:-keel}
WORK=${WORK:-/tmp/keel-compat/tls}
BASE=${TLS_PORT_BASE:-2700}
ZKCLI=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
CERTS=$WORK/certs

for k in "$A_KIND" "$B_KIND"; do
  case $k in zk|keel) ;; *) echo "usage: $0 [zk|keel] [zk|keel]" >&2; exit 2 ;; esac
done
if [ ! -x "$KEEL_BIN" ]; then
  echo "tls: FAIL (keel binary $KEEL_BIN not found; build it or set KEEL_BIN)" >&2; exit 1
fi
for tool in openssl keytool; do
  command -v $tool >/dev/null || { echo "tls: FAIL ($tool not found)" >&2; exit 1; }
done

rm -rf "$WORK"; mkdir -p "$CERTS"
DIRS=()
cleanup() { local d; for d in "${DIRS[@]}"; do stop_server "$d"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- certificates
make_certs() {
  cd "$CERTS" || return 1
  certs_ext_files && certs_ca ca '/CN=keel test CA' && certs_ca rogue '/CN=rogue CA' &&
  certs_leaf server ca '/CN=localhost' server.ext &&
  certs_leaf client1 ca '/CN=client1' client.ext &&
  certs_leaf client2 ca '/DC=org/DC=keel/O=Keel, Inc./OU=QA+UID=u42/CN=client two/emailAddress=c2@keel.org' client.ext &&
  certs_leaf client3 ca '/O=keel/CN=client3' client.ext &&
  certs_leaf untrusted rogue '/CN=client1' client.ext &&
  # X.509 v1 (no extensions: `openssl x509 -req` without -extfile), as Kazoo's harness
  # makes its client certificate; ZooKeeper (Java's PKIX) accepts one from a trusted CA.
  certs_leaf v1client ca '/CN=v1 client' &&
  certs_leaf v1untrusted rogue '/CN=v1 client' &&
  openssl x509 -in v1client.crt -noout -text | grep -q 'Version: 1 (0x0)' || return 1
  # The same server identity and trust as JKS stores, and the key store as PKCS12.
  certs_jks server ca apassword || return 1
  # An encrypted PEM key store (ZooKeeper decrypts these with ssl.keyStore.password).
  openssl pkcs8 -topk8 -in server.key -passout pass:apassword -out server-enc.key 2>/dev/null &&
  cat server-enc.key server.crt > server-enc.pem &&
  cat client1.key server.crt > mismatch.pem
  cd - >/dev/null
}
check "certificates made with openssl (CA, server, 3 clients, untrusted CA) and keytool" make_certs
[ "$failed" -eq 0 ] || exit 1
SUPER_DN='CN=client3,O=keel'

# Server settings shared by both kinds. ZooKeeper needs the Netty connection factory for
# TLS; keel ignores that key.
tls_cfg() { # SECURE_PORT KEYSTORE TRUSTSTORE [TYPE]
  printf '%s\n' "secureClientPort=$1" \
    'serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory' \
    "ssl.keyStore.location=$2" "ssl.trustStore.location=$3" \
    "X509AuthenticationProvider.superUser=$SUPER_DN"
  if [ "${4:-}" = JKS ]; then
    printf '%s\n' ssl.keyStore.type=JKS ssl.keyStore.password=apassword \
      ssl.trustStore.type=JKS ssl.trustStore.password=apassword
  else
    printf '%s\n' ssl.keyStore.type=PEM ssl.trustStore.type=PEM
  fi
}

# Stock zkCli.sh with the Netty client socket over TLS. zkCli.sh puts $CLIENT_JVMFLAGS
# after its own -cp, so this -cp (ZK_CP, which has the Netty jars the Netty client
# needs) is the one java uses; slf4j-simple's log lines are switched off.
zkcli_tls() { # PORT KEYSTORE_PEM [zkCli args...]
  local port=$1 keystore=$2; shift 2
  CLIENT_JVMFLAGS="-cp $ZK_CP -Dorg.slf4j.simpleLogger.defaultLogLevel=off \
    -Dzookeeper.client.secure=true \
    -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty \
    -Dzookeeper.ssl.keyStore.location=$keystore -Dzookeeper.ssl.keyStore.type=PEM \
    -Dzookeeper.ssl.trustStore.location=$CERTS/ca.pem -Dzookeeper.ssl.trustStore.type=PEM" \
    TZ=UTC timeout 120 "$ZKCLI" -server "127.0.0.1:$port" "$@"
}

# `ruok` over TLS with openssl s_client; prints the reply (imok) or nothing.
ruok_tls() { # PORT [CERT_NAME]
  local certargs=()
  [ -n "${2:-}" ] && certargs=(-cert "$CERTS/$2.crt" -key "$CERTS/$2.key")
  (printf ruok; sleep 2) | timeout 10 openssl s_client -connect "127.0.0.1:$1" \
    -CAfile "$CERTS/ca.pem" "${certargs[@]}" -quiet 2>/dev/null
}
# `ruok` in plaintext; prints the reply.
ruok_plain() { timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && cat <&3' _ "$1" 2>/dev/null; }

# The zkCli scripts, one per client certificate, run in this order.
SCRIPT_CLIENT1='ls /
create /t data
get /t
set /t data2
get -s /t
create /t/c child
ls /t
delete /t/c
delete /t
create /x secret x509:CN=client1:cdrwa
getAcl /x
get /x
set /x secret2
create /y data x509:client1:cdrwa
whoami
addauth x509 ignored
whoami
ls /
quit'
SCRIPT_CLIENT2='whoami
get /x
ls /
quit'
SCRIPT_CLIENT3='get /x
getAcl /x
quit'

run_kind() { # KIND LABEL PLAIN_PORT SECURE_PORT
  local kind=$1 label=$2 plain=$3 secure=$4 dir=$WORK/$2
  DIRS+=("$dir")
  if ! start_server "$kind" "$dir" "$plain" "$(tls_cfg "$secure" "$CERTS/server.pem" "$CERTS/ca.pem")"; then
    check "$label: $kind starts with clientPort $plain and secureClientPort $secure" false
    return 1
  fi
  local c script raw=$WORK/$label.raw
  : > "$raw"
  for c in client1 client2 client3; do
    case $c in client1) script=$SCRIPT_CLIENT1 ;; client2) script=$SCRIPT_CLIENT2 ;; *) script=$SCRIPT_CLIENT3 ;; esac
    echo "### $c" >> "$raw"
    printf '%s\n' "$script" | zkcli_tls "$secure" "$CERTS/$c.pem" >> "$raw" 2>&1
  done
  # zkCli's own Closed event at the end of a session comes once, twice, or once and a
  # half (its event thread races the JVM's exit; seen on both sides under load), and its
  # send thread may queue a Disconnected event after it (seen once from ZooKeeper 3.8 in
  # CI): after a session's first Closed event, further WATCHER/Closed/Disconnected/blank
  # lines (or their cut-off starts) are dropped. A Disconnected before the first Closed
  # is still compared.
  bash "$HERE/../zkcli/run.sh" --mask < "$raw" | python3 -c '
import sys
closed, out = False, []
noise = {"", "WATCHER::", "WatchedEvent state:Closed type:None path:null",
         "WatchedEvent state:Disconnected type:None path:null"}
for line in sys.stdin.read().split("\n"):
    if line.startswith("### "):
        closed = False
    elif closed and any(n.startswith(line) for n in noise):
        continue  # a noise line, or the start of one cut off by the exit
    out.append(line)
    if line == "WatchedEvent state:Closed type:None path:null":
        closed = True
sys.stdout.write("\n".join(out))
' > "$WORK/$label.masked"
  check "$label: client1 created the x509-ACL node and read it back over TLS" \
    grep -qx 'secret' "$WORK/$label.masked"
  check "$label: client2 (another trusted certificate) is refused by the x509 ACL" \
    grep -qx 'Insufficient permission : /x' "$WORK/$label.masked"
  check "$label: client3 (X509AuthenticationProvider.superUser) reads the node client1 changed" \
    grep -qx 'secret2' "$WORK/$label.masked"

  # Refusals.
  local out
  out=$(zkcli_tls "$secure" "$CERTS/untrusted.pem" ls / 2>&1); local rc=$?
  check "$label: zkCli.sh with a certificate from an untrusted CA fails (exit $rc, ConnectionLoss)" \
    eval '[ $rc -ne 0 ] && grep -q "ConnectionLoss" <<<"$out" && ! grep -q "^\[zookeeper" <<<"$out"'
  check "$label: openssl s_client with the trusted client1 certificate: ruok -> imok over TLS" \
    eval '[ "$(ruok_tls "$secure" client1)" = imok ]'
  check "$label: openssl s_client with an X.509 v1 certificate from the trusted CA: ruok -> imok" \
    eval '[ "$(ruok_tls "$secure" v1client)" = imok ]'
  check "$label: openssl s_client with an X.509 v1 certificate from an untrusted CA gets no answer" \
    eval '[ -z "$(ruok_tls "$secure" v1untrusted)" ]'
  check "$label: openssl s_client with the untrusted certificate gets no answer" \
    eval '[ -z "$(ruok_tls "$secure" untrusted)" ]'
  check "$label: openssl s_client without a client certificate gets no answer (clientAuth=need)" \
    eval '[ -z "$(ruok_tls "$secure")" ]'
  check "$label: a plaintext client on the secure port gets nothing" \
    eval '[ "$(ruok_plain "$secure" | wc -c)" -eq 0 ]'
  check "$label: the plain client port still answers (both ports served)" \
    eval '[ "$(ruok_plain "$plain")" = imok ]'
  stop_server "$dir"
}

# Starts KIND with the given zoo.cfg body (no clientPort) and waits for `ruok` over TLS.
start_tls_only() { # KIND DIR SECURE_PORT CFG
  local kind=$1 dir=$2 port=$3 cfg=$4 _
  DIRS+=("$dir")
  rm -rf "$dir"; mkdir -p "$dir/data"
  printf '%s\n' tickTime=2000 "dataDir=$dir/data" admin.enableServer=false \
    '4lw.commands.whitelist=*' "$cfg" > "$dir/zoo.cfg"
  if [ "$kind" = zk ]; then
    setsid /usr/bin/java -Xmx512m -cp "$ZK_CP" org.apache.zookeeper.server.quorum.QuorumPeerMain \
      "$dir/zoo.cfg" >"$dir/log" 2>&1 &
  else
    setsid "$KEEL_BIN" "$dir/zoo.cfg" >"$dir/log" 2>&1 &
  fi
  echo $! > "$dir/pid"
  for _ in $(seq 60); do
    [ "$(ruok_tls "$port" client1)" = imok ] && return 0
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

other_kinds() { # the kinds, once each
  if [ "$A_KIND" = "$B_KIND" ]; then echo "$A_KIND"; else echo "$A_KIND $B_KIND"; fi
}

echo "== 1-2: zkCli.sh over TLS and refusals ($A_KIND vs $B_KIND)"
run_kind "$A_KIND" "a-$A_KIND" $((BASE + 10)) $((BASE + 11))
run_kind "$B_KIND" "b-$B_KIND" $((BASE + 20)) $((BASE + 21))
if diff -u --label "$A_KIND (masked)" --label "$B_KIND (masked)" \
     "$WORK/a-$A_KIND.masked" "$WORK/b-$B_KIND.masked" > "$WORK/diff"; then
  check "zkCli.sh TLS transcripts identical after masking ($(wc -l < "$WORK/a-$A_KIND.masked") lines)" true
else
  cat "$WORK/diff"
  check "zkCli.sh TLS transcripts identical after masking (diff above)" false
fi

echo "== 3: JKS stores and a secure-only server"
port=$((BASE + 30))
for kind in $(other_kinds); do
  dir=$WORK/jks-$kind
  if start_tls_only "$kind" "$dir" "$port" "$(tls_cfg "$port" "$CERTS/server.jks" "$CERTS/ca.jks" JKS)"; then
    check "$kind: JKS key and trust stores serve TLS (trusted client gets imok)" true
    check "$kind: JKS trust store refuses the untrusted certificate" \
      eval '[ -z "$(ruok_tls "$port" untrusted)" ]'
    check "$kind: with only secureClientPort set, only the TLS port listens" \
      eval '[ "$(ss -ltnp 2>/dev/null | grep "pid=$(cat "$dir/pid")," | wc -l)" -eq 1 ]'
  else
    check "$kind: starts with JKS stores and only secureClientPort (see $dir/log)" false
  fi
  stop_server "$dir"
  port=$((port + 1))
done

echo "== 4: keel refuses bad TLS settings at start-up, naming the key"
refuses() { # NAME CFG KEY
  local dir=$WORK/bad-$1
  rm -rf "$dir"; mkdir -p "$dir/data"
  printf '%s\n' tickTime=2000 "dataDir=$dir/data" admin.enableServer=false "clientPort=$((BASE + 40))" \
    "$2" > "$dir/zoo.cfg"
  timeout 20 "$KEEL_BIN" "$dir/zoo.cfg" > "$dir/log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$3" "$dir/log" && ! grep -q "serving clients" "$dir/log"
}
check "keel: a missing key store file stops start-up naming ssl.keyStore.location" \
  refuses missing "$(tls_cfg $((BASE + 41)) "$CERTS/nope.pem" "$CERTS/ca.pem")" 'ssl.keyStore.location: .*nope.pem'
check "keel: an encrypted PEM key stops start-up naming ssl.keyStore.location" \
  refuses encrypted "$(tls_cfg $((BASE + 41)) "$CERTS/server-enc.pem" "$CERTS/ca.pem")
ssl.keyStore.password=apassword" 'ssl.keyStore.location: .*encrypted'
check "keel: a PKCS12 key store stops start-up naming ssl.keyStore.location" \
  refuses pkcs12 "$(tls_cfg $((BASE + 41)) "$CERTS/server.p12" "$CERTS/ca.pem" | grep -v keyStore.type)" \
  'ssl.keyStore.location: .*PKCS12'
check "keel: a wrong JKS password stops start-up naming ssl.keyStore.location" \
  refuses jkspass "$(tls_cfg $((BASE + 41)) "$CERTS/server.jks" "$CERTS/ca.jks" JKS | sed 's/keyStore.password=apassword/keyStore.password=wrong/')" \
  'ssl.keyStore.location: .*password'
check "keel: clientAuth=need without a trust store stops start-up naming ssl.trustStore.location" \
  refuses notrust "$(tls_cfg $((BASE + 41)) "$CERTS/server.pem" "$CERTS/ca.pem" | grep -v trustStore)" \
  'ssl.trustStore.location'
check "keel: a private key that does not match the certificate stops start-up" \
  refuses mismatch "$(tls_cfg $((BASE + 41)) "$CERTS/mismatch.pem" "$CERTS/ca.pem")" \
  'ssl.keyStore.location: .*does not belong'

# ZooKeeper 3.8 cannot serve ssl.protocol=TLSv1.3 with its default cipher suites (its
# list has no TLS 1.3 suite: "No appropriate protocol"); keel adds the TLS 1.3 suites.
echo "== 5: keel with ssl.protocol=TLSv1.3 (a documented difference: ZooKeeper 3.8 fails here)"
port=$((BASE + 50))
if start_tls_only keel "$WORK/tls13" "$port" "$(tls_cfg "$port" "$CERTS/server.pem" "$CERTS/ca.pem")
ssl.protocol=TLSv1.3"; then
  tls13() { (printf ruok; sleep 2) | timeout 10 openssl s_client "$1" -connect "127.0.0.1:$port" \
    -cert "$CERTS/${2:-client1}.crt" -key "$CERTS/${2:-client1}.key" -CAfile "$CERTS/ca.pem" -quiet 2>/dev/null; }
  check "keel: TLSv1.3 client gets imok" eval '[ "$(tls13 -tls1_3)" = imok ]'
  check "keel: TLSv1.3 client with an X.509 v1 certificate gets imok" eval '[ "$(tls13 -tls1_3 v1client)" = imok ]'
  check "keel: TLSv1.3 client with an untrusted X.509 v1 certificate is refused" \
    eval '[ -z "$(tls13 -tls1_3 v1untrusted)" ]'
  check "keel: TLSv1.2 client is refused when only TLSv1.3 is enabled" eval '[ -z "$(tls13 -tls1_2)" ]'
else
  check "keel: starts with ssl.protocol=TLSv1.3 (see $WORK/tls13/log)" false
fi
stop_server "$WORK/tls13"

echo "(C client: Debian's libzookeeper-mt is built without SSL support, so there is no C-client TLS check.)"
echo
[ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "tls: $([ "$failed" -eq 0 ] && echo PASS || echo FAIL) ($passed checks passed, $failed failed; transcripts in $WORK)"
[ "$failed" -eq 0 ]
