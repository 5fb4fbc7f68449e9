# meshnode — see README.md.
GO       ?= go
BIN      := bin/meshnode
PKGS     := ./...
# The version the binary reports (meshnode version, the start log line,
# GET /v1/status, meshnode_build_info); override with make build VERSION=v1.2.3.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/meshnode/meshnode/internal/buildinfo.Version=$(VERSION)

.PHONY: all build test demo bench lint vet staticcheck fmt clean

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

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
