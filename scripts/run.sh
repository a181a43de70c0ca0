#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds, and starts the Tandem desktop app on its
# default model (the tiny-qwen3moe fixture copied into the build until a real small model ships).
# Arguments are passed on to tandem (for example --screenshot shot.png).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
exec build/app/tandem "$@"
