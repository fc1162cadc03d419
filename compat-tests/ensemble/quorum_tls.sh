#!/usr/bin/env bash
# Quorum TLS (zoo.cfg sslQuorum=true, the ssl.quorum.* keys, portUnification), as
# ZooKeeper 3.8 runs it, on 3-member ensembles on loopback (ensemble/lib.sh).
#   usage: quorum_tls.sh
# Certificates (certs.sh, made here): a CA; a member certificate for localhost /
# 127.0.0.1 (every member presents it, as PEM or as JKS stores); one from a second,
# untrusted CA; one from the trusted CA naming another host.
#  1. keel x3, sslQuorum=true (member 2 with JKS stores): forms; a write on one member
#     reads back on another, both ways; every member logs accepted TLS connections;
#     openssl s_client with the member certificate completes a TLS handshake on the
#     election and quorum ports, without a certificate it is refused.
#  4. Plaintext to TLS-only ports: raw bytes (an election initial message, a quorum
#     packet) are closed with the reason logged; the ensemble is unchanged.
#  2. Members 1-2 trusted, member 3 with the untrusted CA's certificate: 1-2 form and
#     serve a write, 3 does not join, and the refusal (UnknownIssuer) is logged on both
#     sides; member 3 restarted with a trusted certificate naming another host is
#     refused too (hostname verification, logged); restarted with sslQuorum off
#     (plaintext) it is refused again (logged, point 4 with a real member); restarted
#     with the member certificate it joins and reads the write made without it.
#  3. Mixed ensembles with real ZooKeeper 3.8, sslQuorum on every member: zk,keel,keel
#     (a keel leader) and keel,zk,zk (a ZooKeeper leader): each forms, a write via a
#     ZooKeeper member reads back on a keel member and one via a keel member on a
#     ZooKeeper member.
#  5. portUnification: members 1-2 with sslQuorum and portUnification, member 3 with
#     portUnification only (it dials in plaintext, accepts both): the ensemble forms and
#     replicates; members 1 and 3 log accepted TLS connections.
#  6. ssl.quorum.hostnameVerification=false on every member of keel,keel,zk, each with
#     the certificate naming another host: the ensemble forms and replicates.
#  8. X.509 v1 member certificates (no extensions, so no subjectAltNames) with
#     CN=localhost on keel,keel,zk, hostname verification on: each end matches the CN
#     with the name 127.0.0.1 reverse-resolves to (localhost), as ZooKeeper does; the
#     ensemble forms and replicates.
#  7. keel only: sslQuorum without a trust store, with a missing key store, or with an
#     unknown ssl.quorum.protocol stops start-up (exit 1) with an error naming the key.
# Exit 0 when every check passes; one line per check and a summary.
# Work dir: ${WORK:-/tmp/keel-compat/quorum-tls}. Ports 15000-15999 (QTLS_PORT_BASE).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=../certs.sh
source "$HERE/../certs.sh"

WORK=${WORK:-/tmp/keel-compat/quorum-tls}
BASE=${QTLS_PORT_BASE:-15000}
CERTS=$WORK/certs
need_kazoo_and_keel
for tool in openssl keytool java; do
  command -v $tool >/dev/null || { echo "quorum-tls: FAIL ($tool not found)" >&2; exit 1; }
done
export ENSEMBLE_TICK_MS=500

rm -rf "$WORK"; mkdir -p "$CERTS"

make_certs() {
  cd "$CERTS" || return 1
  certs_ext_files && certs_ca ca '/CN=keel quorum CA' && certs_ca rogue '/CN=rogue CA' &&
  certs_leaf member ca '/O=keel/CN=member' server.ext &&
  certs_leaf intruder rogue '/O=keel/CN=member' server.ext &&
  printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth,clientAuth' 'subjectAltName=DNS:elsewhere.invalid,IP:10.255.0.9' > elsewhere.ext &&
  certs_leaf elsewhere ca '/O=keel/CN=elsewhere.invalid' elsewhere.ext &&
  certs_leaf v1member ca '/CN=localhost' &&
  certs_jks member ca apassword
  local rc=$?
  cd - >/dev/null
  return $rc
}
check "certificates made (CA, member, untrusted CA's member, another host's, v1, JKS stores)" make_certs
[ "$failed" -eq 0 ] || exit 1

# Per-member quorum TLS settings: QTLS_CERT_<i> names member i's key store (member,
# intruder, elsewhere, jks; default member), QTLS_MODE_<i> its mode (tls: sslQuorum;
# plain: sslQuorum off; unified: sslQuorum + portUnification; unified-plain:
# portUnification only); QTLS_EXTRA, lines every member gets.
member_tls_cfg() { # I
  local cert mode
  cert=$(eval echo "\${QTLS_CERT_$1:-member}")
  mode=$(eval echo "\${QTLS_MODE_$1:-tls}")
  case $mode in
  tls) echo sslQuorum=true ;;
  plain) return 0 ;;
  unified) printf '%s\n' sslQuorum=true portUnification=true ;;
  unified-plain) echo portUnification=true ;;
  esac
  if [ "$cert" = jks ]; then
    printf '%s\n' "ssl.quorum.keyStore.location=$CERTS/member.jks" ssl.quorum.keyStore.password=apassword \
      ssl.quorum.keyStore.type=JKS "ssl.quorum.trustStore.location=$CERTS/ca.jks" \
      ssl.quorum.trustStore.password=apassword ssl.quorum.trustStore.type=JKS
  else
    printf '%s\n' "ssl.quorum.keyStore.location=$CERTS/$cert.pem" ssl.quorum.keyStore.type=PEM \
      "ssl.quorum.trustStore.location=$CERTS/ca.pem" ssl.quorum.trustStore.type=PEM
  fi
  [ -z "${QTLS_EXTRA:-}" ] || echo "$QTLS_EXTRA"
}
export ENSEMBLE_MEMBER_CFG=member_tls_cfg

# shellcheck source=quorum_lib.sh
source "$HERE/quorum_lib.sh"

RESTART_DROP='^sslQuorum=\|^portUnification=\|^ssl\.quorum\.'  # restart_member (quorum_lib.sh) rewrites these lines

# s_client (TLS 1.2, ZooKeeper's default) to PORT; with the member certificate when
# $2 = cert. Succeeds when the TLS handshake completes and the member's certificate
# verifies against the CA.
tls_handshake() { # PORT [cert]
  local certargs=()
  [ "${2:-}" = cert ] && certargs=(-cert "$CERTS/member.crt" -key "$CERTS/member.key")
  (sleep 1) | timeout 10 openssl s_client -connect "127.0.0.1:$1" -CAfile "$CERTS/ca.pem" \
    -verify_return_error -tls1_2 "${certargs[@]}" > "$WORK/s_client.out" 2>&1
  grep -q 'New, TLSv1.2, Cipher is' "$WORK/s_client.out" &&
    grep -q 'Verify return code: 0' "$WORK/s_client.out"
}
# s_client's summary may still print the cipher (TLS 1.2: its Finished is sent before
# the member's verdict arrives), so the refusal is read from the alert it gets
# (certificate_required, 116) and from the member's log.
no_cert_refused() { # PORT LOG
  tls_handshake "$1"
  grep -q 'SSL alert number 116' "$WORK/s_client.out" &&
    logged "$2" -- 'election connection from 127.0.0.1:[0-9]+: TLS handshake failed: peer sent no certificates'
}
unchanged() { # DIR LEADER_PORT
  [ "$(modes_of "$1" 1 2 3)" = 'follower follower leader ' ] && [ "$(ensemble_port "$1" leader)" = "$2" ]
}
# Sends plaintext HEX to PORT; succeeds when the member closes the connection (EOF)
# within 3 s without answering.
plaintext_closed() { # PORT HEX
  python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(bytes.fromhex(sys.argv[2]))
try:
    data = s.recv(100)
except ConnectionResetError:
    data = b""
sys.exit(0 if data == b"" else 1)
PY
}

# ------------------------------------------------ 1 and 4: a keel ensemble over TLS
A=$WORK/keel-tls; DIRS+=("$A"); b=$(pick_base "$BASE")
QTLS_CERT_2=jks
check "1: keel x3 with sslQuorum=true forms (member 2 on JKS stores)" start_ensemble keel "$A" $b
check "1: a write on member 1 reads back on member 3" replicates "$(cport $b 1)" "$(cport $b 3)" /qtls-a1
check "1: a write on member 3 reads back on member 2" replicates "$(cport $b 3)" "$(cport $b 2)" /qtls-a2
for i in 1 2 3; do
  check "1: member $i logs accepted TLS connections" logged "$A/m$i/log" -- 'accepted TLS connection from'
done
check "1: s_client with the member certificate: TLS handshake on the election port" tls_handshake "$(eport $b 1)" cert
check "1: s_client with the member certificate: TLS handshake on the quorum port" tls_handshake "$(qport $b 2)" cert
check "1: s_client without a certificate is refused on the election port, logged" \
  no_cert_refused "$(eport $b 1)" "$A/m1/log"
leader_before=$(ensemble_port "$A" leader)
# The election port's V1 initial message (protocol -65536, sid 3, address), and a quorum
# packet's opening (a length, then FOLLOWERINFO's type 11), both in plaintext.
check "4: plaintext election initial message to a TLS-only election port is closed" \
  plaintext_closed "$(eport $b 1)" "ffffffffffff000000000000000000030000000f3132372e302e302e313a3135303233"
check "4: plaintext quorum packet to a TLS-only quorum port is closed" \
  plaintext_closed "$(qport $b 2)" "0000002c0000000b"
check "4: the plaintext peers' refusal is logged (election port)" \
  logged "$A/m1/log" -- 'election connection from 127.0.0.1:[0-9]+: not a TLS connection'
check "4: the plaintext peers' refusal is logged (quorum port)" \
  logged "$A/m2/log" -- 'quorum connection from 127.0.0.1:[0-9]+: not a TLS connection'
check "4: the ensemble is unchanged after them (same leader, all 3 serving)" unchanged "$A" "$leader_before"
unset QTLS_CERT_2
stop_ensemble "$A"

# ------------------------------------------------ 2 and 4: members that are refused
B=$WORK/keel-refused; DIRS+=("$B"); b=$(pick_base $((BASE + 100)))
QTLS_CERT_3=intruder
ENSEMBLE_NO_WAIT=1 start_ensemble keel "$B" $b
sleep 1
check "2: the three members run (member 3 with the untrusted CA's certificate)" running "$B"
check "2: members 1-2 form without member 3 (untrusted CA)" wait_modes "$B" "follower leader " 1 2
check "2: member 3 (untrusted CA) does not join" stays_out "$B"
check "2: members 1-2 serve: a write on 1 reads back on 2" replicates "$(cport $b 1)" "$(cport $b 2)" /qtls-b
check "2: the untrusted certificate's refusal is logged by members 1-2" \
  logged "$B/m1/log" "$B/m2/log" -- '(election|quorum) connection from 127.0.0.1:[0-9]+: TLS handshake failed: .*(UnknownIssuer|unknown issuer)'
check "2: member 3 logs that its connections are refused" \
  logged "$B/m3/log" -- 'connection to server\.[12] refused: TLS handshake'
QTLS_CERT_3=elsewhere; restart_member "$B" 3
check "2: member 3 with a trusted certificate of another host does not join" stays_out "$B"
check "2: the host mismatch is logged (ssl.quorum.hostnameVerification)" \
  logged "$B/m1/log" "$B/m2/log" -- 'connection from 127.0.0.1:[0-9]+: the peer.s certificate .*hostnameVerification is on'
QTLS_CERT_3=member; QTLS_MODE_3=plain; restart_member "$B" 3
check "4: member 3 in plaintext (sslQuorum off) does not join" stays_out "$B"
check "4: its plaintext connections are refused, logged" \
  logged "$B/m1/log" "$B/m2/log" -- 'connection from 127.0.0.1:[0-9]+: not a TLS connection'
unset QTLS_MODE_3; restart_member "$B" 3
check "2: member 3 with the member certificate joins" wait_modes "$B" "follower follower leader " 1 2 3
check "2: and reads the write made without it" reads_back "$(cport $b 3)" /qtls-b "via-$(cport $b 1)"
unset QTLS_CERT_3
stop_ensemble "$B"

# ------------------------------------------------ 3: mixed with real ZooKeeper 3.8
mixed() { # LABEL KINDS BASE ZK_MEMBER KEEL_MEMBER
  local dir=$WORK/$1 b
  b=$(pick_base "$3")
  DIRS+=("$dir")
  mixed_forms 3 "$2" "$dir" "$b" "$4" "$5" sslQuorum "/qtls-$1"
  check "3: $2: the keel member logs TLS connections accepted" \
    logged "$dir/m$5/log" -- 'accepted TLS connection from'
  stop_ensemble "$dir"
}
mixed mixed-keel-leads zk,keel,keel $((BASE + 200)) 1 2
mixed mixed-zk-leads keel,zk,zk $((BASE + 300)) 3 1

# ------------------------------------------------ 5: portUnification
U=$WORK/unified; DIRS+=("$U"); b=$(pick_base $((BASE + 400)))
QTLS_MODE_1=unified QTLS_MODE_2=unified QTLS_MODE_3=unified-plain
check "5: portUnification: 2 TLS members and 1 plaintext member form" start_ensemble keel "$U" $b
check "5: a write on the plaintext member reads back on a TLS member" \
  replicates "$(cport $b 3)" "$(cport $b 1)" /qtls-u
check "5: member 1 accepted a TLS peer (member 2)" logged "$U/m1/log" -- 'accepted TLS connection from'
check "5: member 3 took member 1's TLS connection (it has the key store)" \
  logged "$U/m3/log" -- 'accepted TLS connection from'
unset QTLS_MODE_1 QTLS_MODE_2 QTLS_MODE_3
stop_ensemble "$U"

# ------------------------------------------------ 6: hostname verification off
H=$WORK/no-hostname-verification; DIRS+=("$H"); b=$(pick_base $((BASE + 450)))
QTLS_CERT_1=elsewhere QTLS_CERT_2=elsewhere QTLS_CERT_3=elsewhere
QTLS_EXTRA=ssl.quorum.hostnameVerification=false
check "6: keel,keel,zk with another host's certificates and hostnameVerification=false forms" \
  start_ensemble keel,keel,zk "$H" "$b"
check "6: a write via keel (member 1) reads back on ZooKeeper (member 3)" \
  replicates "$(cport "$b" 1)" "$(cport "$b" 3)" /qtls-h
unset QTLS_CERT_1 QTLS_CERT_2 QTLS_CERT_3 QTLS_EXTRA
stop_ensemble "$H"

# ------------------------------------------------ 8: X.509 v1 member certificates
V=$WORK/v1-certificates; DIRS+=("$V"); b=$(pick_base $((BASE + 150)))
if [ "$(getent hosts 127.0.0.1 | awk '{print $2}')" = localhost ]; then
  QTLS_CERT_1=v1member QTLS_CERT_2=v1member QTLS_CERT_3=v1member
  check "8: keel,keel,zk with X.509 v1 certificates (CN=localhost) forms" start_ensemble keel,keel,zk "$V" "$b"
  check "8: a write via ZooKeeper (member 3) reads back on keel (member 2)" \
    replicates "$(cport "$b" 3)" "$(cport "$b" 2)" /qtls-v1
  unset QTLS_CERT_1 QTLS_CERT_2 QTLS_CERT_3
  stop_ensemble "$V"
else
  check "8: 127.0.0.1 reverse-resolves to localhost (needed for the v1 certificates' CN)" false
fi

# ------------------------------------------------ 7: bad settings stop start-up
refuses() { # KEY CFG_LINES...   keel exits 1 within 10 s, its error naming KEY
  local key=$1 d=$WORK/refuses; shift
  rm -rf "$d"; mkdir -p "$d/data"; echo 1 > "$d/data/myid"
  printf '%s\n' tickTime=500 initLimit=10 syncLimit=5 "dataDir=$d/data" admin.enableServer=false \
    "clientPort=$((BASE + 491))" "server.1=127.0.0.1:$((BASE + 492)):$((BASE + 493))" \
    "server.2=127.0.0.1:$((BASE + 494)):$((BASE + 495))" sslQuorum=true "$@" > "$d/zoo.cfg"
  timeout 10 "$KEEL_BIN" "$d/zoo.cfg" > "$d/log" 2>&1
  local rc=$?
  [ $rc -eq 1 ] && grep -q "^keel: $key: " "$d/log" || { echo "  exit $rc; $(tail -n 1 "$d/log")" >&2; return 1; }
}
check "7: no ssl.quorum.trustStore.location stops start-up, naming it" \
  refuses ssl.quorum.trustStore.location "ssl.quorum.keyStore.location=$CERTS/member.pem"
check "7: a missing ssl.quorum.keyStore.location file stops start-up, naming it" \
  refuses ssl.quorum.keyStore.location "ssl.quorum.keyStore.location=$CERTS/nonexistent.pem" \
  "ssl.quorum.trustStore.location=$CERTS/ca.pem"
check "7: an unknown ssl.quorum.protocol stops start-up, naming it" \
  refuses ssl.quorum.protocol "ssl.quorum.keyStore.location=$CERTS/member.pem" \
  "ssl.quorum.trustStore.location=$CERTS/ca.pem" ssl.quorum.protocol=TLSv9

echo "quorum-tls: $passed passed, $failed failed"
for f in "${failures[@]}"; do echo "  failed: $f"; done
[ "$failed" -eq 0 ]
