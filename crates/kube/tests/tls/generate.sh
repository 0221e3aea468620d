#!/bin/sh
# Regenerates the test certificates of tests/webhook_tls.rs (run once; the output is checked in).
# Two unrelated self-signed end-entity certificates (not CAs: rustls refuses a CA certificate as a
# server's leaf) for localhost / 127.0.0.1, valid for 100 years, with P-256 keys in PKCS#8.
# `server.*` is what the webhook serves; `other.*` is a certificate a client may wrongly trust
# (and the one the reload test swaps in).
# These keys protect nothing: never use them outside the tests.
set -eu
cd "$(dirname "$0")"
for name in server other; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$name.key" -out "$name.crt" -days 36500 -subj "/CN=aware-webhook-test-$name" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -addext "basicConstraints=critical,CA:FALSE" \
    -addext "keyUsage=critical,digitalSignature" \
    -addext "extendedKeyUsage=serverAuth"
done

# A CA and a serving certificate for the in-cluster Service name, made the way
# crates/kube/README.md tells operators to (RSA, openssl x509 -req with the same extensions),
# but valid for 100 years instead of one. The CA key is not kept.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 36500 -subj "/CN=aware-webhook-ca"
openssl req -newkey rsa:2048 -nodes -keyout svc.key -out svc.csr -subj "/CN=aware-webhook.aware-system.svc"
printf 'subjectAltName=DNS:aware-webhook.aware-system.svc,DNS:aware-webhook.aware-system.svc.cluster.local\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > ext.cnf
openssl x509 -req -in svc.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out svc.crt -days 36500 -extfile ext.cnf
rm ca.key ca.srl svc.csr ext.cnf
