#!/bin/busybox sh
# The init of a small Linux guest (tests/nfs.rs): busybox, the kernel's NFS client as
# modules, a user-mode network whose 10.0.2.2 is the host's loopback. It mounts the
# host's `wip serve-nfs` at /mnt as a kernel NFS client does, runs /test.sh, and powers
# off. Lines starting with @@ are for the test.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
for m in $(cat /m/order); do insmod "/m/$m.ko" || echo "@@ insmod $m failed"; done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
port=$(sed -n 's/.*nfsport=\([0-9]*\).*/\1/p' /proc/cmdline)
if nfsmount 10.0.2.2:/ /mnt "vers=3,proto=tcp,port=$port,mountport=$port,mountproto=tcp,nolock,lookupcache=none,addr=10.0.2.2,mountaddr=10.0.2.2,soft,timeo=50,retrans=2"; then
  echo "@@ mounted"
  cd /mnt && sh /test.sh
  cd /
fi
echo "@@ end"
poweroff -f
