#!/bin/bash
# Debezium's connect image contract: its short variables name the worker's main settings, and every
# CONNECT_<NAME> variable is the property <name> (lower case, `_` -> `.`).
set -euo pipefail
CONFIG=/kafka/config/worker.properties

short() {  # variable -> property, for the variables the Debezium image names itself
  cat <<MAP
BOOTSTRAP_SERVERS bootstrap.servers
GROUP_ID group.id
CONFIG_STORAGE_TOPIC config.storage.topic
OFFSET_STORAGE_TOPIC offset.storage.topic
STATUS_STORAGE_TOPIC status.storage.topic
KEY_CONVERTER key.converter
VALUE_CONVERTER value.converter
OFFSET_FLUSH_INTERVAL_MS offset.flush.interval.ms
ADVERTISED_HOST_NAME rest.advertised.host.name
ADVERTISED_PORT rest.advertised.port
MAP
}

properties() {
  local var key name value
  echo "plugin.path=/kafka/connect"
  echo "listeners=http://${REST_HOST_NAME:-0.0.0.0}:${REST_PORT:-8083}"
  while read -r var key; do
    [ -n "${!var:-}" ] && echo "$key=${!var}"
  done < <(short)
  while IFS='=' read -r name value; do
    echo "$(echo "${name#CONNECT_}" | tr '[:upper:]' '[:lower:]' | tr '_' '.')=$value"
  done < <(env | grep -E '^CONNECT_[A-Z0-9_]+=' | sort)
}

if [ "${1:-}" = connect ]; then
  mkdir -p "$(dirname "$CONFIG")"
  properties > "$CONFIG"
  read -r -a heap <<< "${HEAP_OPTS:--Xmx1g}"
  exec java -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties "${heap[@]}" \
    -cp "/opt/kafka/libs/*" org.apache.kafka.connect.cli.ConnectDistributed "$CONFIG"
fi
exec "$@"
