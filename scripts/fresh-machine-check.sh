#!/usr/bin/env bash
# Runs CI (.ci/run: the README's test command and the install check) on a machine with nothing installed
# beyond Debian 12's base: a debootstrap'ed bookworm (minbase) in a folder, entered with chroot. Proves that
# scripts/install-deps.sh installs everything, where a warm development machine cannot.
#   sudo scripts/fresh-machine-check.sh [ROOT]     (default ROOT: ../fresh-debian; needs debootstrap)
# The base system is made once and kept as ROOT.base; each run starts from a copy of it, with a clone of
# this repository's HEAD and a copy of ../shared beside it, as CI has them. The log is ROOT.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=$(realpath -m "${1:-../fresh-debian}")
[[ $(id -u) -eq 0 ]] || { echo "error: run as root (debootstrap, mount and chroot need it)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "error: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }
[[ -d ../shared ]] || { echo "error: ../shared (CI's copy beside the project) is missing" >&2; exit 1; }

unmount() { for m in dev/pts dev sys proc ""; do mountpoint -q "$root/$m" && umount "$root/$m"; done; return 0; }
trap unmount EXIT
if [[ ! -d $root.base ]]; then
  debootstrap --variant=minbase bookworm "$root.base.partial" http://deb.debian.org/debian
  mv "$root.base.partial" "$root.base"
fi
unmount
rm -rf "$root"
cp -a "$root.base" "$root"
# Its own mount point, so that programs asking for the free space of a folder (QStorageInfo) find one.
mount --bind "$root" "$root"
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/work"
git clone -q "$repo" "$root/work/main"
cp -r ../shared "$root/work/shared"
chmod -R a-w "$root/work/shared"
echo "running .ci/run at $(git -C "$root/work/main" log --oneline -1) in $root (log: $root.log)"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 CI=true bash -c 'cd /work/main && time bash .ci/run' >"$root.log" 2>&1 && status=0 || status=$?
grep -E "check-install-deps|tests passed|tests failed|^real" "$root.log" || true
echo "exit $status"
exit "$status"
