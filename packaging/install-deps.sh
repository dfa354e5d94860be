#!/bin/sh
# install-deps.sh - install the Debian packages perfd needs to build, test
# or benchmark, and only those that are missing.  Runs `apt-get update` first
# (a fresh machine has no package lists), then one `apt-get install`.
# The test stage also installs the npm packages the tests read, pinned, into
# $PERFD_NPM_DIR (the Makefile passes BUILD/npm; default build/npm), with
# npm's cache beside them, and only when that version is not there yet.
#
#   packaging/install-deps.sh build   # compile perfd and perfctl
#   packaging/install-deps.sh package # build + debhelper: make deb
#   packaging/install-deps.sh test    # build + unit and integration tests
#   packaging/install-deps.sh bench   # test + bpftrace to compare with (perf is a
#                                     # test dependency: test_switch.py compares)
set -eu

build="make gcc clang llvm pkg-config bpftool libbpf-dev libelf-dev libdw-dev
       libsystemd-dev libjson-c-dev zlib1g-dev libiberty-dev liblzma-dev
       protobuf-c-compiler libprotobuf-c-dev libcurl4-openssl-dev libncurses-dev scdoc"
test="$build protobuf-compiler golang-go libcriterion-dev python3 python3-pytest python3-jsonschema libc6-dbg elfutils xz-utils binutils g++ nodejs lld
      chromium libpython3.11 tmux linux-perf busybox-static cpio qemu-system-x86 prometheus
      debhelper lintian bash-completion zsh man-db debootstrap systemd-container
      python3-fusepy fuse3"
# what packaging/debian/control's Build-Depends add to the build's (the
# <!nocheck> ones are for dh_auto_test's check of the docs)
package="$build debhelper xz-utils bash-completion man-db python3 python3-pytest zsh"
bench="$test bpftrace"
# prometheus: its promtool checks /metrics, and its server scrapes it in
# test_metrics.py.
# The kernel matrix (make test-kernels) builds its guests' initramfs with
# busybox-static and cpio; it boots them with a QEMU 10 it downloads from
# bookworm-backports, which runs on the libraries Debian's own
# qemu-system-x86 brings.
# test_modules.py serves a binary from a FUSE server that stops answering
# (tests/integration/hangfs.py): python3-fusepy, on libfuse2, which mounts
# directly as root; fuse3 brings the fuse tools (fusermount, a link to its
# fusermount3, for a libfuse2 that is not root).
# The boot test (tests/package/test_boot.py) makes a Debian 12 root with
# debootstrap and boots it with systemd-nspawn (systemd-container).
# speedscope: its file-format-schema.json checks test_speedscope.py's files;
# playwright-core drives Debian's chromium for test_flamegraph.py (it never
# downloads a browser of its own).
npm_test="speedscope@1.25.0 playwright-core@1.65.1"

case "${1:-build}" in
build) want=$build npm_want="" ;;
package) want=$package npm_want="" ;;
test) want=$test npm_want=$npm_test ;;
bench) want=$bench npm_want=$npm_test ;;
*) echo "usage: $0 build|package|test|bench" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
# Debian's nodejs comes without npm; some other builds of nodejs bring it
# (and conflict with Debian's npm package), so ask for it only when absent.
if [ -n "$npm_want" ] && ! command -v npm >/dev/null 2>&1; then
	missing="$missing npm"
fi

if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages:$missing; run as root to install them" >&2
		exit 1
	fi
	echo "install-deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
fi

npm_dir=${PERFD_NPM_DIR:-build/npm}
# All in one npm install: one with --no-save removes what an earlier one put
# there.  Skipped when every pinned version is there already.
npm_missing=""
for spec in $npm_want; do
	name=${spec%@*} version=${spec##*@}
	json="$npm_dir/node_modules/$name/package.json"
	if ! [ -f "$json" ] || [ "$(node -p "require(process.argv[1]).version" "$(realpath "$json")")" != "$version" ]; then
		npm_missing="$npm_missing $spec"
	fi
done
if [ -n "$npm_missing" ]; then
	echo "install-deps: installing$npm_missing from the npm registry into $npm_dir"
	mkdir -p "$npm_dir"
	# shellcheck disable=SC2086
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
	npm install --prefix "$npm_dir" --cache "$npm_dir/cache" --no-save --no-package-lock \
		--no-audit --no-fund --loglevel=error $npm_want
fi
