#!/usr/bin/env bash
# Starts throwaway PostgreSQL and InfluxDB 1.x servers on 127.0.0.1 for the store's integration
# tests, and a Prometheus server scraping the simulated-pod exporter for the Kubernetes crate's
# end-to-end test, installing them from Debian's packages if needed. Prints `export …` lines for the test
# run:   eval "$(bash .ci/services.sh start)"   …   bash .ci/services.sh stop
# Nothing depends on a server left over on the machine: each start uses fresh directories and
# its own ports.
set -euo pipefail
STATE=${AWARE_SERVICES_DIR:-/tmp/aware-services}
# Every port below Linux's ephemeral range (32768–60999 by default): a port in it can be taken
# at any moment as the local end of an outgoing connection (a scrape, a test's client), and a
# bind then fails with "Address already in use" (the exporter's did once, at 59464).
PG_PORT=25432
INFLUX_PORT=28086
PROM_PORT=29090
# Where aware-kube's end-to-end test serves simulated pods' metrics; Prometheus scrapes it every second.
EXPORTER_ADDR=127.0.0.1:29464

log() { echo "services: $*" >&2; }

install() {
  local missing=()
  [ -x /usr/lib/postgresql/15/bin/initdb ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  command -v influxd >/dev/null 2>&1 || missing+=(influxdb)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
  fi
}

stop() {
  if [ -f "$STATE/pg/postmaster.pid" ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$STATE/pg" -m immediate stop >/dev/null 2>&1 || true
  fi
  if [ -f "$STATE/influxd.pid" ]; then
    kill "$(cat "$STATE/influxd.pid")" 2>/dev/null || true
  fi
  if [ -f "$STATE/prometheus.pid" ]; then
    kill "$(cat "$STATE/prometheus.pid")" 2>/dev/null || true
  fi
  rm -rf "$STATE"
}

case "${1:-start}" in
  start)
    install
    PG_BIN=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
    stop
    mkdir -p "$STATE/pg" "$STATE/influx" "$STATE/prometheus"
    chown postgres:postgres "$STATE/pg"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$STATE/pg" --auth=trust --username=aware -E UTF8 >/dev/null
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$STATE/pg" -l "$STATE/pg/server.log" -w \
      -o "-p $PG_PORT -k $STATE/pg -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
    runuser -u postgres -- "$PG_BIN/createdb" -h 127.0.0.1 -p $PG_PORT -U aware aware_test
    cat > "$STATE/influx/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$((INFLUX_PORT + 2))"
[meta]
  dir = "$STATE/influx/meta"
[data]
  dir = "$STATE/influx/data"
  wal-dir = "$STATE/influx/wal"
  query-log-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$INFLUX_PORT"
  auth-enabled = false
  log-enabled = false
CONF
    influxd -config "$STATE/influx/influxdb.conf" >"$STATE/influxd.log" 2>&1 &
    echo $! > "$STATE/influxd.pid"
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$INFLUX_PORT/ping" >/dev/null 2>&1 && break
      sleep 0.1
    done
    curl -sf "http://127.0.0.1:$INFLUX_PORT/ping" >/dev/null || { log "influxd did not start"; cat "$STATE/influxd.log" >&2; exit 1; }
    cat > "$STATE/prometheus/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: aware-sim
    static_configs:
      - targets: ["$EXPORTER_ADDR"]
CONF
    prometheus --config.file="$STATE/prometheus/prometheus.yml" --storage.tsdb.path="$STATE/prometheus/data" \
      --web.listen-address="127.0.0.1:$PROM_PORT" >"$STATE/prometheus.log" 2>&1 &
    echo $! > "$STATE/prometheus.pid"
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && break
      sleep 0.1
    done
    curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null || { log "prometheus did not start"; cat "$STATE/prometheus.log" >&2; exit 1; }
    echo "export AWARE_TEST_POSTGRES_URL=postgres://aware@127.0.0.1:$PG_PORT/aware_test"
    echo "export AWARE_TEST_INFLUXDB_URL=influxdb://127.0.0.1:$INFLUX_PORT/aware_test"
    echo "export AWARE_TEST_PROMETHEUS_URL=http://127.0.0.1:$PROM_PORT"
    echo "export AWARE_TEST_EXPORTER_ADDR=$EXPORTER_ADDR"
    echo "export AWARE_REQUIRE_SERVERS=1"
    ;;
  stop)
    PG_BIN=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)")
    stop
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
