#!/usr/bin/env bash
# with-redis.sh CMD [ARGS...]: install redis-server (and Debian's python3-zmq,
# used by the real-libzmq peer test) when missing, start a throwaway Redis on a
# free loopback port with no persistence, run CMD with MESHNODE_TEST_REDIS_ADDR
# pointing at it, and stop Redis afterwards whatever CMD's outcome.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
/usr/bin/python3 -c 'import zmq' >/dev/null 2>&1 || need+=(python3-zmq)
if [ ${#need[@]} -gt 0 ]; then
  echo "with-redis: installing ${need[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $(( 20000 + RANDOM % 20000 ))
}

port=$(free_port)
redis_dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes --save "" --appendonly no \
  --dir "$redis_dir" --daemonize no --loglevel warning >"$redis_dir/redis.log" 2>&1 &
redis_pid=$!
cleanup() {
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  rm -rf "$redis_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
  echo "with-redis: redis-server did not start"; cat "$redis_dir/redis.log"; exit 1
fi
echo "with-redis: throwaway redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port"
export MESHNODE_TEST_REDIS_ADDR="127.0.0.1:$port"
"$@"
