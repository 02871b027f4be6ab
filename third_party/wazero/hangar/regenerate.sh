#!/usr/bin/env bash
# Usage: third_party/wazero/hangar/regenerate.sh [--check] [--fixtures]
#
# Rebuilds third_party/wazero from the pristine upstream module (taken from the Go module cache,
# downloaded through the module proxy if absent) and the patches in hangar/*.patch, applied in
# order. With --check it rebuilds into a temporary directory instead and fails if the committed
# tree differs, so the copy stays exactly "upstream at UPSTREAM_VERSION + these patches". With
# --fixtures it puts upstream's WebAssembly test binaries that the kept tests embed into the tree
# (git ignores them: no binary is tracked, scripts/check-tracked), so that `make test` can run
# wazero's own tests of the patched packages.
#
# Kept from upstream: what Hangar builds, plus the tests of the packages the patches touch
# (TESTED_PACKAGES) and the test helpers and data they need. Left out: upstream's CLI, examples,
# site, integration tests and the tests of untouched packages.
set -euo pipefail

UPSTREAM_VERSION=v1.12.0
# The packages the patches change, whose own tests make test runs (as paths in the module, "."
# being the root package). Keep in step with the Makefile's WAZERO_TEST_PKGS.
TESTED_PACKAGES=(. internal/engine/wazevo internal/engine/wazevo/frontend internal/engine/wazevo/wazevoapi)
# What the tested packages' tests read beside their own directory: helper packages and data, and
# two binaries that root-package examples embed from directories otherwise dropped.
TEST_SUPPORT=(internal/testing testdata)
TEST_FILES=(internal/integration_test/engine/testdata/infinite_loop.wasm examples/basic/testdata/add.wasm)
# Upstream's files that are no part of a build: dropped whole.
DROP=(.github .netlify .editorconfig .gitattributes .gitignore .gitmodules CONTRIBUTING.md Makefile
	RATIONALE.md README.md codecov.yml netlify.toml cmd examples internal/integration_test
	packaging site imports/assemblyscript/example imports/wasi_snapshot_preview1/example
	internal/engine/RATIONALE.md imports/README.md)

here=$(cd "$(dirname "$0")" && pwd)
tree=$(dirname "$here")
check=false fixtures=false
for a in "$@"; do
	case "$a" in
	--check) check=true ;;
	--fixtures) fixtures=true ;;
	*) echo "usage: $0 [--check] [--fixtures]" >&2; exit 2 ;;
	esac
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Outside any module, so that Hangar's go.mod (whose replace points here) plays no part.
pristine=$(cd "$out" && GOFLAGS=-mod=mod go mod download -json "github.com/tetratelabs/wazero@$UPSTREAM_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$pristine" ] || { echo "regenerate: github.com/tetratelabs/wazero@$UPSTREAM_VERSION is not in the module cache" >&2; exit 1; }

cp -r "$pristine/." "$out/"
chmod -R u+w "$out"
(cd "$out" && rm -rf "${DROP[@]}")
# Tests and test data of the untested packages go; the tested packages and their helpers stay.
keep() {
	local rel=$1 p
	for p in "${TESTED_PACKAGES[@]}"; do [ "$(dirname "$rel")" = "$p" ] && return 0; done
	for p in "${TEST_SUPPORT[@]}"; do case "$rel" in "$p"/*) return 0 ;; esac; done
	return 1
}
(cd "$out" && find . -name '*_test.go' -printf '%P\n') | while read -r f; do
	keep "$f" || rm "$out/$f"
done
(cd "$out" && find . -type d -name testdata -printf '%P\n' | sort -r) | while read -r d; do
	keep "$d/x" || rm -rf "${out:?}/$d"
done
for f in "${TEST_FILES[@]}"; do
	mkdir -p "$out/$(dirname "$f")" && cp "$pristine/$f" "$out/$f" && chmod u+w "$out/$f"
done
for p in "$here"/*.patch; do
	patch -s -d "$out" -p1 --no-backup-if-mismatch <"$p" || { echo "regenerate: $(basename "$p") does not apply to $UPSTREAM_VERSION" >&2; exit 1; }
done
cp -r "$here" "$out/hangar"
cp "$tree/HANGAR.md" "$out/HANGAR.md"

if $check || $fixtures; then
	if $check; then
		# Files, not directories: a directory of test binaries only is absent from a clone.
		files() { (cd "$1" && find . -type f ! -name '*.wasm' -printf '%P\n' | sort); }
		differ=$( (diff <(files "$out") <(files "$tree") || true
			files "$out" | while read -r f; do [ ! -f "$tree/$f" ] || cmp -s "$out/$f" "$tree/$f" || echo "differs: $f"; done) | head -20)
		if [ -n "$differ" ]; then
			echo "$differ" >&2
			echo "third_party/wazero is not upstream $UPSTREAM_VERSION + hangar/*.patch: run third_party/wazero/hangar/regenerate.sh" >&2
			exit 1
		fi
		echo "third_party/wazero is upstream $UPSTREAM_VERSION + $(ls "$here"/*.patch | wc -l) patches"
	fi
	if $fixtures; then
		(cd "$out" && find . -name '*.wasm' -printf '%P\n') | while read -r f; do
			mkdir -p "$tree/$(dirname "$f")" && cp "$out/$f" "$tree/$f"
		done
	fi
	exit 0
fi
find "$tree" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
cp -r "$out/." "$tree/"
echo "third_party/wazero regenerated from upstream $UPSTREAM_VERSION + $(ls "$here"/*.patch | wc -l) patches"
