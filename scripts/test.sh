#!/usr/bin/env bash
# make test: go vet, then go test -race ./... against a throwaway Redis
# (scripts/with-redis.sh installs and starts what the tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
exec ./scripts/with-redis.sh go test -race -count=1 -timeout 20m "$@" ./...
