# Tollgate build, generation and test entry points.
# `make run` and `make test` are the two commands a newcomer needs.

GO        ?= go
TOOL      := $(GO) tool -modfile=tools/go.mod
# golangci-lint has a module of its own: its dependencies would otherwise
# move the protobuf versions buf and the plugins agree on.
LINT      := $(GO) tool -modfile=tools/lint/go.mod golangci-lint
DATA      ?= .tollgate-dev
RUN_FLAGS ?=

.PHONY: all build run test test-go fuzz-smoke test-node test-grpc-node test-central-node test-portal test-python-verifier chromium python-cryptography generate check-generated check-breaking check-tidy api-baseline protodeps lint fmt vet bench bench-proxy clean

all: build

build:
	$(GO) build -o bin/tollgate ./cmd/tollgate

run: build
	./bin/tollgate dev --data $(DATA) $(RUN_FLAGS)

## test: the whole suite, race detector on (Go packages, then the Node SDK conformance test,
## the Node.js gRPC client test, the central plane's generated TypeScript client test, the
## portal in headless Chromium and the Python verifier).
test: test-go test-node test-grpc-node test-central-node test-portal test-python-verifier

test-go:
	$(GO) test -race -count=1 ./...

## fuzz-smoke: every fuzz target (a `func FuzzX(f *testing.F)` in a _test.go file, found in the
## sources, so a new one runs without being listed) fuzzed for FUZZTIME each, one `go test -fuzz`
## per target as Go requires (docs/testing.md). An input that fails is written to the package's
## testdata/fuzz/FuzzX/: fix the bug and commit the input. Seed corpora alone run in `make test`.
## Minimizing a new input is cut at FUZZMINIMIZETIME (Go's default, 60s, would spend the whole
## run minimizing the first input that reaches new code). A run that ends on Go 1.26's fuzz
## coordinator deadline race (no failing input written) is run once more (tools/fuzzsmoke/run.sh).
FUZZTIME ?= 5s
FUZZMINIMIZETIME ?= 1s
fuzz-smoke:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) tools/fuzzsmoke/run.sh

test-node: build
	cd test/node && npm ci --no-audit --no-fund --loglevel=error && TOLLGATE_BIN=$(CURDIR)/bin/tollgate node --test

## test-grpc-node: a Node.js service calling the gRPC InferenceService of a live `tollgate dev`
## (@grpc/grpc-js; proto/ and protovalidate's proto loaded by @grpc/proto-loader, error details
## decoded with google-proto-files' google.rpc protos).
test-grpc-node: build protodeps
	cd test/grpcnode && npm ci --no-audit --no-fund --loglevel=error && TOLLGATE_BIN=$(CURDIR)/bin/tollgate node --test

## test-central-node: a TypeScript client generated from the central plane's OpenAPI document
## (swagger2openapi, openapi-typescript, openapi-fetch; type-checked by tsc) against a live `tollgate dev`.
test-central-node: build
	cd test/central && npm ci --no-audit --no-fund --loglevel=error && TOLLGATE_BIN=$(CURDIR)/bin/tollgate npm test --silent

## test-portal: the operator portal driven in headless Chromium (playwright-core) against a live `tollgate dev`.
test-portal: build chromium
	cd test/portal && npm ci --no-audit --no-fund --loglevel=error && TOLLGATE_BIN=$(CURDIR)/bin/tollgate CHROMIUM_BIN=$(CHROMIUM) node --test

## test-python-verifier: the independent Python verifier (verifiers/python, written from
## docs/audit-format.md alone) and `tollgate verify` on the documents of a live `tollgate dev`
## (heads, proofs, receipts, and a bundle exported while it runs),
## served and tampered: they must agree on every one.
PYTHON ?= /usr/bin/python3
test-python-verifier: build python-cryptography
	cd verifiers/python && TOLLGATE_BIN=$(CURDIR)/bin/tollgate $(PYTHON) -m unittest -v test_live test_live_receipts test_live_bundle

## python-cryptography: Debian's python3-cryptography for the Python verifier, installed with
## apt-get (as root, or through sudo) when $(PYTHON) cannot import it.
python-cryptography:
	@$(PYTHON) -c 'import cryptography' 2>/dev/null || { echo "installing Debian's python3-cryptography for the Python verifier"; \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends python3 python3-cryptography; }

## chromium: Debian's Chromium for test-portal, installed with apt-get (as root, or through sudo) when missing.
CHROMIUM ?= /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium for the portal's browser test"; \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium; }

## protodeps: link third-party protos from the Go module cache (versions pinned in tools/go.mod).
protodeps:
	@mkdir -p .protodeps
	@dir=$$($(GO) mod download -modfile=tools/go.mod -json github.com/bufbuild/protovalidate | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$dir" || { echo "protodeps: cannot locate github.com/bufbuild/protovalidate in the module cache" >&2; exit 1; }; \
	  ln -sfn "$$dir/proto/protovalidate" .protodeps/protovalidate

generate: protodeps
	$(TOOL) buf lint
	$(TOOL) buf generate
	@printf '%s\n' '// Code generated by make generate. DO NOT EDIT.' '' 'package centralv1' '' 'import _ "embed"' '' \
	  '// OpenAPI is the OpenAPI 2.0 document of the audit API (protoc-gen-openapiv2),' \
	  '// served by the central plane at /v1/openapi.json.' '//' '//go:embed central.swagger.json' 'var OpenAPI []byte' \
	  > gen/tollgate/central/v1/openapi.go

## check-generated: regenerate and fail if gen/ differs from what is committed.
check-generated: generate
	@git add -N gen >/dev/null 2>&1 || true
	@if ! git diff --quiet --exit-code -- gen; then \
	  echo "gen/ is out of date with proto/: run 'make generate' and commit the result" >&2; \
	  git --no-pager diff --stat -- gen >&2; exit 1; fi
	@echo "gen/ is up to date"

## check-breaking: fail if proto/ breaks the API recorded in proto/api-baseline.binpb
## (buf breaking, FILE rules): the gRPC services and the messages the REST API carries
## (its routes, in central_http.yaml, are pinned by the tests that call them).
check-breaking: protodeps
	$(TOOL) buf breaking proto --against proto/api-baseline.binpb
	@echo "proto/ keeps the recorded API"

## check-tidy: fail if `go mod tidy` would change go.mod or go.sum (it changes
## neither: -diff only prints what it would do).
check-tidy:
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { \
	  echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit the result" >&2; \
	  $(GO) mod tidy -diff >&2; exit 1; }
	@echo "go.mod and go.sum are tidy"

## api-baseline: record proto/ as the API later changes must keep. Only for a
## deliberate break (docs/api-changes.md), in a commit that says why.
api-baseline: protodeps
	$(TOOL) buf build proto --exclude-source-info -o proto/api-baseline.binpb

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^gen/')

vet:
	$(GO) vet ./...

## lint: golangci-lint with .golangci.yml (errcheck, govet, ineffassign, staticcheck,
## unused; gofmt), generated code excluded.
lint:
	$(LINT) run ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-proxy: the gateway (its own process, --vllm in front of an instant upstream) against
## that upstream alone, a few minutes a run: the journal on disk and on tmpfs, each through
## vLLM and with builtin/echo, and builtin/echo on tmpfs at --head-interval 1s; prints a table a
## run and, for RUNS above 1, one of min–median–max over the runs (docs/performance.md quotes
## `make bench-proxy RUNS=3`).
## PROCESS=gateway measures `tollgate gateway` against an etcd of the benchmark's own, so the
## CPU and RSS rows are the gateway's alone; the default, PROCESS=dev, is `tollgate dev` (its
## embedded etcd included).
RUNS ?= 1
PROCESS ?= dev
## GATEWAY_ENV adds NAME=value words to the measured process's environment alone (GOMAXPROCS=1).
GATEWAY_ENV ?=
bench-proxy:
	PROXY_RUNS=$(RUNS) PROXY_PROCESS=$(PROCESS) PROXY_GATEWAY_ENV='$(GATEWAY_ENV)' $(GO) test -run '^$$' -bench '^BenchmarkProxy$$' -benchtime 1x -count 1 -timeout 90m ./test/perf/

clean:
	rm -rf bin .protodeps
