#!/bin/bash
# Without a config file Redis' protected mode refuses every client that is not on the loopback, and a
# published port reaches the container from the bridge: the official image turns it off the same way.
# The port is published on the host's 127.0.0.1 only.
set -euo pipefail
if [ "${1:-}" = redis-server ]; then
  shift
  exec setpriv --reuid=redis --regid=redis --init-groups redis-server --protected-mode no "$@"
fi
exec "$@"
