# Hangar's build. Tools are pinned and installed into .tools/ by the targets that need them, so a
# fresh machine needs only Go, the Google Cloud CLI (with its emulators) and Java.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

TOOLS := $(CURDIR)/.tools/bin
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_CONNECT_GO_VERSION := v1.21.1
STATICCHECK_VERSION := v0.8.2
GOIMPORTS_VERSION := v0.52.0
GOVULNCHECK_VERSION := v1.9.0
# VULNDB_VERSION pins the Go vulnerability database vulncheck reads: move it to take newer reports.
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
GO_TEST_FLAGS ?= -count=1 -timeout=50m
REGION ?= europe-west1
PROJECT ?= $(shell gcloud config get-value project 2>/dev/null)

.PHONY: vulncheck breaking release-contract check-tracked dev test security fuzz fresh-machine check system-deps plugins web web-test generate check-gen lint vet fmt-check tidy-check bench deploy tools clean agent-clis agent-image

## dev: run the whole system locally (emulators, every function, one server on 127.0.0.1:8080);
## the sandbox host needs runc and busybox-static, so it installs them first like `make test`
dev: system-deps bin/hangar bin/hangar-supervisor
	bin/hangar dev

# The sandbox's PID 1, bind-mounted into every sandbox: static, so it runs in any image.
.PHONY: bin/hangar-supervisor
bin/hangar-supervisor:
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/hangar-supervisor ./cmd/hangar-supervisor

## plugins: the built-in harness plugins and automation/jsbox's JavaScript guest, built to WebAssembly and embedded into hangar
plugins:
	go run ./harnesses/plugins/cmd/buildplugins -o harnesses/builtin/wasm
	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags=-s \
		-o automation/jsbox/wasm/jsbox.wasm ./automation/jsbox/guest

# The dashboard (web/): its npm dependencies, pinned by the lockfile, from the npm registry only.
web/node_modules/.package-lock.json: web/package-lock.json
	npm ci --prefix web --no-audit --no-fund

WEB_SOURCES := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json -type f 2>/dev/null)

## web: the dashboard, type-checked and built by Vite into web/dist (embedded into hangar), when its sources changed
web: web/dist/index.html
web/dist/index.html: web/node_modules/.package-lock.json $(WEB_SOURCES)
	rm -rf web/dist/assets web/dist/index.html
	npm --prefix web run build

## web-test: the dashboard's component tests (Vitest)
web-test: web/node_modules/.package-lock.json
	npm --prefix web test

# bin/hangar is rebuilt every time (go build is incremental and fast); the client commands use it.
.PHONY: bin/hangar
bin/hangar: plugins web
	go build -o bin/hangar ./cmd/hangar

# RACE_PKGS are the concurrent packages (the sandbox host, the event log, the supervisor, the
# automation dispatcher and runner, and the whole stack): make test runs them under the race
# detector, and every other package without it, since -race costs several times the time.
RACE_PKGS := ./sandboxhosts/host ./records/eventlog ./sandboxhosts/supervisor ./automation/dispatch ./automation/runner ./e2e
# RACE_TESTS are tests of other packages that are there for the race detector: chunkers cutting
# at once share the chunker library's tables.
RACE_TESTS := -run TestConcurrentChunkersCutAsOneDoesAlone ./sandboxhosts/snapshots

# WAZERO_TEST_PKGS are the packages of the patched wazero copy (third_party/wazero/HANGAR.md) whose
# own upstream tests make test runs with Hangar's, after checking that the copy is upstream plus
# its patches and putting upstream's test binaries in place (git keeps no binary).
WAZERO_TEST_PKGS := github.com/tetratelabs/wazero github.com/tetratelabs/wazero/internal/engine/wazevo \
	github.com/tetratelabs/wazero/internal/engine/wazevo/frontend github.com/tetratelabs/wazero/internal/engine/wazevo/wazevoapi

## test: every check and test (fuzz targets run their seed corpora), RACE_PKGS under -race, with one Firestore + Pub/Sub emulator pair for the whole run
test: check system-deps-browser plugins web web-test agent-clis agent-image
	third_party/wazero/hangar/regenerate.sh --check --fixtures
	go run ./cmd/hangar emulators -- bash -c 'set -eu; \
		race=$$(go list $(RACE_PKGS)); \
		go test $(GO_TEST_FLAGS) $$(go list ./... | grep -vxF "$$race") $(WAZERO_TEST_PKGS); \
		go test -race $(GO_TEST_FLAGS) $(RACE_PKGS); \
		go test -race $(GO_TEST_FLAGS) $(RACE_TESTS)'

## fuzz: every Go fuzz target (func FuzzXxx in a _test.go) for FUZZTIME each, one after another; failures are listed at the end
FUZZTIME ?= 1m
fuzz: system-deps
	@grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . | sed -E 's|^\./(.*)/[^/]*_test\.go:func |\1 |' | sort -u | { \
	failed=""; \
	while read -r pkg fn; do \
		echo "== $$fn in ./$$pkg for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) "./$$pkg" || failed="$$failed $$fn"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed (inputs in their testdata/fuzz)"; exit 1; fi; }

## security: the security suite alone, every attack replay (make test runs it too)
security: system-deps plugins
	go run ./cmd/hangar emulators -- go test -count=1 -run 'TestSecurity' ./...

## fresh-machine: make dev and the README's Quick start in a throwaway overlay of / with runc and busybox removed, as a new user would
fresh-machine:
	scripts/fresh-machine

## system-deps: runc, busybox-static and e2fsprogs for the sandbox host (installed with apt-get when root)
system-deps:
	@scripts/system-deps

# make test also needs Chromium, for the dashboard's browser tests.
.PHONY: system-deps-browser
system-deps-browser:
	@scripts/system-deps --browser

## check: the house rules — gen/ in sync with proto/, buf lint, staticcheck, import grouping, gofmt, go vet, go.mod tidy, no build output tracked, no known vulnerability reached, no breaking change to the released contract
check: check-gen lint breaking fmt-check vet tidy-check check-tracked vulncheck

## check-tracked: fail on a tracked executable binary, or a tracked file over 1 MiB outside third_party/ and testdata/
check-tracked:
	@scripts/check-tracked

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-connect-go $(TOOLS)/staticcheck $(TOOLS)/goimports

## breaking: buf breaking (FILE rules) against the last released contract, proto/released/contract.json
breaking: tools
	$(TOOLS)/buf breaking --against proto/released/contract.json

## release-contract: record proto/ as the released contract that `make breaking` holds later changes to
release-contract: tools
	$(TOOLS)/buf build --exclude-source-info -o proto/released/contract.json

## vulncheck: govulncheck over the module against the pinned vulnerability database (scripts/vulncheck)
VULNDB := $(CURDIR)/.tools/vulndb/$(VULNDB_VERSION)
vulncheck: $(TOOLS)/govulncheck $(VULNDB)/index/db.json
	@scripts/vulncheck $(TOOLS) $(VULNDB)
$(TOOLS)/govulncheck:
	GOBIN=$(TOOLS) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
$(VULNDB)/index/db.json:
	GOBIN=$(TOOLS) go install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION)
	rm -rf $(VULNDB) && mkdir -p $(dir $(VULNDB))
	$(TOOLS)/indexdb -vulns "$$(go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p')/data/osv" -out $(VULNDB)

$(TOOLS)/buf:
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-connect-go:
	GOBIN=$(TOOLS) go install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_GO_VERSION)
$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
$(TOOLS)/goimports:
	GOBIN=$(TOOLS) go install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)

## generate: regenerate gen/ (Go) and web/src/gen (the dashboard's TypeScript) from proto/
generate: tools web/node_modules/.package-lock.json
	$(TOOLS)/buf generate
	$(TOOLS)/buf generate --template web/buf.gen.yaml

## check-gen: fail when gen/ or web/src/gen differs from what proto/ generates
check-gen: tools web/node_modules/.package-lock.json
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(TOOLS)/buf generate -o "$$tmp"; \
	$(TOOLS)/buf generate --template web/buf.gen.yaml -o "$$tmp"; \
	for dir in gen web/src/gen; do \
		if ! diff -r $$dir "$$tmp/$$dir" >/dev/null; then \
			diff -r $$dir "$$tmp/$$dir" | head -20; \
			echo "$$dir is stale: run 'make generate' and commit the result"; exit 1; \
		fi; \
	done

## lint: buf lint, staticcheck (its default checks, unused code included) and import grouping
lint: tools
	$(TOOLS)/buf lint
	$(TOOLS)/staticcheck ./...
	@out=$$($(TOOLS)/goimports -local github.com/hangar-dev/hangar -l $$(git ls-files -co --exclude-standard '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "imports not grouped (std, third party, hangar): run goimports -local github.com/hangar-dev/hangar -w on:"; echo "$$out"; exit 1; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check:
	@go mod tidy -diff >/dev/null || { go mod tidy -diff | head -20; echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }

vet:
	go vet ./...

## agent-clis: the real Claude Code and Codex CLIs at the agent image's pinned versions, into
## .data/agent-clis (npm registry only), for the tests that run them against the fake model APIs
agent-clis:
	go run ./internal/agentimage -clis .data/agent-clis

## agent-image: the agent image (Debian, git, Node.js and the real CLIs) built offline from Debian's
## archive and the npm registry into .data/image/images/agent, which `hangar dev` serves as
## hangar/agent:latest; rebuilt only when its recipe changes (internal/agentimage)
agent-image:
	@scripts/system-deps --agent-image
	go run ./internal/agentimage -o .data/image/images/agent

## bench: benchmarks through the full stack against raw baselines, with ratios (BENCH=regexp for some)
BENCH ?= .
bench:
	go run ./cmd/hangar emulators -- go run ./bench/driver -bench '$(BENCH)'

## deploy: apply deploy/ (Terraform; TF=tofu for OpenTofu) to PROJECT in REGION: Firestore, Pub/Sub,
## secrets, one Cloud Run function per entry of `hangar functions`, the load balancer and the host
## fleet, after building the plugins, the dashboard, the functions' source and the hosts' binaries
## (not run in CI); see docs/deploy.md
deploy: deploy-build
	$(TF) -chdir=deploy apply $(TF_VARS)

## deploy-plan: what `make deploy` would change, without changing it
deploy-plan: deploy-build
	$(TF) -chdir=deploy plan $(TF_VARS)

TF ?= terraform
# TF_INIT_FLAGS configure the state's backend, e.g. -backend-config=bucket=… with a gcs backend.
TF_INIT_FLAGS ?=
# TF_FLAGS are more flags of plan and apply, e.g. -var domain=hangar.example.com -var-file=….
TF_FLAGS ?=
TF_VARS = -var project_id=$(PROJECT) -var region=$(REGION) -var source_archive=$(CURDIR)/bin/source.zip \
	-var 'host_binaries={hangar="$(CURDIR)/bin/linux-amd64/hangar",supervisor="$(CURDIR)/bin/linux-amd64/hangar-supervisor"}' $(TF_FLAGS)

# deploy-build is what deploy/ uploads: the functions' source (with the plugins and dashboard they
# embed) and the hosts' binaries; and deploy/hangar.gen.tf.json written again from this code.
.PHONY: deploy-plan deploy-build
deploy-build: plugins web
	@test -n "$(PROJECT)" || { echo "set PROJECT=<gcp project>"; exit 1; }
	go run ./cmd/hangar functions --terraform > deploy/hangar.gen.tf.json
	go run ./cmd/sourcezip -o bin/source.zip
	GOOS=linux GOARCH=amd64 go build -trimpath -o bin/linux-amd64/hangar ./cmd/hangar
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/linux-amd64/hangar-supervisor ./cmd/hangar-supervisor
	$(TF) -chdir=deploy init -input=false $(TF_INIT_FLAGS)

clean:
	rm -rf .tools bin
