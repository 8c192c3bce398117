#!/usr/bin/env bash
# Runs a command with a Docker engine answering. An engine that answers is used as it is; otherwise
# dockerd is started for the command and stopped after it (only an engine started here is stopped).
# Installs what the container stack needs from Debian where it is missing, as root: docker.io (the
# engine), debootstrap (the images' base) and docker-compose (`make demo-compose`).
set -euo pipefail

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v docker-compose >/dev/null || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: missing ${need[*]}; install them (on Debian: sudo apt-get install -y ${need[*]}) and rerun" >&2
    exit 2
  fi
  echo "installing ${need[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log=${TOOLKIT_DOCKERD_LOG:-/tmp/toolkit-dockerd.log}
  echo "no Docker engine answers: starting dockerd for this run (log: $log)"
  dockerd >"$log" 2>&1 &
  engine=$!
  trap 'kill "$engine" 2>/dev/null; wait "$engine" 2>/dev/null || true' EXIT
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$engine" 2>/dev/null || break
    sleep 0.5
  done
  if ! docker info >/dev/null 2>&1; then
    echo "error: dockerd did not answer within 30 s; the last lines of $log:" >&2
    tail -n 15 "$log" >&2
    exit 2
  fi
fi
"$@"
