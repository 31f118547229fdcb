#!/bin/sh
# tether first boot; see tether-firstboot.service.
set -eu
echo "tether-firstboot: starting"
root_dev=$(findmnt -n -o SOURCE /)
root_name=$(basename "$root_dev")
disk="/dev/$(basename "$(readlink -f "/sys/class/block/$root_name/..")")"
part=$(cat "/sys/class/block/$root_name/partition")
# Grow the last partition to the end of the card; partx tells the kernel the
# new size of a mounted partition, then the filesystem follows it online.
if echo ", +" | sfdisk --no-reread --no-tell-kernel -q -N "$part" "$disk"; then
    partx -u -n "$part" "$disk"
    resize2fs "$root_dev"
else
    echo "tether-firstboot: could not grow partition $part of $disk" >&2
fi
device=$(cat /etc/tether/device)
echo "tether-$device" > /etc/hostname
hostname "tether-$device"
ssh-keygen -A
install -d -o tether -g tether -m 0750 /var/lib/tether
touch /var/lib/tether/firstboot.done
echo "tether-firstboot: done (root on $root_dev, hostname tether-$device)"
