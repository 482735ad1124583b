#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a separate project
# against it twice: with find_package(tiermem) and with pkg-config.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)/consumer
tmp=$(mktemp -d /tmp/tiermem-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src_dir" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cmake-build/consumer"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 "$src_dir/main.cc" -o "$tmp/pc-consumer" $(pkg-config --cflags --libs tiermem)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc-consumer"
