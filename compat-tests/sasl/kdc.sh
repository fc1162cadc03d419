# A throw-away MIT Kerberos KDC for the SASL GSSAPI tests (source this file).
#   start_kdc DIR PORT [REALM]   realm (default KEEL.TEST) in DIR, krb5kdc on 127.0.0.1:PORT
#   kdc_principal DIR NAME KEYTAB  add principal NAME (random key) and export it to KEYTAB
#   stop_kdc DIR                 stop that KDC (only the pid it wrote)
# start_kdc exports KRB5_CONFIG and KRB5_KDC_PROFILE (DIR/krb5.conf, DIR/kdc.conf), which
# kinit, klist, kadmin.local, the GSSAPI library and (via -Djava.security.krb5.conf)
# Java read. Needs Debian's krb5-kdc, krb5-admin-server and krb5-user (setup.sh).

start_kdc() {
  local dir=$1 port=$2 realm=${3:-KEEL.TEST}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  cat > "$dir/krb5.conf" <<CONF
[libdefaults]
  default_realm = $realm
  dns_lookup_kdc = false
  dns_lookup_realm = false
  rdns = false
  dns_canonicalize_hostname = false
  udp_preference_limit = 1
[realms]
  $realm = {
    kdc = 127.0.0.1:$port
  }
CONF
  cat > "$dir/kdc.conf" <<CONF
[kdcdefaults]
  kdc_ports = $port
  kdc_tcp_ports = $port
[realms]
  $realm = {
    database_name = $dir/principal
    key_stash_file = $dir/stash
    acl_file = $dir/kadm5.acl
    max_life = 1h
    max_renewable_life = 1h
  }
[logging]
  kdc = FILE:$dir/kdc.log
CONF
  : > "$dir/kadm5.acl"
  export KRB5_CONFIG=$dir/krb5.conf KRB5_KDC_PROFILE=$dir/kdc.conf
  # A KDC left on the port (krb5kdc does not fail when it cannot bind) would answer
  # with another database.
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "start_kdc: port $port is already in use" >&2
    return 1
  fi
  kdb5_util -r "$realm" create -s -P "kdc-master-$$" >"$dir/create.log" 2>&1 ||
    { echo "kdb5_util create failed: $(cat "$dir/create.log")" >&2; return 1; }
  krb5kdc -r "$realm" -P "$dir/kdc.pid" ||
    { echo "krb5kdc did not start" >&2; return 1; }
  local i
  for i in $(seq 50); do
    [ -s "$dir/kdc.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "krb5kdc is not listening on port $port" >&2
  return 1
}

kdc_principal() {
  local dir=$1 name=$2 keytab=$3
  kadmin.local -q "addprinc -randkey $name" >>"$dir/kadmin.log" 2>&1 &&
    kadmin.local -q "ktadd -k $keytab $name" >>"$dir/kadmin.log" 2>&1 ||
    { echo "kadmin.local failed for $name: $(tail -3 "$dir/kadmin.log")" >&2; return 1; }
}

stop_kdc() {
  local dir=$1 pid
  pid=$(cat "$dir/kdc.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null
  rm -f "$dir/kdc.pid"
}
