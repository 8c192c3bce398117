#!/usr/bin/env bash
# The demo against docker/compose.yaml on the images built here: build what changed, `up`, wait until
# every service is healthy, run the demo as an external stack, then `down -v` whatever happened, and
# fail if a container, network or volume of the project is left.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PROJECT=kafka-toolkit
ENV_FILE=$PWD/.stack/images.env
compose() { docker-compose -p "$PROJECT" --env-file "$ENV_FILE" -f docker/compose.yaml "$@"; }
leftovers() {
  docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"
  docker network ls -q --filter "label=com.docker.compose.project=$PROJECT"
  docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT"
}

# compose publishes fixed ports (the Endpoints defaults): a taken one is named before anything starts.
for pair in postgres:55432 kafka:19092 connect:18083 redis:16379 apicurio:18080; do
  if (exec 3<>"/dev/tcp/127.0.0.1/${pair#*:}") 2>/dev/null; then
    echo "error: port ${pair#*:} (compose's ${pair%%:*}) is taken on 127.0.0.1; stop what holds it" \
      "(the local stack: make down) and run make demo-compose again" >&2
    exit 1
  fi
done
"$BIN/devstack" images build --env-file "$ENV_FILE"
trap 'compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
compose up -d
for _ in $(seq 1 90); do
  unhealthy=$(docker ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}} {{.Status}}' \
    | grep -v '(healthy)' || true)
  [ -z "$unhealthy" ] && break
  sleep 2
done
if [ -n "$unhealthy" ]; then
  echo "error: not healthy after 180 s: $unhealthy" >&2
  for name in $(echo "$unhealthy" | awk '{print $1}'); do
    echo "--- last log lines of $name ---" >&2
    docker logs --tail 20 "$name" >&2 || true
  done
  exit 1
fi
# Connect reaches Postgres and the registry by their service names, not the host's published ports.
TOOLKIT_STACK=external \
  TOOLKIT_CONNECT_PG_DSN=postgresql://postgres@postgres:5432/postgres \
  TOOLKIT_CONNECT_REGISTRY_URL=http://apicurio:8080 \
  "$BIN/python" -m demo.run "$@"
compose down -v --remove-orphans
trap - EXIT
left=$(leftovers)
if [ -n "$left" ]; then
  echo "error: docker-compose down -v left: $left" >&2
  exit 1
fi
echo "compose stack removed: no container, network or volume of $PROJECT is left"
