#!/bin/sh
# mmdebstrap --customize-hook: "$1" is the finished root filesystem, "$2" the
# file listing the initrd modules, "$3" where to write the package versions.
# Everything here is the same for every board: it is cached with the rootfs.
set -eu
root="$1"
cp "$2" "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all
# Per-board identity is made at first boot, never shared through the cache.
rm -f "$root"/etc/ssh/ssh_host_*
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
echo tether > "$root/etc/hostname"
# The user the edge runs as, with the audio group for the sound card.
chroot "$root" useradd --create-home --shell /bin/bash --uid 1000 --user-group \
    --groups audio tether
chroot "$root" systemctl enable systemd-networkd.service
# Logs are kept in memory: an SD card is not a disk to write journals to.
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' > "$root/etc/systemd/journald.conf.d/tether.conf"
rm -rf "$root/var/cache/apt/"*.bin "$root/var/log/"*.log "$root/var/cache/debconf/"*-old
dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Package}\t${Version}\n' > "$3"
