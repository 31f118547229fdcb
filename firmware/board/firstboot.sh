#!/bin/sh
# tether first boot; see tether-firstboot.service.
set -eu

grow_root() {
    root_dev=$(findmnt -n -o SOURCE /)
    root_name=$(basename "$root_dev")
    disk="/dev/$(basename "$(readlink -f "/sys/class/block/$root_name/..")")"
    part=$(cat "/sys/class/block/$root_name/partition")
    # Grow the root partition to the end of the card; partx tells the kernel the
    # new size of the mounted partition, then the filesystem follows it online.
    echo ", +" | sfdisk --no-reread --no-tell-kernel -q -N "$part" "$disk"
    partx -u -n "$part" "$disk"
    resize2fs "$root_dev"
    echo "tether-firstboot: root $root_dev grown to $(df -h --output=size / | tail -1 | tr -d ' ')"
}

echo "tether-firstboot: starting"
grow_root || echo "tether-firstboot: could not grow the root partition" >&2
device=$(cat /etc/tether/device)
echo "tether-$device" > /etc/hostname
hostname "tether-$device"
# ed25519 only: an RSA key takes ~20 s to make on an emulated or small board.
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
install -d -o tether -g tether -m 0750 /var/lib/tether
touch /var/lib/tether/firstboot.done
echo "tether-firstboot: done (hostname tether-$device)"
