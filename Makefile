# Tollgate build, generation and test entry points.
# `make run` and `make test` are the two commands a newcomer needs.

GO        ?= go
TOOL      := $(GO) tool -modfile=tools/go.mod
DATA      ?= .tollgate-dev
RUN_FLAGS ?=

.PHONY: all build run test test-go test-node generate check-generated protodeps lint fmt vet bench clean

all: build

build:
	$(GO) build -o bin/tollgate ./cmd/tollgate

run: build
	./bin/tollgate dev --data $(DATA) $(RUN_FLAGS)

## test: the whole suite, race detector on (Go packages, then the Node SDK conformance test).
test: test-go test-node

test-go:
	$(GO) test -race -count=1 ./...

test-node: build
	cd test/node && npm ci --no-audit --no-fund --loglevel=error && TOLLGATE_BIN=$(CURDIR)/bin/tollgate node --test

## protodeps: link third-party protos from the Go module cache (versions pinned in tools/go.mod).
protodeps:
	@mkdir -p .protodeps
	@dir=$$($(GO) mod download -modfile=tools/go.mod -json github.com/bufbuild/protovalidate | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$dir" || { echo "protodeps: cannot locate github.com/bufbuild/protovalidate in the module cache" >&2; exit 1; }; \
	  ln -sfn "$$dir/proto/protovalidate" .protodeps/protovalidate

generate: protodeps
	$(TOOL) buf lint
	$(TOOL) buf generate

## check-generated: regenerate and fail if gen/ differs from what is committed.
check-generated: generate
	@git add -N gen >/dev/null 2>&1 || true
	@if ! git diff --quiet --exit-code -- gen; then \
	  echo "gen/ is out of date with proto/: run 'make generate' and commit the result" >&2; \
	  git --no-pager diff --stat -- gen >&2; exit 1; fi
	@echo "gen/ is up to date"

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^gen/')

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin .protodeps
