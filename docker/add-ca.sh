#!/bin/sh
# Trust a CA bundle handed to the build (docker/build/ca-bundle.pem, copied there by docker/stack.sh
# from ONCEFLOW_CA_BUNDLE): each of its certificates that Debian's bundle lacks becomes a file under
# /usr/local/share/ca-certificates, then update-ca-certificates adds them to /etc/ssl/certs (pip,
# uv, curl) and, through ca-certificates-java's hook, to Java's cacerts (Maven). An empty bundle:
# nothing to add (a machine whose registries need no CA of their own).
set -eu
bundle="$1"
if [ ! -s "$bundle" ]; then
  echo "add-ca: no CA bundle handed to the build"
  exit 0
fi
dir=/usr/local/share/ca-certificates/onceflow
mkdir -p "$dir"
awk -v dir="$dir" -v sys=/etc/ssl/certs/ca-certificates.crt '
  BEGIN {
    while ((getline line < sys) > 0) {
      if (line ~ /BEGIN CERTIFICATE/) cur = ""
      cur = cur line "\n"
      if (line ~ /END CERTIFICATE/) known[cur] = 1
    }
  }
  /BEGIN CERTIFICATE/ { cert = ""; inside = 1 }
  inside { cert = cert $0 "\n" }
  /END CERTIFICATE/ {
    inside = 0
    if (!(cert in known)) { n++; f = sprintf("%s/extra-%03d.crt", dir, n); printf "%s", cert > f; close(f) }
  }
  END { print "add-ca: " n + 0 " certificate(s) not in the Debian bundle" }' "$bundle"
update-ca-certificates
