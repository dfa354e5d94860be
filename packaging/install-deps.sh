#!/bin/sh
# install-deps.sh - install the Debian packages perfd needs to build, test
# or benchmark, and only those that are missing.  Runs `apt-get update` first
# (a fresh machine has no package lists), then one `apt-get install`.
#
#   packaging/install-deps.sh build   # compile perfd and perfctl
#   packaging/install-deps.sh test    # build + unit and integration tests
#   packaging/install-deps.sh bench   # test + perf and bpftrace to compare with
set -eu

build="make gcc clang llvm pkg-config bpftool libbpf-dev libelf-dev libdw-dev
       libsystemd-dev libjson-c-dev zlib1g-dev libiberty-dev liblzma-dev
       protobuf-c-compiler libprotobuf-c-dev"
test="$build golang-go libcriterion-dev python3 python3-pytest libc6-dbg elfutils xz-utils binutils g++ nodejs lld"
bench="$test linux-perf bpftrace"

case "${1:-build}" in
build) want=$build ;;
test) want=$test ;;
bench) want=$bench ;;
*) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing; run as root to install them" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
