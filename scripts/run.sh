#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds, and starts the Tandem desktop app on its
# default model (the Pocket Dictionary of resources/models, copied into the build).
# Arguments are passed on to tandem (for example --screenshot shot.png).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
exec build/app/tandem "$@"
