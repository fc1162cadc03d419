#!/usr/bin/env bash
# Test certificates made with the openssl CLI, shared by the TLS suites (tls/run.sh,
# ensemble/quorum_tls.sh). Source this file; each function works in the current
# directory and returns nonzero when openssl fails.
#   certs_ext_files                     writes ca.cnf (a CA's extensions), server.ext
#                                       (serverAuth + clientAuth, subjectAltName
#                                       localhost / 127.0.0.1: a server, or an ensemble
#                                       member, which is both ends) and client.ext
#                                       (clientAuth only)
#   certs_ca NAME SUBJECT               a self-signed CA: NAME.key, NAME.pem (2 days)
#   certs_leaf NAME CA SUBJECT [EXTFILE]
#                                       a certificate issued by CA: NAME.key (PKCS #8),
#                                       NAME.crt, NAME.pem (key + certificate, a PEM key
#                                       store); without EXTFILE an X.509 v1 certificate
#   certs_jks NAME CA PASSWORD          NAME.jks (NAME's key and certificate) and
#                                       CA.jks (CA's certificate) with keytool, JKS type

certs_ext_files() {
  printf '%s\n' '[v3_ca]' 'basicConstraints=critical,CA:TRUE' \
    'keyUsage=critical,keyCertSign,cRLSign' 'subjectKeyIdentifier=hash' > ca.cnf &&
  printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth,clientAuth' 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext &&
  printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=clientAuth' > client.ext
}

certs_ca() { # NAME SUBJECT
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout "$1.key" -out "$1.pem" \
    -subj "$2" -extensions v3_ca -config <(cat /etc/ssl/openssl.cnf ca.cnf) 2>/dev/null
}

certs_leaf() { # NAME CA SUBJECT [EXTFILE]
  local ext=()
  [ -n "${4:-}" ] && ext=(-extfile "$4")
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$3" 2>/dev/null &&
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
    -out "$1.crt" "${ext[@]}" 2>/dev/null &&
  cat "$1.key" "$1.crt" > "$1.pem"
}

certs_jks() { # NAME CA PASSWORD
  openssl pkcs12 -export -in "$1.crt" -inkey "$1.key" -name "$1" -passout "pass:$3" \
    -out "$1.p12" 2>/dev/null &&
  keytool -importkeystore -srckeystore "$1.p12" -srcstoretype PKCS12 -srcstorepass "$3" \
    -destkeystore "$1.jks" -deststoretype JKS -deststorepass "$3" -noprompt >/dev/null 2>&1 &&
  rm -f "$2.jks" &&
  keytool -importcert -alias "$2" -file "$2.pem" -keystore "$2.jks" -storetype JKS -storepass "$3" \
    -noprompt >/dev/null 2>&1
}
