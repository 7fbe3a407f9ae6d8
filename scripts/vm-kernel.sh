#!/usr/bin/env bash
# Unpacks the microVM tier's guest kernel (src/vm/vm.h) into a cache directory, without
# installing it on the host: Debian's cloud kernel package, fetched with apt-get download and
# extracted with dpkg -x. `airlock profile build` of a microvm profile reads it from
# $AIRLOCK_VM_KERNEL_DIR (default /var/cache/airlock/vm-kernel). Fast when it is there.
set -euo pipefail

dir=${AIRLOCK_VM_KERNEL_DIR:-/var/cache/airlock/vm-kernel}
if compgen -G "$dir/boot/vmlinuz-*" > /dev/null; then
        exit 0
fi
# The versioned package the metapackage points at, e.g. linux-image-6.1.0-56-cloud-amd64.
pkg=$(apt-cache depends linux-image-cloud-amd64 2> /dev/null |
        awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$pkg" ]; then
        echo "vm-kernel: apt knows no linux-image-cloud-amd64 (run apt-get update); the microvm profile's image cannot be built" >&2
        exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "$pkg" > /dev/null)
mkdir -p "$dir.new"
dpkg -x "$tmp"/"$pkg"_*.deb "$dir.new"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "vm-kernel: $pkg unpacked in $dir" >&2
