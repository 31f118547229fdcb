#!/bin/sh
# mmdebstrap --setup-hook: runs before any package is unpacked into "$1".
# The kernel package builds an initrd when it is installed; with the default
# MODULES=most that takes ~9 minutes under emulation, with MODULES=list seconds.
set -eu
mkdir -p "$1/etc/initramfs-tools/conf.d"
printf 'MODULES=list\nCOMPRESS=zstd\n' > "$1/etc/initramfs-tools/conf.d/tether.conf"
