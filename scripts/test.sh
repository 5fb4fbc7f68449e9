#!/usr/bin/env bash
# make test: install what the tests need on a fresh machine (redis-server,
# Debian's python3-zmq for the real-libzmq peer test), start a throwaway
# loopback Redis with no persistence, run vet and the race-enabled test suite
# against it, and stop Redis even when the tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
/usr/bin/python3 -c 'import zmq' >/dev/null 2>&1 || need+=(python3-zmq)
if [ ${#need[@]} -gt 0 ]; then
  echo "make test: installing ${need[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

port=$(python3 - <<'PY' 2>/dev/null || echo 0
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
)
if [ "$port" = 0 ]; then port=$(( 20000 + RANDOM % 20000 )); fi
redis_dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes --save "" --appendonly no \
  --dir "$redis_dir" --daemonize no --loglevel warning >"$redis_dir/redis.log" 2>&1 &
redis_pid=$!
cleanup() {
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  rm -rf "$redis_dir"
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 100); do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
  sleep 0.1
done
redis-cli -p "$port" ping >/dev/null || { echo "redis-server did not start"; cat "$redis_dir/redis.log"; exit 1; }
echo "make test: throwaway redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port"
export MESHNODE_TEST_REDIS_ADDR="127.0.0.1:$port"

go vet ./...
go test -race -count=1 -timeout 20m "$@" ./...
