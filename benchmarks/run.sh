#!/usr/bin/env bash
# make bench: run every benchmark suite next to its same-run baseline and print
# medians and ratios. COUNT (default 5) sets -count; BENCHTIME (default 1s);
# SUITES (default all) names the suites to run, space-separated.
# hostrelocate runs one whole host Relocate of MESHNODE_BENCH_HOST_OBJECTS
# (default 10,000) objects per op: it takes HOST_BENCHTIME (default 1x), not
# BENCHTIME.
# Results are written to benchmarks/results/<date>/ as raw go test output.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-5}
benchtime=${BENCHTIME:-1s}
out="benchmarks/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"

known=" "
suite() { # [SUITE_BENCHTIME=… SUITE_TIMEOUT=…] suite NAME PACKAGE PAIRS...
  local name=$1 pkg=$2 bt=${SUITE_BENCHTIME:-$benchtime}; shift 2
  known+="$name "
  if [ -n "${SUITES:-}" ] && [[ " $SUITES " != *" $name "* ]]; then
    return
  fi
  if ! go list "$pkg" >/dev/null 2>&1; then
    echo "== $name: package $pkg not present, skipped"; return
  fi
  echo "== $name ($pkg, -count $count)"
  # go test's output goes to the file only; ratio prints its medians and
  # ratios, and the failures and "!!!" warnings in it. A failed run still
  # gets them printed, then make bench stops with its status.
  local rc=0 rrc=0
  ./scripts/with-redis.sh go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$bt" -timeout "${SUITE_TIMEOUT:-10m}" "$pkg" >"$out/$name.txt" || rc=$?
  go run ./benchmarks/ratio "$@" <"$out/$name.txt" || rrc=$?
  if [ "$rc" -ne 0 ] || [ "$rrc" -ne 0 ]; then
    echo "== $name FAILED (go test exit $rc, ratio exit $rrc); raw output in $out/$name.txt" >&2
    exit $(( rc != 0 ? rc : rrc ))
  fi
}

suite locstore-redis ./locstore/redis \
  'BenchmarkWrite3KeyCAS=BenchmarkRawLua3KeyCAS' \
  'BenchmarkWrite3KeyCASParallel=BenchmarkRawLua3KeyCASParallel' \
  'BenchmarkWrite3KeyCASReplicated/acks-1=BenchmarkWrite3KeyCASReplicated/acks-0' \
  'BenchmarkWrite3KeyCASReplicated/parallel-acks-1=BenchmarkWrite3KeyCASReplicated/parallel-acks-0'
suite transport ./router/transport \
  'BenchmarkTransportOneWay=BenchmarkRawZmq4OneWay' \
  'BenchmarkTransportRequestReply=BenchmarkRawZmq4RequestReply'
suite objects ./benchmarks/objects \
  'BenchmarkCreateActor=BenchmarkTransportCreateRoundTrip' \
  'BenchmarkCreateActor=BenchmarkStore3KeyBatch' \
  'BenchmarkCreateActorParallel=BenchmarkTransportCreateRoundTripParallel' \
  'BenchmarkCreateActorRedis=BenchmarkTransportCreateRoundTrip' \
  'BenchmarkCreateActorRedis=BenchmarkRedisStore3KeyBatch' \
  'BenchmarkCreateActorRedis=BenchmarkRedisStoreRead' \
  'BenchmarkCreateActorRedisParallel=BenchmarkTransportCreateRoundTripParallel' \
  'BenchmarkCreateActorRedisParallel=BenchmarkCreateActorRedis' \
  'BenchmarkCreateActorRedisCreators/creators-8@creates/s=BenchmarkCreateActorRedisCreators/creators-1@creates/s' \
  'BenchmarkCreateActorRedisCreators/creators-32@creates/s=BenchmarkCreateActorRedisCreators/creators-1@creates/s' \
  'BenchmarkCreateActorRedisCreators/creators-1@creates/s=BenchmarkCreateStoreCeilingRedis/creators-1@creates/s' \
  'BenchmarkCreateActorRedisCreators/creators-8@creates/s=BenchmarkCreateStoreCeilingRedis/creators-8@creates/s' \
  'BenchmarkCreateActorRedisCreators/creators-32@creates/s=BenchmarkCreateStoreCeilingRedis/creators-32@creates/s' \
  'BenchmarkCreateActorRedisMesh/creators-8@creates/s=BenchmarkCreateActorRedisMesh/creators-1@creates/s' \
  'BenchmarkCreateActorRedisMesh/creators-32@creates/s=BenchmarkCreateActorRedisMesh/creators-1@creates/s' \
  'BenchmarkCreateActorRedisMesh/creators-1@creates/s=BenchmarkCreateStoreCeilingRedisMesh/creators-1@creates/s' \
  'BenchmarkCreateActorRedisMesh/creators-8@creates/s=BenchmarkCreateStoreCeilingRedisMesh/creators-8@creates/s' \
  'BenchmarkCreateActorRedisMesh/creators-32@creates/s=BenchmarkCreateStoreCeilingRedisMesh/creators-32@creates/s' \
  'BenchmarkCreateActorRedisClients/creators-8@creates/s=BenchmarkCreateActorRedisMesh/creators-8@creates/s' \
  'BenchmarkCreateActorRedisClients/creators-32@creates/s=BenchmarkCreateActorRedisMesh/creators-32@creates/s' \
  'BenchmarkRequestActor=BenchmarkTransportActorRequest' \
  'BenchmarkRequestActorParallel=BenchmarkTransportActorRequestParallel' \
  'BenchmarkSendActor=BenchmarkTransportActorSend' \
  'BenchmarkColdActivation=BenchmarkCreateActor' \
  'BenchmarkColdActivation=BenchmarkTransportCreateRoundTrip' \
  'BenchmarkColdActivationRedis=BenchmarkCreateActorRedis' \
  'BenchmarkColdActivationRedis=BenchmarkTransportCreateRoundTrip' \
  'BenchmarkColdActivationRedis=BenchmarkRedisStore3KeyBatch' \
  'BenchmarkColdActivationRedis=BenchmarkRedisStoreRead' \
  'BenchmarkColdActivationRedis=BenchmarkRedisRelocPutReadDelete'
suite relocation ./benchmarks/relocation \
  'BenchmarkRelocateActor=BenchmarkRelocateBaselineRoundTrips' \
  'BenchmarkRelocateActor=BenchmarkRelocateBaselineStore' \
  'BenchmarkRelocateActorUnderRequests=BenchmarkRelocateActor' \
  'BenchmarkRelocateActorUnderRequests@pause-p99-us=BenchmarkRelocateActorUnderRequests@req-p50-us' \
  'BenchmarkRelocateActorRedis=BenchmarkRelocateBaselineRoundTrips' \
  'BenchmarkRelocateActorRedis=BenchmarkRelocateBaselineRedisStore' \
  'BenchmarkRelocateActorRedis=BenchmarkRelocateActor' \
  'BenchmarkRelocateActorRedisUnderRequests@pause-p99-us=BenchmarkRelocateActorRedisUnderRequests@req-p50-us' \
  'BenchmarkRestoreStream64MiB=BenchmarkRawZmq4Stream64MiB' \
  'BenchmarkRestoreStream64MiB=BenchmarkTransportStream64MiB' \
  'BenchmarkTransportStream64MiB=BenchmarkRawZmq4Stream64MiB'
SUITE_BENCHTIME=1x suite discovery ./benchmarks/discovery \
  'BenchmarkDiscoveryMinute/churn-0/nodes-1000@tracked-reads/round=BenchmarkDiscoveryMinute/churn-0/nodes-1000@full-reads/round' \
  'BenchmarkDiscoveryMinute/churn-0/nodes-1000@tracked-bytes/round=BenchmarkDiscoveryMinute/churn-0/nodes-1000@full-bytes/round' \
  'BenchmarkDiscoveryMinute/churn-0/nodes-5000@tracked-reads/round=BenchmarkDiscoveryMinute/churn-0/nodes-5000@full-reads/round' \
  'BenchmarkDiscoveryMinute/churn-2/nodes-1000@tracked-bytes/round=BenchmarkDiscoveryMinute/churn-2/nodes-1000@relist-bytes/round' \
  'BenchmarkDiscoveryMinute/churn-2/nodes-5000@tracked-bytes/round=BenchmarkDiscoveryMinute/churn-2/nodes-5000@relist-bytes/round' \
  'BenchmarkDiscoveryRoundRedis/tracked-unchanged/nodes-1000=BenchmarkDiscoveryRoundRedis/full/nodes-1000' \
  'BenchmarkDiscoveryScaleRedis/nodes-1000@disc-reads/round=BenchmarkDiscoveryScaleRedis/nodes-1000@before-reads/round' \
  'BenchmarkDiscoveryScaleRedis/nodes-1000@bytes/round=BenchmarkDiscoveryScaleRedis/nodes-1000@before-bytes/round'
# Placement must not grow with the mesh: one decision at 1,000 serving nodes
# against the same at 3 (ns/op and the capacity counters read).
suite placement ./mesh \
  'BenchmarkPlacement/nodes-1000/unlimited=BenchmarkPlacement/nodes-3/unlimited' \
  'BenchmarkPlacement/nodes-1000/limited=BenchmarkPlacement/nodes-3/limited' \
  'BenchmarkPlacement/nodes-1000/limited@store-read-keys/op=BenchmarkPlacement/nodes-3/limited@store-read-keys/op' \
  'BenchmarkPlacement/nodes-1000/2-admitted=BenchmarkPlacement/nodes-1000/unlimited'
SUITE_BENCHTIME=${HOST_BENCHTIME:-1x} SUITE_TIMEOUT=60m suite hostrelocate ./benchmarks/hostrelocate \
  'BenchmarkHostRelocateMemory=BenchmarkHostStoreCeilingMemory' \
  'BenchmarkHostRelocateMemory=BenchmarkHostRawZmq4' \
  'BenchmarkHostRelocateMemory@handoffs/s=BenchmarkHostStoreCeilingMemory@handoffs/s' \
  'BenchmarkHostRelocateMemory@pause-max-us=BenchmarkHostRelocateMemory@req-p50-us' \
  'BenchmarkHostRelocateMemory@pause-p99-us=BenchmarkHostRelocateMemory@req-p50-us' \
  'BenchmarkHostRelocateRedis=BenchmarkHostStoreCeilingRedis' \
  'BenchmarkHostRelocateRedis=BenchmarkHostRawZmq4' \
  'BenchmarkHostRelocateRedis@handoffs/s=BenchmarkHostStoreCeilingRedis@handoffs/s' \
  'BenchmarkHostQuietRelocateRedis@handoffs/s=BenchmarkHostStoreCeilingRedis@handoffs/s' \
  'BenchmarkHostRelocateRedis@pause-max-us=BenchmarkHostRelocateRedis@req-p50-us' \
  'BenchmarkHostRelocateRedis@pause-p99-us=BenchmarkHostRelocateRedis@req-p50-us' \
  'BenchmarkHostRelocateRedis=BenchmarkHostRelocateMemory' \
  'BenchmarkHostRelocateHeap@heap-peak-MB=BenchmarkHostRelocateHeap@heap-before-MB' \
  'BenchmarkHostRelocateHeap@heap-after-MB=BenchmarkHostRelocateHeap@heap-before-MB'
# A suite named in SUITES that is none of the above ran nothing: say so
# rather than end as if it had passed.
for name in ${SUITES:-}; do
  if [[ "$known" != *" $name "* ]]; then
    echo "== no suite named $name (suites:$known)" >&2
    exit 2
  fi
done
echo "raw output in $out"
