# meshnode — see README.md.
GO       ?= go
# Every target builds and tests with Go 1.27.3, which the go command fetches
# from the module proxy on first use (~76 MB, seconds). Go 1.26.8, this
# machine's own, has known standard-library vulnerabilities in net/http,
# net/textproto, crypto/tls and crypto/x509 (govulncheck, 2026-12-06:
# GO-2026-6603 … GO-2026-6809, fixed in 1.26.9/1.26.10); the admin listener
# is a net/http server, so a built binary would carry them. The code itself
# still builds with Go 1.26 (go.mod). make … GOTOOLCHAIN=local uses the
# installed Go instead.
export GOTOOLCHAIN := go1.27.3
BIN      := bin/meshnode
PKGS     := ./...
# The version the binary reports (meshnode version, the start log line,
# GET /v1/status, meshnode_build_info); override with make build VERSION=v1.2.3.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/meshnode/meshnode/internal/buildinfo.Version=$(VERSION)

.PHONY: all build test demo bench lint vet staticcheck vulncheck fmt clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/meshnode

# Installs redis-server / python3-zmq when missing, starts a throwaway Redis,
# runs go vet and go test -race ./... against it, stops Redis afterwards.
test:
	./scripts/test.sh

# The main job on the embedded default (memory stores, three nodes, one process).
demo: build
	./$(BIN) demo

# Benchmarks next to their same-run baselines (raw Redis, raw zmq4).
bench:
	./benchmarks/run.sh

# go mod tidy -diff exits non-zero (and prints the diff) when go.mod/go.sum are
# not tidy, e.g. a directly imported module still marked // indirect.
lint: vet staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum not tidy: run go mod tidy"; exit 1; }

vet:
	$(GO) vet $(PKGS)

# staticcheck at a pinned version (env/packages/go-partial.tsv), run from the
# module proxy: it is a tool, not a dependency, so go.mod does not name it.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

# Known vulnerabilities reachable from this code (standard library and
# modules). It reads https://vuln.go.dev; where that cannot be reached, set
# VULNDB=file:///path/to/db (a database built by golang.org/x/vulndb's
# cmd/gendb from that module's data/osv, docs/OPERATIONS.md "Building").
GOVULNCHECK ?= golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB      ?=
vulncheck:
	$(GO) run $(GOVULNCHECK) $(if $(VULNDB),-db $(VULNDB)) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
