#!/bin/bash
# The node's defaults (paths under /usr/share/opensearch, every interface, one node), then each variable
# whose name holds a dot as a setting; OPENSEARCH_JAVA_OPTS holds the heap.
set -euo pipefail
HOME_DIR=/usr/share/opensearch
if [ "${1:-}" = opensearch ]; then
  settings=(
    "path.home=$HOME_DIR" "path.data=$HOME_DIR/data" "path.logs=$HOME_DIR/logs"
    "path.repo=$HOME_DIR/snapshots" "cluster.name=toolkit" "node.name=toolkit"
    "network.host=0.0.0.0" "http.port=9200" "transport.port=9300" "discovery.type=single-node"
    "logger.level=INFO"
  )
  while IFS= read -r line; do settings+=("$line"); done < <(env | grep -E '^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+=' | sort)
  mkdir -p "$HOME_DIR/data" "$HOME_DIR/logs"
  read -r -a opts <<< "${OPENSEARCH_JAVA_OPTS:--Xms512m -Xmx512m}"
  exec java -XX:+UseG1GC -Djava.awt.headless=true "${opts[@]}" \
    -cp "$HOME_DIR/lib/*:$HOME_DIR/launcher" OpenSearchNode "${settings[@]}"
fi
exec "$@"
