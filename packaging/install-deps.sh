#!/bin/sh
# install-deps.sh - install the Debian packages perfd needs to build, test
# or benchmark, and only those that are missing.  Runs `apt-get update` first
# (a fresh machine has no package lists), then one `apt-get install`.
#
#   packaging/install-deps.sh build   # compile perfd and perfctl
#   packaging/install-deps.sh test    # build + unit and integration tests
#   packaging/install-deps.sh bench   # test + perf and bpftrace to compare with
#
# The test stage also installs playwright-core from the npm registry into
# $PERFD_TEST_NODE_DIR (default /var/cache/perfd-test/node), pinned, for
# test_flamegraph.py to drive Debian's chromium with; it never downloads
# a browser of its own.
set -eu

build="make gcc clang llvm pkg-config bpftool libbpf-dev libelf-dev libdw-dev
       libsystemd-dev libjson-c-dev zlib1g-dev libiberty-dev liblzma-dev
       protobuf-c-compiler libprotobuf-c-dev"
test="$build golang-go libcriterion-dev python3 python3-pytest libc6-dbg elfutils xz-utils binutils g++ nodejs lld
      chromium"
bench="$test linux-perf bpftrace"

case "${1:-build}" in
build) want=$build ;;
test) want=$test ;;
bench) want=$bench ;;
*) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

node_dir=${PERFD_TEST_NODE_DIR:-/var/cache/perfd-test/node}
playwright_version=1.65.1

# playwright-core for the test stage, unless that version is there.
install_node_modules() {
	case "${1:-build}" in test|bench) ;; *) return 0 ;; esac
	if grep -qs "\"version\": \"$playwright_version\"" \
		"$node_dir/node_modules/playwright-core/package.json"; then
		return 0
	fi
	if ! command -v npm >/dev/null; then
		echo "install-deps: no npm (it comes with nodejs) to install playwright-core with" >&2
		exit 1
	fi
	echo "install-deps: installing playwright-core $playwright_version into $node_dir"
	mkdir -p "$node_dir"
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$node_dir" --no-save \
		--no-audit --no-fund --loglevel=error "playwright-core@$playwright_version"
}

missing=""
for p in $want; do
	if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	install_node_modules "${1:-build}"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing; run as root to install them" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
install_node_modules "${1:-build}"
