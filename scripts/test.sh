#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds, and runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure
