#!/bin/sh
# airlock-vm-image: builds a microVM profile's guest (docs/PROFILES.md, "The microvm tier"), run
# by `airlock profile build` for a profile whose "isolation" is "microvm". It writes into OUT:
#   root.erofs   the guest's read-only root: what the namespaces tier binds for the profile
#                (Python 3.11's standard library, Debian's Python packages, bash and coreutils,
#                the shared libraries all of them load, the same /etc allow-list and generated
#                identity files as src/jail/mount.c), the profile's layer at /opt/airlock/layer
#                when it has one, the runner at /opt/airlock/airlock-runner and the
#                sandbox's seccomp filter (SECCOMP_BPF, compiled by the airlock binary as
#                the jail compiles it) at /opt/airlock/seccomp.bpf, which init loads before
#                it executes the runner
#   initrd.cpio  the guest's initramfs: the init (src/vm/init.c) and the kernel modules it
#                loads, in dependency order (modules.list; modules-net.list for a guest with
#                network)
#   vmlinuz      the guest kernel, copied from KERNEL_DIR
#   manifest     key=value lines: kernel release, sizes, the build's time
# KERNEL_DIR is a Debian cloud kernel package unpacked with `dpkg -x` (scripts/vm-kernel.sh).
# Everything is written under OUT.new and renamed into place at the end: a failed build leaves
# the old guest current.
set -eu

usage() {
        echo "usage: airlock-vm-image OUT RUNNER INIT KERNEL_DIR SECCOMP_BPF [ROOTFS] [LAYER_DIR]" >&2
        exit 2
}
[ $# -ge 5 ] || usage
out=$1 runner=$2 init=$3 kdir=$4 seccomp=$5 rootfs=${6:-/} layer=${7:-}
case $rootfs in */) ;; *) rootfs=$rootfs/ ;; esac

die() {
        echo "airlock-vm-image: $*" >&2
        exit 1
}
command -v mkfs.erofs > /dev/null || die "mkfs.erofs is missing: install Debian's erofs-utils"
command -v cpio > /dev/null || die "cpio is missing: install Debian's cpio"
[ -x "$runner" ] || die "the runner $runner is not an executable file"
[ -x "$init" ] || die "the guest init $init is not an executable file"
[ -s "$seccomp" ] || die "the seccomp filter $seccomp is missing or empty"
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2> /dev/null | head -n 1)
[ -n "$vmlinuz" ] || die "no boot/vmlinuz-* in $kdir: unpack linux-image-*-cloud-amd64 there (scripts/vm-kernel.sh)"
release=${vmlinuz##*/vmlinuz-}
mods=$kdir/lib/modules/$release
[ -d "$mods" ] || die "no lib/modules/$release in $kdir"

tmp=$out.new
rm -rf "$tmp"
mkdir -p "$tmp/root" "$tmp/initrd/lib/modules"
root=$tmp/root

# The files: Python, its packages, the shells and tools a bash cell expects.
list=$tmp/files
{
        for d in usr/lib/python3.11 usr/lib/python3/dist-packages usr/share/zoneinfo \
                usr/share/fonts usr/share/matplotlib usr/share/ca-certificates \
                usr/lib/ssl; do
                [ -e "$rootfs$d" ] && find "$rootfs$d" \( -type f -o -type l \) \
                        ! -name '*.pyc' ! -path '*/__pycache__/*'
        done
        for pkg in coreutils bash dash grep sed findutils gzip tar diffutils python3.11-minimal \
                python3.11 python3-minimal python3; do
                dpkg-query -L "$pkg" 2> /dev/null | grep -E '^/(usr/)?s?bin/' || true
        done
} | sed "s|^$rootfs|/|; s|^//|/|" | sort -u > "$list.main"

# The shared libraries every ELF file of the list loads, and the loader.
: > "$list.libs"
grep -E '\.so(\.|$)|/s?bin/' "$list.main" | sed "s|^/|$rootfs|" | xargs -d '\n' ldd 2> /dev/null |
        awk '/=> \//{print $3} /^\t\/lib64\//{print $1}' | sort -u >> "$list.libs" || true
ldd "$runner" | awk '/=> \//{print $3} /^\t\/lib64\//{print $1}' >> "$list.libs"
# A merged-/usr image (Debian 12) names /lib, /lib64, /bin and /sbin through symlinks into /usr:
# the paths go in under /usr, and the top-level names become the same links.
if [ -L "${rootfs}lib" ]; then
        sed -i -E 's#^/(lib|lib64|bin|sbin)/#/usr/\1/#' "$list.main" "$list.libs"
fi
sort -u "$list.main" "$list.libs" > "$list"

# Copied in one pass with their directories (cpio's pass-through mode), symlinks as links, with
# the targets of the symlinks among them.
tr '\n' '\0' < "$list" | (cd "$rootfs" && xargs -0 readlink -f 2> /dev/null) |
        sed "s|^$rootfs|/|; s|^//|/|" > "$list.targets" || true
# And every hop of a chain of links: Debian's alternatives go through /etc/alternatives and
# back (libblas.so.3 -> /etc/alternatives/... -> blas/libblas.so.3 -> libblas.so.3.11.0).
while read -r f; do
        p=$rootfs${f#/}
        n=0
        while [ -L "$p" ] && [ $n -lt 16 ]; do
                t=$(readlink "$p")
                case $t in
                /*) p=$rootfs${t#/} ;;
                *) p=${p%/*}/$t ;;
                esac
                echo "$p"
                n=$((n + 1))
        done
done < "$list" | xargs -r -d '\n' realpath -s -m | sed "s|^$rootfs|/|; s|^//|/|" >> "$list.targets"
[ -L "${rootfs}lib" ] && sed -i -E 's#^/(lib|lib64|bin|sbin)/#/usr/\1/#' "$list.targets"
mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib" "$root/usr/lib64"
for l in bin sbin lib lib64; do
        ln -s "usr/$l" "$root/$l"
done
sort -u "$list" "$list.targets" | sed 's|^/||' | (cd "$rootfs" && cpio -pdm --quiet "$root" 2> /dev/null) || true

# As in the jail: no /sys, no /root (nothing of the guest's kernel or root user to look at).
mkdir -p "$root/etc" "$root/work" "$root/tmp" "$root/proc" "$root/dev" "$root/opt/airlock" \
        "$root/home" "$root/mnt"
# Mount points: init binds the guest's /work at both (E2B's and OpenAI's names for it), so that
# a process there finds itself there (getcwd() says /home/user, as in the namespaces tier).
mkdir -p "$root/home/user" "$root/mnt/data"
for e in alternatives ca-certificates ca-certificates.conf fonts ld.so.conf ld.so.conf.d \
        localtime matplotlibrc mime.types protocols python3 python3.11 R services ssl timezone \
        bash.bashrc inputrc debian_version os-release profile gai.conf; do
        [ -e "${rootfs}etc/$e" ] && cp -a "${rootfs}etc/$e" "$root/etc/$e"
done
cat > "$root/etc/passwd" << 'EOF'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/work:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' > "$root/etc/group"
echo sandbox > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
        > "$root/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\n' > "$root/etc/nsswitch.conf"
echo '# no network in the microVM' > "$root/etc/resolv.conf"
ldconfig -r "$root" 2> /dev/null || true
install -m 0755 "$runner" "$root/opt/airlock/airlock-runner"
install -m 0444 "$seccomp" "$root/opt/airlock/seccomp.bpf"
if [ -n "$layer" ] && [ -d "$layer" ]; then
        mkdir -p "$root/opt/airlock/layer"
        cp -a "$layer/." "$root/opt/airlock/layer/"
fi

# Uncompressed: mkfs is a copy, and the guest reads pages without a decompressor in the way.
mkfs.erofs --quiet -T0 --all-root "$tmp/root.erofs" "$root" > /dev/null ||
        die "mkfs.erofs failed on $root"
rm -rf "$root"

# The initramfs: init and the modules, each after the ones it needs (modinfo's depends=).
install -m 0755 "$init" "$tmp/initrd/init"
mkdir -p "$tmp/initrd/dev" "$tmp/initrd/proc" "$tmp/initrd/sys" "$tmp/initrd/newroot"
: > "$tmp/initrd/modules.list"
for m in kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko \
        kernel/drivers/virtio/virtio_mmio.ko kernel/drivers/block/virtio_blk.ko \
        kernel/drivers/char/virtio_console.ko kernel/lib/libcrc32c.ko kernel/fs/erofs/erofs.ko; do
        [ -f "$mods/$m" ] || continue # built into this kernel
        cp "$mods/$m" "$tmp/initrd/lib/modules/"
        echo "${m##*/}" >> "$tmp/initrd/modules.list"
done
# The network device's driver, loaded only by a guest whose profile allows egress (init's
# net=1): a guest without network loads nothing more.
: > "$tmp/initrd/modules-net.list"
for m in kernel/net/core/failover.ko kernel/drivers/net/net_failover.ko \
        kernel/drivers/net/virtio_net.ko; do
        [ -f "$mods/$m" ] || continue # built into this kernel
        cp "$mods/$m" "$tmp/initrd/lib/modules/"
        echo "${m##*/}" >> "$tmp/initrd/modules-net.list"
done
(cd "$tmp/initrd" && find . | cpio -o -H newc --quiet) > "$tmp/initrd.cpio"
rm -rf "$tmp/initrd"
cp "$vmlinuz" "$tmp/vmlinuz"
{
        echo "kernel=$release"
        echo "root_bytes=$(stat -c %s "$tmp/root.erofs")"
        echo "initrd_bytes=$(stat -c %s "$tmp/initrd.cpio")"
        echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$tmp/manifest"
rm -f "$list" "$list.main" "$list.libs" "$list.targets"
rm -rf "$out.old"
[ -e "$out" ] && mv "$out" "$out.old"
mv "$tmp" "$out"
rm -rf "$out.old"
echo "airlock-vm-image: $out: root $(du -h "$out/root.erofs" | cut -f1), kernel $release"
