#!/usr/bin/env bash
# Quorum SASL (zoo.cfg quorum.auth.enableSasl, quorum.auth.serverRequireSasl,
# quorum.auth.learnerRequireSasl; the JAAS QuorumServer / QuorumLearner sections with
# DIGEST-MD5), as ZooKeeper 3.8 runs it, on 3-member ensembles on loopback
# (ensemble/lib.sh). Issue 19 part 3 and check d, SASL half.
#   usage: quorum_sasl.sh
#  1. keel x3, SASL enabled and required both ways: forms; a write on one member reads
#     back on another, both ways; every member logs learners it authenticated.
#  2. Member 3 with a wrong password: members 1-2 form and serve a write, 3 does not
#     join; the refusal is logged by 1-2 and by 3. Member 3 restarted with quorum SASL
#     off (no credentials) is refused too (logged: not trying to authenticate);
#     restarted with the right password it joins and reads the write made without it.
#  3. Mixed ensembles with real ZooKeeper 3.8, SASL required on every member:
#     zk,keel,keel (a keel leader) and keel,zk,zk (a ZooKeeper leader): each forms, a
#     write via a ZooKeeper member reads back on a keel member and one via a keel
#     member on a ZooKeeper member; the ZooKeeper members log keel learners
#     authenticated, the keel members ZooKeeper learners.
#  4. keel,keel,zk with the ZooKeeper member's password wrong: keel 1-2 form and serve,
#     ZooKeeper's member 3 does not join and keel logs its refusal.
#  5. SASL enabled, not required (learnerRequireSasl=false, serverRequireSasl=false) on
#     keel,keel,zk: forms and replicates with no exchange at all.
#  6. keel only: serverRequireSasl without enableSasl, serverRequireSasl without
#     learnerRequireSasl (exit 2, a bad zoo.cfg), a missing QuorumLearner section and a
#     Kerberos section (exit 1) stop start-up with an error naming the keys or section.
# Exit 0 when every check passes; one line per check and a summary.
# Work dir: ${WORK:-/tmp/keel-compat/quorum-sasl}. Ports 16000-16999 (QSASL_PORT_BASE).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

WORK=${WORK:-/tmp/keel-compat/quorum-sasl}
BASE=${QSASL_PORT_BASE:-16000}
need_kazoo_and_keel
export ENSEMBLE_TICK_MS=500

rm -rf "$WORK"; mkdir -p "$WORK"

# JAAS files: the QuorumServer section knows user test; the QuorumLearner section logs
# in as test with the right password (good.jaas) or a wrong one (bad.jaas).
jaas() { # FILE LEARNER_PASSWORD
  cat > "$1" <<EOF
QuorumServer {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_test="mypassword";
};
QuorumLearner {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="test"
       password="$2";
};
EOF
}
jaas "$WORK/good.jaas" mypassword
jaas "$WORK/bad.jaas" wrongpassword

# Per-member settings: QSASL_MODE_<i> (required: enable + both require flags, default;
# optional: enable only; off: no quorum.auth keys), QSASL_JAAS_<i> (good | bad). keel
# reads the JAAS path from zoo.cfg; a ZooKeeper member from its JVM flags, which
# zk-exec.sh takes from ZK_JVMFLAGS (ZK_JAAS names the file for all ZooKeeper members).
member_sasl_cfg() { # I
  local mode jaas
  mode=$(eval echo "\${QSASL_MODE_$1:-required}")
  jaas=$(eval echo "\${QSASL_JAAS_$1:-good}")
  echo "java.security.auth.login.config=$WORK/$jaas.jaas"
  case $mode in
  required) printf '%s\n' quorum.auth.enableSasl=true quorum.auth.learnerRequireSasl=true \
    quorum.auth.serverRequireSasl=true ;;
  optional) echo quorum.auth.enableSasl=true ;;
  off) ;;
  esac
}
export ENSEMBLE_MEMBER_CFG=member_sasl_cfg
export ZK_JVMFLAGS="-Djava.security.auth.login.config=$WORK/good.jaas"

# shellcheck source=quorum_lib.sh
source "$HERE/quorum_lib.sh"

RESTART_DROP='^quorum\.auth\.\|^java\.security\.auth\.login\.config='  # restart_member (quorum_lib.sh) rewrites these lines

KEEL_SERVED='quorum SASL: learner 127\.0\.0\.1:[0-9]+ authenticated as test'
ZK_SERVED='Successfully completed the authentication using SASL. learner addr'

# ------------------------------------------------ 1: a keel ensemble with SASL required
A=$WORK/keel-sasl; DIRS+=("$A"); b=$(pick_base "$BASE")
check "1: keel x3 with quorum SASL required forms" start_ensemble keel "$A" "$b"
check "1: a write on member 1 reads back on member 3" replicates "$(cport "$b" 1)" "$(cport "$b" 3)" /qsasl-a1
check "1: a write on member 3 reads back on member 2" replicates "$(cport "$b" 3)" "$(cport "$b" 2)" /qsasl-a2
for i in 1 2 3; do
  check "1: member $i logs learners it authenticated" logged "$A/m$i/log" -- "$KEEL_SERVED"
done
stop_ensemble "$A"

# ------------------------------------------------ 2: members that are refused
B=$WORK/keel-refused; DIRS+=("$B"); b=$(pick_base $((BASE + 100)))
QSASL_JAAS_3=bad
ENSEMBLE_NO_WAIT=1 start_ensemble keel "$B" "$b"
sleep 1
check "2: the three members run (member 3 with a wrong password)" running "$B"
check "2: members 1-2 form without member 3" wait_modes "$B" "follower leader " 1 2
check "2: member 3 (wrong password) does not join" stays_out "$B"
check "2: members 1-2 serve: a write on 1 reads back on 2" replicates "$(cport "$b" 1)" "$(cport "$b" 2)" /qsasl-b
check "2: the wrong password's refusal is logged by members 1-2" \
  logged "$B/m1/log" "$B/m2/log" -- 'quorum SASL: failed to authenticate learner 127\.0\.0\.1:[0-9]+: DIGEST-MD5: digest response format violation. Mismatched response'
check "2: member 3 logs that its credentials are refused" \
  logged "$B/m3/log" -- 'quorum SASL: authentication against server\.[12] at .* failed: .*refused this member.s credentials'
QSASL_JAAS_3=good QSASL_MODE_3=off; restart_member "$B" 3
check "2: member 3 without quorum SASL does not join" stays_out "$B"
check "2: its connections are refused, logged" \
  logged "$B/m1/log" "$B/m2/log" -- 'failed to authenticate learner 127\.0\.0\.1:[0-9]+: Learner not trying to authenticate and authentication is required'
unset QSASL_MODE_3; restart_member "$B" 3
check "2: member 3 with the right password joins" wait_modes "$B" "follower follower leader " 1 2 3
check "2: and reads the write made without it" reads_back "$(cport "$b" 3)" /qsasl-b "via-$(cport "$b" 1)"
unset QSASL_JAAS_3
stop_ensemble "$B"

# ------------------------------------------------ 3: mixed with real ZooKeeper 3.8
mixed() { # LABEL KINDS BASE ZK_MEMBER KEEL_MEMBER
  local dir=$WORK/$1 b
  b=$(pick_base "$3")
  DIRS+=("$dir")
  mixed_forms 3 "$2" "$dir" "$b" "$4" "$5" "quorum SASL required" "/qsasl-$1"
  check "3: $2: ZooKeeper (member $4) authenticated learners" logged "$dir/m$4/log" -- "$ZK_SERVED"
  check "3: $2: keel (member $5) authenticated learners" logged "$dir/m$5/log" -- "$KEEL_SERVED"
  check "3: $2: keel (member $5) authenticated to ZooKeeper" \
    logged "$dir/m$5/log" -- "quorum SASL: authenticated to server\.$4 at .* as test"
  stop_ensemble "$dir"
}
mixed mixed-keel-leads zk,keel,keel $((BASE + 200)) 1 2
mixed mixed-zk-leads keel,zk,zk $((BASE + 300)) 3 1

# ------------------------------------------------ 4: a ZooKeeper member refused by keel
R=$WORK/zk-refused; DIRS+=("$R"); b=$(pick_base $((BASE + 400)))
ZK_JVMFLAGS="-Djava.security.auth.login.config=$WORK/bad.jaas" ENSEMBLE_NO_WAIT=1 \
  start_ensemble keel,keel,zk "$R" "$b"
sleep 1
check "4: keel 1-2 form without ZooKeeper's member 3 (wrong password)" wait_modes "$R" "follower leader " 1 2
check "4: ZooKeeper's member 3 does not join" stays_out "$R"
check "4: keel 1-2 serve: a write on 2 reads back on 1" replicates "$(cport "$b" 2)" "$(cport "$b" 1)" /qsasl-r
check "4: keel logs ZooKeeper's learner refused" \
  logged "$R/m1/log" "$R/m2/log" -- 'quorum SASL: failed to authenticate learner 127\.0\.0\.1:[0-9]+: DIGEST-MD5: .*Mismatched response'
stop_ensemble "$R"

# ------------------------------------------------ 5: enabled, not required
O=$WORK/optional; DIRS+=("$O"); b=$(pick_base $((BASE + 450)))
QSASL_MODE_1=optional QSASL_MODE_2=optional QSASL_MODE_3=optional
check "5: keel,keel,zk with quorum SASL enabled, not required, forms" start_ensemble keel,keel,zk "$O" "$b"
check "5: a write via ZooKeeper (member 3) reads back on keel (member 1)" \
  replicates "$(cport "$b" 3)" "$(cport "$b" 1)" /qsasl-o
no_exchange() { ! grep -qE "quorum SASL: (learner|authenticated)" "$O/m1/log" "$O/m2/log"; }
check "5: no SASL exchange ran (no learner sends one unless learnerRequireSasl)" no_exchange
unset QSASL_MODE_1 QSASL_MODE_2 QSASL_MODE_3
stop_ensemble "$O"

# ------------------------------------------------ 6: bad settings stop start-up
refuses() { # RC PATTERN CFG_LINES...   keel exits RC within 10 s (2: a zoo.cfg key, as
  # ZooKeeper's ConfigException; 1: a failed start), its output matching PATTERN
  local want=$1 pattern=$2 d=$WORK/refuses; shift 2
  rm -rf "$d"; mkdir -p "$d/data"; echo 1 > "$d/data/myid"
  printf '%s\n' tickTime=500 initLimit=10 syncLimit=5 "dataDir=$d/data" admin.enableServer=false \
    "clientPort=$((BASE + 491))" "server.1=127.0.0.1:$((BASE + 492)):$((BASE + 493))" \
    "server.2=127.0.0.1:$((BASE + 494)):$((BASE + 495))" "$@" > "$d/zoo.cfg"
  timeout 10 "$KEEL_BIN" "$d/zoo.cfg" > "$d/log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] && grep -qE "$pattern" "$d/log" || { echo "  exit $rc; $(tail -n 1 "$d/log")" >&2; return 1; }
}
printf '%s\n' 'QuorumServer { org.apache.zookeeper.server.auth.DigestLoginModule required user_test="p"; };' \
  > "$WORK/server-only.jaas"
printf '%s\n' 'QuorumServer { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };' \
  'QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };' > "$WORK/krb-noprincipal.jaas"
check "6: serverRequireSasl without enableSasl stops start-up, naming both keys" \
  refuses 2 'quorum.auth.enableSasl is disabled, so cannot enable quorum.auth.serverRequireSasl' \
  quorum.auth.serverRequireSasl=true quorum.auth.learnerRequireSasl=true
check "6: serverRequireSasl without learnerRequireSasl stops start-up, naming both keys" \
  refuses 2 'quorum.auth.learnerRequireSasl is disabled, so cannot enable quorum.auth.serverRequireSasl' \
  quorum.auth.enableSasl=true quorum.auth.serverRequireSasl=true
check "6: a JAAS file without the QuorumLearner section stops start-up, naming it" \
  refuses 1 "section 'QuorumLearner' could not be found" quorum.auth.enableSasl=true \
  "java.security.auth.login.config=$WORK/server-only.jaas"
check "6: a Kerberos QuorumLearner section without a principal stops start-up, naming it" \
  refuses 1 "JAAS section 'QuorumLearner': the Krb5LoginModule entry names no principal" \
  quorum.auth.enableSasl=true "java.security.auth.login.config=$WORK/krb-noprincipal.jaas"

# ------------------------------------------------ 7: Kerberos (GSSAPI) between members
# A throw-away KDC (sasl/kdc.sh); one keytab holds the service principal every member
# accepts with (zkquorum/localhost, quorum.auth.kerberos.servicePrincipal's default) and
# the learner principal each member logs in with (learner/127.0.0.1: its host is the
# server lines' host, which the server side checks); a second learner principal names
# a host the server lines do not (learner/10.9.9.9).
# shellcheck source=../sasl/kdc.sh
source "$HERE/../sasl/kdc.sh"
KDC=$WORK/kdc
krb_jaas() { # FILE LEARNER_PRINCIPAL
  cat > "$1" <<EOF
QuorumServer {
       com.sun.security.auth.module.Krb5LoginModule required
       useKeyTab=true keyTab="$KDC/quorum.keytab" storeKey=true useTicketCache=false
       principal="zkquorum/localhost@KEEL.TEST";
};
QuorumLearner {
       com.sun.security.auth.module.Krb5LoginModule required
       useKeyTab=true keyTab="$KDC/quorum.keytab" storeKey=true useTicketCache=false
       principal="$2";
};
EOF
}
kdc_ready() {
  start_kdc "$KDC" $((BASE + 990)) KEEL.TEST &&
    kdc_principal "$KDC" zkquorum/localhost "$KDC/quorum.keytab" &&
    kdc_principal "$KDC" learner/127.0.0.1 "$KDC/quorum.keytab" &&
    kdc_principal "$KDC" learner/10.9.9.9 "$KDC/quorum.keytab" &&
    krb_jaas "$WORK/krb.jaas" learner/127.0.0.1@KEEL.TEST &&
    krb_jaas "$WORK/krb-elsewhere.jaas" learner/10.9.9.9@KEEL.TEST
}
check "7: a KDC with the quorum service and learner principals" kdc_ready
KEEL_KRB_SERVED='quorum SASL: learner 127\.0\.0\.1:[0-9]+ authenticated as learner/127\.0\.0\.1@KEEL\.TEST'
K=$WORK/keel-krb; DIRS+=("$K"); b=$(pick_base $((BASE + 600)))
QSASL_JAAS_1=krb QSASL_JAAS_2=krb QSASL_JAAS_3=krb
check "7: keel x3 with Kerberos quorum SASL required forms" start_ensemble keel "$K" "$b"
check "7: a write on member 2 reads back on member 3" replicates "$(cport "$b" 2)" "$(cport "$b" 3)" /qsasl-k
for i in 1 2 3; do
  check "7: member $i logs Kerberos learners it authenticated" logged "$K/m$i/log" -- "$KEEL_KRB_SERVED"
done
QSASL_JAAS_3=krb-elsewhere; restart_member "$K" 3
check "7: member 3 with a learner principal of another host does not join" stays_out "$K"
check "7: its refusal is logged (not authorized to connect)" \
  logged "$K/m1/log" "$K/m2/log" -- 'learner/10\.9\.9\.9@KEEL\.TEST is not authorized to connect'
QSASL_JAAS_3=krb; restart_member "$K" 3
check "7: member 3 with its own host's principal joins" wait_modes "$K" "follower follower leader " 1 2 3
stop_ensemble "$K"
# Mixed with ZooKeeper 3.8, every member on Kerberos (ZooKeeper takes the JAAS file
# and the KDC's krb5.conf as JVM flags).
krb_mixed() { # LABEL KINDS BASE ZK_MEMBER KEEL_MEMBER
  local dir=$WORK/$1 b
  b=$(pick_base "$3")
  DIRS+=("$dir")
  ZK_JVMFLAGS="-Djava.security.auth.login.config=$WORK/krb.jaas -Djava.security.krb5.conf=$KRB5_CONFIG" \
    mixed_forms 7 "$2" "$dir" "$b" "$4" "$5" "Kerberos quorum SASL required" "/qsasl-$1"
  check "7: $2: ZooKeeper (member $4) authenticated Kerberos learners" \
    logged "$dir/m$4/log" -- "$ZK_SERVED"
  check "7: $2: keel (member $5) authenticated Kerberos learners" \
    logged "$dir/m$5/log" -- "$KEEL_KRB_SERVED"
  stop_ensemble "$dir"
}
krb_mixed krb-keel-leads zk,keel,keel $((BASE + 700)) 1 2
krb_mixed krb-zk-leads keel,zk,zk $((BASE + 800)) 3 1
unset QSASL_JAAS_1 QSASL_JAAS_2 QSASL_JAAS_3
stop_kdc "$KDC"

echo "quorum-sasl: $passed passed, $failed failed"
for f in "${failures[@]}"; do echo "  failed: $f"; done
[ "$failed" -eq 0 ]
