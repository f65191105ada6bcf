#!/bin/sh
# Installs Outpost: the binaries, its systemd unit, a default config, the manifest and
# state directories. Idempotent: run it again to upgrade. An edited config is never
# overwritten (the new default goes beside it as outpost.yaml.new).
#
#   install.sh [--root DIR] [--binary PATH] [--enable]
#
#   --root DIR     install below DIR instead of / (a package build or a test)
#   --binary PATH  the outpost binary (default: bin/outpost beside this script, as in a
#                  release tarball, else target/release/outpost of this checkout); the
#                  container logger, outpost-container-log, is taken from beside it
#   --enable       then run `systemctl daemon-reload` and `systemctl enable --now outpost`
#                  (only with --root /)
#
# outpost.service, outpost.yaml and manifests/ are read beside this script: deploy/ in
# a checkout, the top directory of a release tarball (cargo xtask dist).
set -eu

usage() {
    sed -n '5,13s/^# \{0,1\}//p' "$0"
}

die() {
    echo "install.sh: $*" >&2
    exit 1
}

deploy=$(cd "$(dirname "$0")" && pwd)
root=/
if [ -e "$deploy/bin/outpost" ]; then
    binary="$deploy/bin/outpost"
else
    binary="${CARGO_TARGET_DIR:-$deploy/../target}/release/outpost"
fi
enable=no

while [ $# -gt 0 ]; do
    case "$1" in
        --root) [ $# -ge 2 ] || die "--root needs a directory"; root=$2; shift 2 ;;
        --root=*) root=${1#--root=}; shift ;;
        --binary) [ $# -ge 2 ] || die "--binary needs a path"; binary=$2; shift 2 ;;
        --binary=*) binary=${1#--binary=}; shift ;;
        --enable) enable=yes; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

[ -d "$root" ] || die "--root $root is not a directory; create it first"
root=$(cd "$root" && pwd)
[ -f "$binary" ] && [ -x "$binary" ] ||
    die "no outpost binary at $binary; build it (cargo build --release) or pass --binary PATH"
if [ "$enable" = yes ] && [ "$root" != / ]; then
    die "--enable runs systemctl on this host: it needs --root / (not $root)"
fi
# Below /, paths are "$root/etc/...": avoid a leading "//".
[ "$root" = / ] && root=

owned_by_root() {
    if [ "$(id -u)" = 0 ]; then chown 0:0 "$@"; fi
}

# A directory with exactly this mode, root-owned.
directory() {
    mkdir -p "$2"
    chmod "$1" "$2"
    owned_by_root "$2"
}

# Copies to a temporary name beside the target, then renames: a running binary or a
# reader of the config never sees half a file.
file() {
    tmp="$3.install-tmp"
    cp "$2" "$tmp"
    chmod "$1" "$tmp"
    owned_by_root "$tmp"
    mv -f "$tmp" "$3"
}

sha256() {
    sha256sum <"$1" | cut -d' ' -f1
}

directory 0755 "$root/usr/local/bin"
directory 0755 "$root/etc/systemd/system"
directory 0755 "$root/etc/outpost"
# Whoever can write a manifest runs a privileged pod: root only.
directory 0755 "$root/etc/outpost/manifests"
directory 0700 "$root/var/lib/outpost"
directory 0700 "$root/var/lib/outpost/images"

file 0755 "$binary" "$root/usr/local/bin/outpost"
echo "installed $root/usr/local/bin/outpost"
# The logger containerd's shims run for each container; the agent finds it beside itself
# (without it, containers log through `outpost container-log`, at a higher memory cost).
logger="$(dirname "$binary")/outpost-container-log"
if [ -f "$logger" ] && [ -x "$logger" ]; then
    file 0755 "$logger" "$root/usr/local/bin/outpost-container-log"
    echo "installed $root/usr/local/bin/outpost-container-log"
else
    echo "no outpost-container-log beside $binary: containers will log through 'outpost container-log' (about 1.4 MiB more memory each); build it with cargo build --release" >&2
fi
file 0644 "$deploy/outpost.service" "$root/etc/systemd/system/outpost.service"
echo "installed $root/etc/systemd/system/outpost.service"
# The state key, which seals the API pods' Secrets at rest: made once on this host (it is
# sealed to this host's TPM2 or key, so not for another root).
directory 0755 "$root/usr/local/sbin"
file 0755 "$deploy/outpost-state-key" "$root/usr/local/sbin/outpost-state-key"
if [ -z "$root" ]; then
    "$root/usr/local/sbin/outpost-state-key" ||
        echo "no state key: the API pods' Secrets stay unencrypted at rest (mode 0600)" >&2
else
    echo "run outpost-state-key on the box itself to make its state key"
fi

# The config: replaced only while it is what this script installed last time.
config="$root/etc/outpost/outpost.yaml"
record="$root/etc/outpost/.outpost.yaml.installed-sha256"
default_sum=$(sha256 "$deploy/outpost.yaml")
installed_sum=$(cat "$record" 2>/dev/null || true)
if [ ! -e "$config" ] ||
    [ "$(sha256 "$config")" = "$installed_sum" ] ||
    [ "$(sha256 "$config")" = "$default_sum" ]; then
    file 0644 "$deploy/outpost.yaml" "$config"
    printf '%s\n' "$default_sum" >"$record.install-tmp"
    chmod 0644 "$record.install-tmp"
    owned_by_root "$record.install-tmp"
    mv -f "$record.install-tmp" "$record"
    rm -f "$config.new"
    echo "installed $config"
else
    file 0644 "$deploy/outpost.yaml" "$config.new"
    echo "kept $config: it was edited; the new default is $config.new (merge it by hand)"
fi

# Example pods, only into an empty manifest directory.
manifests="$root/etc/outpost/manifests"
if [ -z "$(ls -A "$manifests")" ]; then
    for manifest in "$deploy"/manifests/*.yaml; do
        [ -e "$manifest" ] || continue
        file 0644 "$manifest" "$manifests/$(basename "$manifest")"
    done
    echo "installed the example pods in $manifests (delete them to run none)"
fi

if [ "$enable" = yes ]; then
    systemctl daemon-reload
    systemctl enable --now outpost
    echo "outpost is enabled and started: journalctl -u outpost -f"
else
    cat <<NEXT
next steps:
  review $config (node name, containerd, kubeconfig)
  systemctl daemon-reload && systemctl enable --now outpost
NEXT
fi
