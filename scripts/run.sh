#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds, and starts Tandem on its default model.
# Until the desktop app lands this is the terminal chat on a tiny fixture model (random weights: it
# answers gibberish, but every part of the pipeline runs). Arguments go to tandem-cli chat.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
fixtures=${TANDEM_FIXTURES:-../shared/fixtures}
exec build/app/tandem-cli chat --model "$fixtures/tiny-qwen3moe" --max-tokens 64 "$@"
