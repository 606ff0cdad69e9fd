#!/usr/bin/env bash
# kcat with librdkafka's fetch.queue.backoff.ms set for consumers (default 1000 ms; here
# ${FETCH_QUEUE_BACKOFF_MS:-10}). For ../shared/bench/compare.sh, to measure both brokers
# without librdkafka's one-second queue backoff (README, "How strom differs from Kafka"):
#   KCAT=$PWD/scripts/kcat_fetch_queue_backoff.sh PARTITIONS=512 ../shared/bench/compare.sh -- ...
for arg in "$@"; do
  if [ "$arg" = "-C" ]; then
    exec kcat "$@" -X "fetch.queue.backoff.ms=${FETCH_QUEUE_BACKOFF_MS:-10}"
  fi
done
exec kcat "$@"
