#!/bin/bash
# KAFKA_<NAME> variables become server properties as in the apache/kafka image (strip the prefix, lower
# case, `___` -> `-`, `__` -> `_`, `_` -> `.`); the storage is formatted once with CLUSTER_ID (one is
# drawn when unset), so a restarted container keeps its data and its id.
set -euo pipefail
CONFIG=/opt/kafka/config
JAVA=(java -XX:+UseG1GC -Djava.awt.headless=true "-Dlog4j2.configurationFile=$CONFIG/log4j2.properties")
CLASSPATH="/opt/kafka/libs/*"
JVM_ONLY="KAFKA_HEAP_OPTS KAFKA_OPTS KAFKA_JVM_PERFORMANCE_OPTS KAFKA_LOG4J_OPTS"

properties() {
  local name value key
  while IFS='=' read -r name value; do
    case " $JVM_ONLY " in *" $name "*) continue ;; esac
    key=$(echo "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' | sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g')
    echo "$key=$value"
  done < <(env | grep -E '^KAFKA_[A-Z0-9_]+=' | sort)
}

if [ "${1:-}" = kafka ]; then
  properties > "$CONFIG/server.properties"
  data=${KAFKA_LOG_DIRS:-/var/lib/kafka/data}
  if [ ! -f "$data/meta.properties" ]; then
    id=${CLUSTER_ID:-$("${JAVA[@]}" -cp "$CLASSPATH" kafka.tools.StorageTool random-uuid | tail -n 1)}
    "${JAVA[@]}" -cp "$CLASSPATH" kafka.tools.StorageTool format -t "$id" -c "$CONFIG/server.properties" >/dev/null
  fi
  read -r -a heap <<< "${KAFKA_HEAP_OPTS:--Xmx512m}"
  exec "${JAVA[@]}" "${heap[@]}" -cp "$CLASSPATH" kafka.Kafka "$CONFIG/server.properties"
fi
exec "$@"
