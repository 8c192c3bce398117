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
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "error: missing ${need[*]}; install them (on Debian: sudo apt-get install -y ${need[*]}) and rerun" >&2
  exit 2
fi
echo "installing ${need[*]} (apt-get)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
