#!/usr/bin/env bash
# Makes .deps (ignored by git), what scripts/device-gpu-check.sh needs carried to the GPU machine, which lacks
# these Debian 12 packages: their files unpacked with dpkg -x into .deps/usr, the .pc files' prefix made
# relative to the file, and the static libraries, documentation and manuals left out (the working tree and
# carry must stay under 64 MiB). Run here, in the repository's root, once per checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(nlohmann-json3-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libnuma-dev libnuma1
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev zlib1g-dev libbrotli-dev pkgconf-bin libpkgconf3)
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download "${packages[@]}" >/dev/null 2>&1) ||
  { echo "make-device-deps: apt-get download failed (network, or a package name Debian 12 no longer has)" >&2; exit 1; }
rm -rf .deps.partial && mkdir .deps.partial
for f in "$debs"/*.deb; do dpkg -x "$f" .deps.partial; done
find .deps.partial -name '*.a' -delete
rm -rf .deps.partial/usr/share/doc .deps.partial/usr/share/man
for pc in .deps.partial/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
  sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' "$pc"
done
for pc in .deps.partial/usr/share/pkgconfig/*.pc; do
  [[ -e $pc ]] && sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../..|' "$pc"
done
for pc in libssl libcrypto openssl; do
  f=.deps.partial/usr/lib/x86_64-linux-gnu/pkgconfig/$pc.pc
  [[ -e $f ]] && sed -i 's|^Cflags: -I${includedir}$|Cflags: -I${includedir} -I${includedir}/x86_64-linux-gnu|' "$f"
done
rm -rf .deps && mv .deps.partial .deps
echo "made .deps ($(du -sh .deps | cut -f1))"
