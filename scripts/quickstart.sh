#!/usr/bin/env bash
# The main job: set everything up, start an embedded single broker, and run the seeds'
# single-node quickstart against it: create a topic, produce, consume from the beginning.
# Every step prints the `strom` command it runs, so you can repeat them by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

data_dir=$(mktemp -d "${TMPDIR:-/tmp}/strom-quickstart.XXXXXX")
log="$data_dir/broker.log"
broker_pid=""
cleanup() {
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        kill -TERM "$broker_pid"
        for _ in $(seq 100); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$data_dir"
}
trap cleanup EXIT

run() { echo "\$ $*"; "$@"; }

echo "== 1. start a broker (port 0: any free port; data in $data_dir)"
# --parent-pid: the broker stops by itself if this script dies without its cleanup (kill -9)
strom server-start --parent-pid $$ --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$data_dir/data" \
    >"$log" 2>&1 &
broker_pid=$!
for _ in $(seq 200); do
    [ -s "$data_dir/data/strom.port" ] && break
    kill -0 "$broker_pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.05
done
[ -s "$data_dir/data/strom.port" ] || { echo "broker did not start"; cat "$log"; exit 1; }
bootstrap="127.0.0.1:$(cat "$data_dir/data/strom.port")"
grep "listening on" "$log"

echo "== 2. create a topic"
run strom topics --bootstrap-server "$bootstrap" --create --topic quickstart-events --partitions 1 --replication-factor 1
run strom topics --bootstrap-server "$bootstrap" --describe --topic quickstart-events

echo "== 3. produce three events"
printf 'This is my first event\nThis is my second event\nThis is my third event\n' | tee /dev/stderr |
    strom console-producer --bootstrap-server "$bootstrap" --topic quickstart-events
echo "\$ strom console-producer --bootstrap-server $bootstrap --topic quickstart-events  (the lines above on stdin)"

echo "== 4. consume them from the beginning"
run strom console-consumer --bootstrap-server "$bootstrap" --topic quickstart-events --from-beginning \
    --max-messages 3 --timeout-ms 10000 --property print.offset=true

echo "== done: the broker stops and its data dir is removed"
