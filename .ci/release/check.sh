#!/usr/bin/env bash
# Release checks, run by .ci/run (and by hand: bash .ci/release/check.sh):
#  1. RELEASE names a version; the contrib modules require exactly it, with no
#     replace directive, and contrib/go.work answers that requirement with
#     this checkout; CHANGELOG.md has a section for it.
#  2. API compatibility: the exported API of each module is compared with the
#     one at RELEASE's commit (the last release) with apidiff; an incompatible
#     change fails unless the version it will go out as (RELEASE's "next"
#     between releases, else its version) is a new major (or, below v1, a
#     new minor) version over that commit's, and a patch version adds no API.
#  3. An outside module that requires only the released versions, with no
#     replace, builds and runs a program using the root module and both contrib
#     modules, resolved with no network from a file-based module proxy made of
#     this checkout's committed files at the recorded version (third-party
#     modules come from the local module cache, filled by the test runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
APIDIFF=golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4
modules=(. contrib/otel contrib/prometheus contrib/gocron contrib/robfigcron contrib/redisintake)

field() { awk -v k="$1" '$1 == k { print $2 }' "${2:-RELEASE}"; }
version=$(field version)
commit=$(field commit)
next=$(field next)
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "RELEASE: version '$version' is not vMAJOR.MINOR.PATCH" >&2
	exit 1
fi
if [ -n "$next" ] && ! [[ $next =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "RELEASE: next '$next' is not vMAJOR.MINOR.PATCH" >&2
	exit 1
fi
echo "release: $version (commit ${commit})${next:+; unreleased changes go out as $next}"

# --- 1. one version everywhere ------------------------------------------------
fail=0
for m in contrib/otel contrib/prometheus contrib/gocron contrib/robfigcron contrib/redisintake; do
	req=$(awk '$1 == "github.com/claimlock/claimlock" { print $2 } $1 == "require" && $2 == "github.com/claimlock/claimlock" { print $3 }' "$m/go.mod")
	if [ "$req" != "$version" ]; then
		echo "$m/go.mod requires github.com/claimlock/claimlock '$req', RELEASE says $version" >&2
		fail=1
	fi
	if grep -q '^replace\|^[[:space:]]*github.com/claimlock/claimlock.*=>' "$m/go.mod"; then
		echo "$m/go.mod has a replace directive: outside modules ignore it" >&2
		fail=1
	fi
done
if ! grep -q "^replace github.com/claimlock/claimlock $version => ../\$" contrib/go.work; then
	echo "contrib/go.work does not answer the requirement of $version with this checkout" >&2
	fail=1
fi
if ! grep -q "^## $version\b" CHANGELOG.md; then
	echo "CHANGELOG.md has no '## $version' section" >&2
	fail=1
fi
if [ -n "$next" ] && ! grep -q "^## Unreleased ($next)\$" CHANGELOG.md; then
	echo "RELEASE names next $next: CHANGELOG.md needs a '## Unreleased ($next)' section announcing the changes" >&2
	fail=1
fi
[ "$fail" = 0 ]
echo "release: the contrib modules require $version; CHANGELOG.md has its section"

work=$(mktemp -d "${TMPDIR:-/tmp}/claimlock-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- 2. API compatibility with the last release -------------------------------
semver_parts() { local v=${1#v}; echo "${v//./ }"; }
if [ "$commit" = none ]; then
	echo "api: no earlier release recorded (commit none): the first release has nothing to be compatible with"
else
	if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
		if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
			echo "RELEASE: commit $commit is not in this shallow clone; fetch the history (git fetch --unshallow) to compare the API" >&2
		else
			echo "RELEASE: commit $commit is not in this repository" >&2
		fi
		exit 1
	fi
	old_version=$(git show "$commit:RELEASE" 2>/dev/null | awk '$1 == "version" { print $2 }')
	if ! [[ $old_version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
		echo "RELEASE: commit $commit records no release version" >&2
		exit 1
	fi
	read -r omaj omin opat <<<"$(semver_parts "$old_version")"
	read -r nmaj nmin npat <<<"$(semver_parts "${next:-$version}")"
	breaking_ok=0 additions_ok=1
	if [ "$nmaj" -gt "$omaj" ] || { [ "$nmaj" = 0 ] && [ "$nmaj" = "$omaj" ] && [ "$nmin" -gt "$omin" ]; }; then
		breaking_ok=1
	fi
	if [ "$nmaj" = "$omaj" ] && [ "$nmin" = "$omin" ] && [ "$npat" -gt "$opat" ]; then
		additions_ok=0
	fi
	mkdir -p "$work/old"
	git archive "$commit" | tar -x -C "$work/old"
	for m in "${modules[@]}"; do
		path=$(cd "$m" && GOWORK=off go list -m)
		name=$(echo "$path" | tr / _)
		[ -f "$work/old/$m/go.mod" ] || { echo "api: $path did not exist at $commit"; continue; }
		# The old module is loaded as it was, its contrib requirement answered
		# by the old root module.
		(
			cd "$work/old/$m"
			rm -f go.work
			if [ "$m" != . ]; then
				GOWORK=off go mod edit -replace "github.com/claimlock/claimlock=$work/old"
			fi
			GOWORK=off GOFLAGS=-mod=mod go run "$APIDIFF" -m -w "$work/$name.api" "$path" >"$work/$name.log" 2>&1 ||
				{ cat "$work/$name.log" >&2; exit 1; }
		)
		# apidiff lists a change once per package instance; each line once.
		(cd "$m" && go run "$APIDIFF" -m "$work/$name.api" "$path" 2>/dev/null) | awk '!seen[$0]++' >"$work/$name.diff"
		incompatible=$(sed -n '/^Incompatible changes:/,/^Compatible changes:/p' "$work/$name.diff" | grep '^- ' || true)
		compatible=$(sed -n '/^Compatible changes:/,$p' "$work/$name.diff" | grep '^- ' || true)
		if [ -n "$incompatible" ] && [ "$breaking_ok" = 0 ]; then
			echo "api: $path has incompatible changes since $old_version ($commit), and ${next:-$version} does not announce them (set RELEASE's next to a new minor version, and say so in CHANGELOG.md):" >&2
			echo "$incompatible" >&2
			fail=1
		elif [ -n "$compatible" ] && [ "$additions_ok" = 0 ]; then
			echo "api: $path adds API in patch version ${next:-$version}:" >&2
			echo "$compatible" >&2
			fail=1
		else
			echo "api: $path against $old_version: $(echo -n "$incompatible" | grep -c '^- ' || true) incompatible, $(echo -n "$compatible" | grep -c '^- ' || true) compatible changes"
		fi
	done
	[ "$fail" = 0 ]
fi

# --- 3. an outside module, from a file-based proxy ----------------------------
# Between releases the proxy serves this checkout as the next version, as
# the release commit will be: the contrib modules then require it (release
# step 2). Served as the last release's version it would clash with that
# release's own files in a module cache.
served=${next:-$version}
mkdir -p "$work/src" "$work/proxy" "$work/consumer"
git archive HEAD | tar -x -C "$work/src"
if [ "$served" != "$version" ]; then
	for m in contrib/otel contrib/prometheus contrib/gocron contrib/robfigcron contrib/redisintake; do
		(cd "$work/src/$m" && GOWORK=off go mod edit -require "github.com/claimlock/claimlock@$served")
	done
fi
(cd .ci/release && GOWORK=off go vet . && GOWORK=off go run . -src "$work/src" -version "$served" -out "$work/proxy")
cp .ci/release/consumer/main.go.txt "$work/consumer/main.go"
cat >"$work/consumer/go.mod" <<MOD
module example.com/consumer

go 1.26.0

require (
	github.com/claimlock/claimlock $served
	github.com/claimlock/claimlock/contrib/otel $served
	github.com/claimlock/claimlock/contrib/prometheus $served
)
MOD
modcache=$(go env GOMODCACHE)
(
	cd "$work/consumer"
	# A module cache of its own: one that has met another build of the
	# served version would answer with that build.
	export GOWORK=off GOFLAGS='-mod=mod -modcacherw' GOSUMDB=off GOTOOLCHAIN=local GONOSUMCHECK=1 GONOSUMDB='*'
	export GOMODCACHE="$work/modcache"
	export GOPROXY="file://$work/proxy,file://$modcache/cache/download"
	unformatted=$(gofmt -l .)
	[ -z "$unformatted" ] || { echo "consumer: gofmt would change $unformatted" >&2; exit 1; }
	# -mod=mod completes go.mod and go.sum with what the build needs (go mod
	# tidy would also want the modules of every other platform's build,
	# which the local cache does not hold).
	go build -o consumer .
	if grep -q '^replace' go.mod; then echo "consumer: go.mod grew a replace" >&2; exit 1; fi
	go vet .
	./consumer
)
echo "release: an outside module built and ran against $served from the file proxy"
