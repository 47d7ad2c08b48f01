#!/usr/bin/env bash
# host-setup.sh -- take a fresh Debian 12 (bookworm) machine (PID 1 may or may not be systemd;
# no internet except Debian's mirror and the npm registry) to a running Incus daemon with a btrfs
# pool (dir as fallback), a NAT bridge and two locally built container images:
#   debian-base  Debian minbase + systemd, networkd DHCP, ca-certificates
#   dev-base     debian-base + user dev (uid 1000, passwordless sudo), bash, coreutils, getent,
#                python3, git, curl, ca-certificates, sudo
# Adapted from shared/reference/incus-host-setup.sh (the tested recipe; traps in incus-notes.md).
#
# Idempotent: every step checks before acting, so re-running is cheap (~1 s) and safe.
# Run as root.  Tested on: Debian 12, kernel 6.18.44-fc, incus 6.0.4 from bookworm-backports.
#
# Tunables (environment variables):
#   IMAGES                 images to build                              (default: "debian-base dev-base")
#   IMAGE_REBUILD=1        rebuild + re-import the images even if the aliases exist
#   INCUS_IMG_CACHE        where rootfs/metadata tarballs are kept      (default: /var/cache/incus-img)
#                          (CI can cache this dir: if the tarballs exist, the bootstrap step is skipped)
#   INCUS_POOL_DRIVER      btrfs (loop file, instant CoW copies) | dir  (default: btrfs)
#   INCUS_POOL_SIZE        size of the btrfs loop file (sparse)         (default: 30GiB)
#   INCUS_BRIDGE           managed bridge name                          (default: incusbr0)
#   INCUS_BRIDGE_CIDR      bridge address/prefix                        (default: 10.77.0.1/24)
#   DEBIAN_MIRROR          Debian mirror for the image                  (default: http://deb.debian.org/debian)
#   BOOTSTRAP              mmdebstrap | debootstrap                     (default: mmdebstrap, ~2x faster)
#   INCUS_HTTPS_ADDRESS    the API's HTTPS address when none is set     (default: 127.0.0.1:8443)
#   INCUS_SMOKE_TEST=0     skip the final launch/exec/delete smoke test (default: 1)
set -euo pipefail

IMAGES=${IMAGES:-debian-base dev-base}
IMAGE_REBUILD=${IMAGE_REBUILD:-0}
CACHE=${INCUS_IMG_CACHE:-/var/cache/incus-img}
POOL_DRIVER=${INCUS_POOL_DRIVER:-btrfs}
POOL_SIZE=${INCUS_POOL_SIZE:-30GiB}
BRIDGE=${INCUS_BRIDGE:-incusbr0}
BRIDGE_CIDR=${INCUS_BRIDGE_CIDR:-10.77.0.1/24}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BOOTSTRAP=${BOOTSTRAP:-mmdebstrap}
SMOKE=${INCUS_SMOKE_TEST:-1}

SOCK=/var/lib/incus/unix.socket
INCUSD=/usr/libexec/incus/incusd
export PATH=/usr/libexec/incus:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive

T_START=$(date +%s%N)
log() { local d=$(( ($(date +%s%N) - T_START) / 100000000 )); printf '[incus-setup +%d.%ds] %s\n' $((d/10)) $((d%10)) "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || log "WARNING: written for Debian bookworm, this is ${PRETTY_NAME:-unknown}"

# ---------------------------------------------------------------------------------------------
# 1. Packages.  incus 6.0.4 (LTS) comes from bookworm-backports.  We install `incus-base`
#    (daemon + containers) instead of `incus`: the latter only adds qemu/swtpm/incus-agent for
#    VMs, and VMs cannot work on this kernel anyway (no vhost_vsock, see notes).
# ---------------------------------------------------------------------------------------------
PKGS=(incus-base incus-client lxcfs dnsmasq-base nftables uidmap mmdebstrap debootstrap btrfs-progs zstd xz-utils curl
  strace) # strace: tests/launcher_host_test.ts (a launcher start makes no DNS lookup)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding bookworm-backports apt source"
    cat > /etc/apt/sources.list.d/backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -q
  elif ! apt-cache show incus-base >/dev/null 2>&1; then
    apt-get update -q
  fi
  # Only the incus packages come from backports (pkg/release syntax; apt then also takes their
  # backports-only deps libcowsql0/libraft0 from there); everything else from bookworm proper.
  args=()
  for p in "${missing[@]}"; do
    case "$p" in incus-base|incus-client) args+=("$p/bookworm-backports");; *) args+=("$p");; esac
  done
  log "apt-get install ${args[*]}"
  # --no-install-recommends: skips apparmor (kernel has no AppArmor); dnsmasq-base is listed
  # explicitly because the managed bridge needs it for DHCP/DNS.
  apt-get install -y -q --no-install-recommends "${args[@]}" >/var/log/incus-setup-apt.log 2>&1 \
    || { tail -30 /var/log/incus-setup-apt.log >&2; die "apt-get install failed"; }
fi

# Unprivileged containers need a subuid/subgid range for root (incus-base postinst adds it);
# incusd takes root's ranges of 65536+ ids as its own when it starts (a smaller line is not one).
has_root_range() { awk -F: '$1 == "root" && $3 >= 65536 { f = 1 } END { exit !f }' "$1"; }
has_root_range /etc/subuid || echo 'root:1000000:1000000000' >> /etc/subuid
has_root_range /etc/subgid || echo 'root:1000000:1000000000' >> /etc/subgid
# isb's idmap "auto" maps the host's uid and gid 1000 into a sandbox (raw.idmap "both 1000
# 1000", so bind mounts owned by the first user are writable as `dev`), and LXC's
# newuidmap/newgidmap refuse that unless root may delegate id 1000. They read these files at
# every container start, and incusd ignores a one-id line (it keeps only 65536+ ranges), so
# nothing has to be restarted to pick it up (measured on incus 6.0.4).
for f in /etc/subuid /etc/subgid; do
  grep -qx 'root:1000:1' "$f" || echo 'root:1000:1' >> "$f"
done

# Every container's systemd and the bridge's dnsmasq each take inotify instances; at the
# kernel's default of 128 per user, dnsmasq died with "failed to create inotify: Too many open
# files" once ~15 instances ran, and new instances got no IPv4 address (seen here). Incus's
# production settings raise it; set it now and for the next boot, never lowering a larger value.
raise_sysctl() { # name value
  local cur; cur=$(sysctl -n "$1" 2>/dev/null || echo 0)
  [ "$cur" -ge "$2" ] 2>/dev/null || sysctl -qw "$1=$2" || log "warning: could not set $1=$2"
}
raise_sysctl fs.inotify.max_user_instances 1024
raise_sysctl fs.inotify.max_user_watches 1048576
if [ -d /etc/sysctl.d ] && [ ! -f /etc/sysctl.d/60-isx-inotify.conf ]; then
  printf 'fs.inotify.max_user_instances = 1024\nfs.inotify.max_user_watches = 1048576\n' \
    > /etc/sysctl.d/60-isx-inotify.conf
fi

# ---------------------------------------------------------------------------------------------
# 2. Daemons.  With systemd as PID 1 use the units; otherwise (this Firecracker VM: PID 1 is
#    process_api) start lxcfs and incusd by hand, detached with setsid so they outlive the
#    calling shell / CI step.
# ---------------------------------------------------------------------------------------------
# A busy daemon can take many seconds to answer (GET /1.0 waits behind storage operations, so the
# probe asks for the instance list); a running incusd is waited for, never started twice.
incus_alive() { [ -S "$SOCK" ] && curl -sf --max-time "${1:-10}" --unix-socket "$SOCK" http://incus/1.0/instances >/dev/null 2>&1; }
# The daemon itself, not its `[lxc monitor]` children (which share the process name).
incusd_running() { [ -S "$SOCK" ] && pgrep -f "^$INCUSD( |\$)" >/dev/null 2>&1; }

if [ "$(cat /proc/1/comm)" = systemd ]; then
  if ! incus_alive; then
    log "starting lxcfs + incus via systemd"
    systemctl start lxcfs.service incus.socket incus.service
  fi
else
  # An lxcfs that died (killed with the session that started it) leaves its FUSE mount behind:
  # every stat of it fails with "Transport endpoint is not connected".  Detach the dead mount
  # so a fresh lxcfs can take its place.
  if grep -qs ' /var/lib/lxcfs ' /proc/self/mounts && ! stat /var/lib/lxcfs/ >/dev/null 2>&1; then
    log "lxcfs mount is stale (its daemon is gone); unmounting it"
    umount -l /var/lib/lxcfs 2>/dev/null || fusermount -uz /var/lib/lxcfs 2>/dev/null \
      || die "cannot unmount the stale lxcfs mount at /var/lib/lxcfs"
  fi
  mkdir -p /var/lib/lxcfs /var/log/incus /run/incus-setup
  if ! mountpoint -q /var/lib/lxcfs; then
    log "starting lxcfs"
    setsid /usr/bin/lxcfs /var/lib/lxcfs </dev/null >>/var/log/lxcfs.log 2>&1 &
    echo $! > /run/incus-setup/lxcfs.pid
    for _ in $(seq 50); do mountpoint -q /var/lib/lxcfs && break; sleep 0.1; done
    mountpoint -q /var/lib/lxcfs || log "WARNING: lxcfs did not mount (containers still work, without /proc virtualisation)"
  fi
  if ! incus_alive && incusd_running; then
    log "incusd is running but slow to answer; waiting for it"
    incus_alive 120 || die "incusd (pid $(pgrep -f "^$INCUSD( |\$)" | tr '\n' ' ')) does not answer on $SOCK"
  fi
  if ! incus_alive; then
    log "starting incusd"
    # Same as /usr/libexec/incus/startup (ExecStart of incus.service).  The unit also sets
    # LimitNOFILE=1048576, which we cannot do here (no CAP_SYS_RESOURCE, hard limit 20000).
    ( set -a; . /etc/default/incus; set +a
      exec setsid "$INCUSD" --group incus-admin --logfile=/var/log/incus/incus.log \
        </dev/null >>/var/log/incus/incusd.stdout 2>&1 ) &
    echo $! > /run/incus-setup/incusd.pid
    "$INCUSD" waitready --timeout=60 || { tail -20 /var/log/incus/incus.log >&2; die "incusd did not become ready"; }
  fi
fi
incus_alive 60 || die "incus API not reachable on $SOCK"
log "incusd is up: $(incus version | tr '\n' ' ')"

# ---------------------------------------------------------------------------------------------
# 3. Initial configuration (equivalent of `incus admin init`), one idempotent step at a time.
# ---------------------------------------------------------------------------------------------
if ! incus network show "$BRIDGE" >/dev/null 2>&1; then
  mtu_args=()
  uplink=$(ip -4 route show default 2>/dev/null | awk '{for(i=1;i<NF;i++) if($i=="dev"){print $(i+1); exit}}')
  if [ -n "$uplink" ] && [ -r "/sys/class/net/$uplink/mtu" ]; then
    up_mtu=$(cat "/sys/class/net/$uplink/mtu")
    # eth0 here has MTU 1400; give the bridge (and so every container NIC) the same MTU.
    [ "$up_mtu" -lt 1500 ] && mtu_args=("bridge.mtu=$up_mtu")
  fi
  log "creating bridge $BRIDGE ($BRIDGE_CIDR, NAT, no IPv6) ${mtu_args[*]:-}"
  incus network create "$BRIDGE" ipv4.address="$BRIDGE_CIDR" ipv4.nat=true ipv6.address=none "${mtu_args[@]}"
fi

if ! incus storage show default >/dev/null 2>&1; then
  if [ "$POOL_DRIVER" = btrfs ]; then
    log "creating storage pool 'default' (btrfs on a ${POOL_SIZE} sparse loop file)"
    incus storage create default btrfs size="$POOL_SIZE" \
      || { log "btrfs pool failed, falling back to dir"; incus storage create default dir; }
  else
    log "creating storage pool 'default' (dir)"
    incus storage create default dir
  fi
fi

if ! incus profile device show default | grep -q '^root:'; then
  incus profile device add default root disk path=/ pool=default >/dev/null
fi
if ! incus profile device show default | grep -q '^eth0:'; then
  incus profile device add default eth0 nic network="$BRIDGE" name=eth0 >/dev/null
fi
# The HTTPS API on loopback only, so the remote path (--remote, tests/live/remote_test.ts) runs
# against this host on every change. Only trusted client certificates get in; an address the
# admin already set (another port, a public one) is left alone.
if [ -z "$(incus config get core.https_address)" ]; then
  incus config set core.https_address "${INCUS_HTTPS_ADDRESS:-127.0.0.1:8443}"
fi

# ---------------------------------------------------------------------------------------------
# 4. The images: mmdebstrap/debootstrap (minbase) -> rootfs + metadata tarballs (cached in
#    $CACHE, so a re-run or a fresh pool only imports) -> incus image import.
# ---------------------------------------------------------------------------------------------
BASE_PKGS="systemd,systemd-sysv,systemd-resolved,udev,dbus,iproute2,ca-certificates,procps"
DEV_PKGS="sudo,bash,coreutils,libc-bin,python3,git,curl,less,xz-utils,zstd"

image_packages() {
  case "$1" in
    debian-base) echo "$BASE_PKGS";;
    dev-base) echo "$BASE_PKGS,$DEV_PKGS";;
    *) die "unknown image $1 (known: debian-base dev-base)";;
  esac
}

# Image-specific configuration of a bootstrapped rootfs ($2 is never empty: checked by caller).
customize_image() {
  local alias=$1 R=$2
  case "$alias" in
    dev-base)
      chroot "$R" groupadd -g 1000 dev
      chroot "$R" useradd -m -u 1000 -g 1000 -s /bin/bash -G sudo dev
      printf 'dev ALL=(ALL) NOPASSWD:ALL\n' > "$R/etc/sudoers.d/dev"
      chmod 0440 "$R/etc/sudoers.d/dev"
      ;;
  esac
}

build_image() {
  local alias=$1
  [ -n "$alias" ] && [ -n "$CACHE" ] || die "build_image: empty alias or cache dir"
  local R="$CACHE/$alias.rootfs.tmp" include
  local rootfs_tar="$CACHE/$alias.rootfs.tar.zst" meta_tar="$CACHE/$alias.meta.tar.xz"
  include=$(image_packages "$alias")
  mkdir -p "$CACHE"
  local attempt
  for attempt in 1 2 3; do
    rm -rf "$R"
    if [ "$BOOTSTRAP" = mmdebstrap ]; then
      # mmdebstrap: parallel downloads + one dpkg run (~25 s cold vs 38-64 s for debootstrap).
      # The merged-usr hook avoids the `usrmerge` package (which drags in perl).
      log "$alias: mmdebstrap --variant=minbase bookworm (attempt $attempt)"
      mmdebstrap --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --include="$include" bookworm "$R" "$MIRROR" >"$CACHE/bootstrap-$alias.log" 2>&1 && break
    else
      mkdir -p "$CACHE/debs"
      log "$alias: debootstrap --variant=minbase bookworm (attempt $attempt)"
      debootstrap --variant=minbase --cache-dir="$CACHE/debs" --include="$include" \
        bookworm "$R" "$MIRROR" >"$CACHE/bootstrap-$alias.log" 2>&1 && break
    fi
    tail -3 "$CACHE/bootstrap-$alias.log" >&2
    [ "$attempt" = 3 ] && die "$BOOTSTRAP failed 3 times (log: $CACHE/bootstrap-$alias.log)"
    sleep 2
  done
  [ -d "$R/etc" ] || die "$alias: bootstrap produced no rootfs in $R"

  log "$alias: configuring rootfs"
  # Networking: systemd-networkd DHCP on eth0 + systemd-resolved. `udev` is REQUIRED: Incus
  # mounts /sys read-write in unprivileged containers, so networkd waits for udev otherwise.
  mkdir -p "$R/etc/systemd/network"
  printf '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n' > "$R/etc/systemd/network/10-eth0.network"
  mkdir -p "$R/etc/systemd/system/multi-user.target.wants" "$R/etc/systemd/system/sockets.target.wants" \
           "$R/etc/systemd/system/sysinit.target.wants"
  ln -sf /lib/systemd/system/systemd-networkd.service "$R/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  ln -sf /lib/systemd/system/systemd-networkd.socket  "$R/etc/systemd/system/sockets.target.wants/systemd-networkd.socket"
  ln -sf /lib/systemd/system/systemd-resolved.service "$R/etc/systemd/system/sysinit.target.wants/systemd-resolved.service"
  ln -sfn ../run/systemd/resolve/stub-resolv.conf "$R/etc/resolv.conf"
  : > "$R/etc/machine-id"; rm -f "$R/var/lib/dbus/machine-id"
  echo "$alias" > "$R/etc/hostname"; chmod 644 "$R/etc/hostname"
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$R/etc/hosts"
  printf '%s\n' "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" > "$R/etc/apt/sources.list"
  rm -f "$R"/etc/systemd/system/timers.target.wants/apt-daily*.timer \
        "$R"/etc/systemd/system/getty.target.wants/getty@tty1.service
  customize_image "$alias" "$R"
  chroot "$R" apt-get clean
  rm -rf "$R"/var/lib/apt/lists/* "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/usr/share/info/* \
         "$R"/var/log/*.log "$R"/var/log/apt/* "$R"/var/cache/debconf/*-old \
         "$R"/usr/lib/udev/hwdb.bin "$R"/usr/lib/udev/hwdb.d/*.hwdb
  find "$R/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'en*' ! -name locale.alias -exec rm -rf {} +
  log "$alias: rootfs size $(du -sh "$R" | cut -f1)"

  local M="$CACHE/$alias.meta.tmp"
  rm -rf "$M"; mkdir -p "$M/templates"
  printf '%s\n' "architecture: x86_64" "creation_date: $(date +%s)" "properties:" \
    "  description: Debian bookworm ($alias, built locally with $BOOTSTRAP)" "  os: debian" \
    "  release: bookworm" "  architecture: amd64" "  variant: $alias" "templates:" \
    "  /etc/hostname:" "    when: [create, copy]" "    template: hostname.tpl" \
    "  /etc/hosts:" "    when: [create, copy]" "    template: hosts.tpl" > "$M/metadata.yaml"
  printf '{{ instance.name }}\n' > "$M/templates/hostname.tpl"
  printf '127.0.0.1 localhost\n127.0.1.1 {{ instance.name }}\n::1 localhost ip6-localhost ip6-loopback\n' > "$M/templates/hosts.tpl"

  tar -C "$M" -cJf "$meta_tar.tmp" metadata.yaml templates
  tar -C "$R" --numeric-owner --xattrs --xattrs-include='*' -cf - . | zstd -T0 -q -f -o "$rootfs_tar.tmp"
  mv -f "$meta_tar.tmp" "$meta_tar"; mv -f "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$R" "$M"
  log "$alias: image tarballs $(du -h "$rootfs_tar" | cut -f1)"
}

ensure_image() {
  local alias=$1 rootfs_tar="$CACHE/$1.rootfs.tar.zst" meta_tar="$CACHE/$1.meta.tar.xz"
  if [ "$IMAGE_REBUILD" = 1 ] || ! incus image show "$alias" >/dev/null 2>&1; then
    if [ "$IMAGE_REBUILD" = 1 ] || [ ! -s "$rootfs_tar" ] || [ ! -s "$meta_tar" ]; then
      build_image "$alias"
    else
      log "$alias: reusing cached tarballs in $CACHE"
    fi
    local old_fp fp
    old_fp=$(incus image list -f csv -c lF | awk -F, -v a="$alias" '$1==a{print $2}')
    incus image alias delete "$alias" >/dev/null 2>&1 || true
    log "$alias: incus image import"
    fp=$(cat "$meta_tar" "$rootfs_tar" | sha256sum | cut -d' ' -f1)   # = Incus' fingerprint
    incus image import "$meta_tar" "$rootfs_tar" --alias "$alias" >/dev/null 2>&1 \
      || incus image alias create "$alias" "$fp" \
      || die "image import of $alias failed"
    if [ -n "$old_fp" ] && [ "$old_fp" != "$fp" ]; then incus image delete "$old_fp" || true; fi
  fi
}

for alias in $IMAGES; do ensure_image "$alias"; done

# ---------------------------------------------------------------------------------------------
# 5. Smoke test: launch, wait for systemd + DHCP, exec with stdin, delete.
# ---------------------------------------------------------------------------------------------
if [ "$SMOKE" = 1 ]; then
  first=${IMAGES%% *}
  c="isx-setup-smoke-$$"
  incus launch "$first" "$c" --ephemeral >/dev/null
  st=""
  for _ in $(seq 200); do   # <= ~20 s; normally < 1 s
    st=$(incus exec "$c" -- systemctl is-system-running --wait 2>/dev/null || true)
    case "$st" in running|degraded) break;; esac; sleep 0.1
  done
  ip4=""
  for _ in $(seq 100); do ip4=$(incus list "$c" -c4 -f csv | cut -d' ' -f1); [ -n "$ip4" ] && break; sleep 0.1; done
  out=$(echo smoke-ok | incus exec "$c" -- cat)
  incus delete -f "$c" >/dev/null
  [ "$out" = smoke-ok ] || die "smoke test: exec/stdin failed"
  [ "$st" = running ] || log "WARNING: smoke test: systemd state '$st'"
  [ -n "$ip4" ] || log "WARNING: smoke test: container got no IPv4 on $BRIDGE"
  log "smoke test ok (systemd=$st ipv4=${ip4:-none})"
fi

log "done: incus $(incus version | awk '/Server/{print $3}'), pool default=$(incus storage list -f csv | awk -F, '$1=="default"{print $2}'), images: $IMAGES"
