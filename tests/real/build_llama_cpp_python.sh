#!/usr/bin/env bash
# Builds llama-cpp-python (the `real` extra's server) from its sdist once, for any x86_64 with AVX2, into a
# cache folder, and prints the wheel's path; a machine that built it before reuses it (about 12 minutes on
# 2 cores the first time). pip's own build uses -march=native, and on a virtual machine that advertises AMX
# without granting it (Firecracker does) the model's first matrix product dies of a protection fault.
set -euo pipefail
VERSION=0.3.36
CACHE="${XUN_LLAMA_CPP_PYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xun/llama-cpp-python-$VERSION-portable}"
WHEEL="$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
if [ -n "$WHEEL" ]; then
    echo "$WHEEL"
    exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -w "$WORK" >&2
mkdir -p "$CACHE"
for built in "$WORK"/llama_cpp_python-"$VERSION"-*.whl; do
    cp "$built" "$CACHE/$(basename "$built").tmp" && mv "$CACHE/$(basename "$built").tmp" "$CACHE/$(basename "$built")"
    echo "$CACHE/$(basename "$built")"
done
