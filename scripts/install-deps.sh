#!/usr/bin/env bash
# Installs the Debian 12 packages Tandem builds with, skipping those already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-qpa-plugins qt6-charts-dev qt6-svg-dev libqt6sql6-sqlite
  # Qt6Charts's CMake files need Qt6OpenGL's, which qt6-base-dev only recommends
  libqt6opengl6-dev
  # the fonts the package depends on: code in DejaVu Sans Mono, colour emoji in titles
  fonts-dejavu-core fonts-noto-color-emoji
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libnuma-dev libsqlite3-dev
  # tandem-cli serve's HTTP server; its test installs the openai Python package into a venv of its own
  libcpp-httplib-dev python3-venv
  # packaging: cpack's .deb (dpkg-shlibdeps from dpkg-dev, file) and the validators its tests run
  dpkg-dev file desktop-file-utils appstream
  # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "Installing: ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
