#!/bin/sh
# Install the Debian packages prefixgate needs that are missing. Quiet when
# everything is there; as root it installs, otherwise it says what to run.
set -eu
PKGS="clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev liburing-dev \
libxxhash-dev libcmocka-dev pkg-config make gcc libc6-dev iproute2 \
python3 curl procps libclang-rt-14-dev python3-uvicorn python3-starlette clang-format \
libnats-dev nats-server libc-ares-dev etcd-server etcd-client libssl-dev openssl"
[ $# -gt 0 ] && PKGS="$PKGS $*"
# node and npm, for llamaserve (tools/llamaserve/install.sh): Debian's,
# unless a node with its npm is there already (NodeSource's nodejs carries
# npm and conflicts with Debian's npm package)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	PKGS="$PKGS nodejs npm"
fi
missing=""
for p in $PKGS; do
	s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$s" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$missing" >&2
	echo "deps: run as root: apt-get install -y$missing" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
