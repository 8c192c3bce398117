#!/usr/bin/env bash
# Installs the Debian packages the local stack runs on, where they are missing (a fresh machine).
# `make venv` calls it, so `make demo` and `make test` set a fresh machine up on their own.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v mvn >/dev/null || need+=(maven)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
# javac: `devstack fetch` builds the toolkit's Connect plugin (connect-plugins/) with Maven.
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
# openssl: the secured Kafka listener's CA and certificates are made with it at `devstack up`.
command -v openssl >/dev/null || need+=(openssl)
# chromium: the docs test screenshots the built site headless and checks its navigation rendered.
command -v chromium >/dev/null || need+=(chromium)
# A German locale: the integration tests show money formatted for it being refused by pre-flight
# (Debezium cannot parse "1.234,50 €"). Postgres sees a locale generated before it starts.
has_locale() { locale -a 2>/dev/null | grep -qiE '^de_DE\.utf-?8$'; }
has_locale || command -v locale-gen >/dev/null || need+=(locales)
[ ${#need[@]} -eq 0 ] && has_locale && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "error: missing ${need[*]:-} and/or the de_DE.UTF-8 locale; install them (on Debian: sudo apt-get" \
    "install -y ${need[*]:-locales}; enable de_DE.UTF-8 in /etc/locale.gen; sudo locale-gen) and rerun" >&2
  exit 2
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! has_locale; then
  echo "generating the de_DE.UTF-8 locale"
  grep -q '^de_DE.UTF-8 UTF-8' /etc/locale.gen 2>/dev/null || echo 'de_DE.UTF-8 UTF-8' >> /etc/locale.gen
  locale-gen >/dev/null
fi
