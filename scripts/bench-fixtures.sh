#!/usr/bin/env bash
# Decode speed of every fixture on its `long` golden prompt: prefill the 160 prompt tokens, then
# greedily decode N tokens (default 128), and print one line per fixture.
# Usage: scripts/bench-fixtures.sh [NEW_TOKENS] [THREADS]     (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
fixtures=${TANDEM_FIXTURES:-tests/fixtures}
new_tokens=${1:-128}
threads=${2:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-22s %8s %14s %14s\n' fixture prompt "prefill tok/s" "decode tok/s"
for dir in "$fixtures"/tiny-*/; do
  name=$(basename "$dir")
  python3 - "$dir/golden.safetensors" > "$tmp/ids.txt" <<'PY'
import json, struct, sys, array
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
meta = json.loads(raw[8:8 + n])['long.prompt_ids']
begin, end = meta['data_offsets']
ids = array.array('i'); ids.frombytes(raw[8 + n + begin:8 + n + end])
print(' '.join(map(str, ids)))
PY
  line=$(build/app/tandem-cli generate --model "$dir" --ids-file "$tmp/ids.txt" --new-tokens "$new_tokens" \
         --temperature 0 --threads "$threads" 2>&1 >/dev/null | grep 'tok/s')
  prefill=$(sed -E 's/.*prompt: ([0-9]+) tokens at ([0-9.]+) tok\/s.*/\2/' <<<"$line")
  prompt=$(sed -E 's/.*prompt: ([0-9]+) tokens.*/\1/' <<<"$line")
  decode=$(sed -E 's/.*generated: [0-9]+ tokens at ([0-9.]+) tok\/s.*/\1/' <<<"$line")
  printf '%-22s %8s %14s %14s\n' "$name" "$prompt" "$prefill" "$decode"
done
