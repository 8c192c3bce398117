#!/bin/bash
# Healthy means a client gets metadata: a Metadata request (v4: all topics) on the port given (default
# 9092) must answer with at least one broker. Plain bash, so the check needs no JVM start.
set -euo pipefail
port=${1:-9092}
exec 3<>"/dev/tcp/127.0.0.1/$port"
# size 15 | api key 3 | version 4 | correlation id 1 | no client id | all topics (-1) | no auto-create
printf '\x00\x00\x00\x0f\x00\x03\x00\x04\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\x00' >&3
# size | correlation id | throttle ms | broker count: the 4th int32 of the answer
brokers=$(head -c 16 <&3 | od -An -tu1 | awk '{n = 0; for (i = 13; i <= 16; i++) n = n * 256 + $i; print n}')
[ "${brokers:-0}" -ge 1 ]
