#!/usr/bin/env bash
# README command 1: install, build, start a local cluster (hpcqd + 4 agents on
# loopback, each with its own state dir and a synthetic 2-package, 4-NUMA,
# 16-core topology), run the sample job, stop the cluster. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
.ci/build
# Installed without debug information (90 MB -> 16 MB for hpcq); build/ keeps it.
meson install -C build --strip --quiet >/dev/null
ldconfig
hpcq start --agents 4 --fanout 2 --topology "pack:2 numa:2 core:4 pu:1" -- examples/demo.sh
