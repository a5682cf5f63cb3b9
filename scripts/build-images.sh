#!/usr/bin/env bash
# Builds the test images without network access, as OCI image layouts, and pushes them
# to the local registry (which must be running: registry.sh start).
#   pause   <registry>/kubelet-ts/pause:3.9       static scripts/pause.c
#   busybox <registry>/kubelet-ts/busybox:1.36    busybox-static + applet links
#           <registry>/kubelet-ts/busybox:latest  (same manifest)
# Idempotent: a layout is rebuilt only when its inputs change, a tag is pushed only when
# the registry does not already serve that exact manifest. Layers are built with fixed
# timestamps and owners, so the same inputs give the same digests.
# Usage: build-images.sh [--force]
set -euo pipefail
KTS_SCRIPT_NAME=build-images.sh
# File modes in the layers come from the umask: fix it for stable digests.
umask 022
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGES_DIR=$KTS_NODE_DIR/images
BUSYBOX_BIN=${KTS_BUSYBOX_BIN:-/bin/busybox}
FORCE=0
[ "${1:-}" = --force ] && FORCE=1

OCI_MANIFEST=application/vnd.oci.image.manifest.v1+json
OCI_CONFIG=application/vnd.oci.image.config.v1+json
OCI_LAYER=application/vnd.oci.image.layer.v1.tar+gzip
OCI_INDEX=application/vnd.oci.image.index.v1+json
EPOCH=1970-01-01T00:00:00Z
IMAGE_PATH_ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

oci_arch() {
  case "$(dpkg --print-architecture 2>/dev/null || uname -m)" in
    amd64 | x86_64) echo amd64 ;;
    arm64 | aarch64) echo arm64 ;;
    ppc64el | ppc64le) echo ppc64le ;;
    s390x) echo s390x ;;
    *) kts_die "unsupported architecture $(uname -m)" ;;
  esac
}
ARCH=$(oci_arch)

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# add_blob LAYOUT FILE: stores FILE under blobs/sha256 and prints its hex digest.
add_blob() {
  local layout=$1 file=$2 hex
  hex=$(sha256_of "$file")
  mkdir -p "$layout/blobs/sha256"
  cp "$file" "$layout/blobs/sha256/$hex"
  echo "$hex"
}

# json_array A B ...: prints ["A","B"] (arguments must not need escaping).
json_array() {
  local out="" s
  for s in "$@"; do out+="${out:+,}\"$s\""; done
  printf '[%s]' "$out"
}

# make_layout LAYOUT ROOTFS CONFIG_FRAGMENT TAG...: one-layer image from ROOTFS;
# CONFIG_FRAGMENT is the JSON of the image config's "config" object.
make_layout() {
  local layout=$1 rootfs=$2 cfg=$3 work layer_tar diff_id layer_hex layer_size
  local config_hex config_size manifest_hex manifest_size tag entries=""
  shift 3
  work=$(mktemp -d "$IMAGES_DIR/.work.XXXXXX")
  rm -rf "$layout.new"
  mkdir -p "$layout.new"

  layer_tar=$work/layer.tar
  # Fixed order, owners and times: identical inputs give an identical layer digest.
  (cd "$rootfs" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    --format=gnu -cf "$layer_tar" -- *)
  diff_id=$(sha256_of "$layer_tar")
  gzip -n -9 "$layer_tar"
  layer_hex=$(add_blob "$layout.new" "$layer_tar.gz")
  layer_size=$(stat -c %s "$layer_tar.gz")

  printf '{"created":"%s","architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"kubelet-ts scripts/build-images.sh"}]}' \
    "$EPOCH" "$ARCH" "$cfg" "$diff_id" "$EPOCH" >"$work/config.json"
  config_hex=$(add_blob "$layout.new" "$work/config.json")
  config_size=$(stat -c %s "$work/config.json")

  printf '{"schemaVersion":2,"mediaType":"%s","config":{"mediaType":"%s","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"%s","digest":"sha256:%s","size":%s}]}' \
    "$OCI_MANIFEST" "$OCI_CONFIG" "$config_hex" "$config_size" "$OCI_LAYER" "$layer_hex" "$layer_size" >"$work/manifest.json"
  manifest_hex=$(add_blob "$layout.new" "$work/manifest.json")
  manifest_size=$(stat -c %s "$work/manifest.json")

  for tag in "$@"; do
    entries+="${entries:+,}$(printf '{"mediaType":"%s","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"},"platform":{"architecture":"%s","os":"linux"}}' \
      "$OCI_MANIFEST" "$manifest_hex" "$manifest_size" "$tag" "$ARCH")"
  done
  printf '{"schemaVersion":2,"mediaType":"%s","manifests":[%s]}' "$OCI_INDEX" "$entries" >"$layout.new/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout.new/oci-layout"
  echo "sha256:$manifest_hex" >"$layout.new/manifest-digest"

  rm -rf "$work" "$layout"
  mv "$layout.new" "$layout"
}

# inputs_stamp FILE...: a fingerprint of what an image is built from (this script too).
inputs_stamp() {
  { sha256sum "${BASH_SOURCE[0]}" "$@" | cut -d' ' -f1; echo "$ARCH"; } | sha256sum | cut -d' ' -f1
}

# layout_current LAYOUT STAMP: true when LAYOUT was built from exactly these inputs.
layout_current() {
  [ "$FORCE" = 0 ] && [ -f "$1/index.json" ] && [ -f "$1/manifest-digest" ] &&
    [ "$(cat "$1/inputs-stamp" 2>/dev/null)" = "$2" ]
}

build_pause() {
  local layout=$IMAGES_DIR/pause stamp rootfs
  stamp=$(inputs_stamp "$KTS_SCRIPTS_DIR/pause.c")
  layout_current "$layout" "$stamp" && return 0
  command -v gcc >/dev/null || kts_die "gcc not found (install gcc and libc6-dev)"
  rootfs=$(mktemp -d "$IMAGES_DIR/.rootfs.XXXXXX")
  gcc -static -O2 -s -Wall -o "$rootfs/pause" "$KTS_SCRIPTS_DIR/pause.c" ||
    kts_die "compiling scripts/pause.c failed (a static build needs libc6-dev)"
  chmod 0755 "$rootfs/pause"
  # Upstream's pause image runs as 65535:65535 with /pause as entrypoint.
  make_layout "$layout" "$rootfs" \
    "{\"User\":\"65535:65535\",\"Env\":[\"$IMAGE_PATH_ENV\"],\"Entrypoint\":[\"/pause\"]}" 3.9
  echo "$stamp" >"$layout/inputs-stamp"
  rm -rf "$rootfs"
  kts_log "built pause image layout $(cat "$layout/manifest-digest")"
}

build_busybox() {
  local layout=$IMAGES_DIR/busybox stamp rootfs applet dir up
  [ -x "$BUSYBOX_BIN" ] || kts_die "$BUSYBOX_BIN not found (install busybox-static)"
  # Needs a static busybox: the image has no libc.
  if ! file_is_static "$BUSYBOX_BIN"; then
    kts_die "$BUSYBOX_BIN is dynamically linked (install busybox-static, not busybox)"
  fi
  stamp=$(inputs_stamp "$BUSYBOX_BIN")
  layout_current "$layout" "$stamp" && return 0
  rootfs=$(mktemp -d "$IMAGES_DIR/.rootfs.XXXXXX")
  mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,var,proc,sys,dev,tmp}
  chmod 1777 "$rootfs/tmp"
  chmod 0700 "$rootfs/root"
  install -m 0755 "$BUSYBOX_BIN" "$rootfs/bin/busybox"
  # --list-full names each applet with its usual directory (bin/sh, usr/bin/awk, ...).
  while read -r applet; do
    [ -n "$applet" ] || continue
    dir=$(dirname "$applet")
    case "$dir" in
      .) up=bin/busybox ;;
      bin) up=busybox ;;
      sbin) up=../bin/busybox ;;
      *) up=../../bin/busybox ;;
    esac
    [ -e "$rootfs/$applet" ] || ln -s "$up" "$rootfs/$applet"
  done < <("$BUSYBOX_BIN" --list-full)
  [ -e "$rootfs/bin/sh" ] || kts_die "busybox has no sh applet"
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'daemon:x:1:1:daemon:/usr/sbin:/bin/false' \
    'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$rootfs/etc/passwd"
  printf '%s\n' 'root:x:0:' 'daemon:x:1:' 'tty:x:5:' 'nogroup:x:65534:' >"$rootfs/etc/group"
  make_layout "$layout" "$rootfs" "{\"Env\":[\"$IMAGE_PATH_ENV\"],\"Cmd\":[\"sh\"]}" 1.36 latest
  echo "$stamp" >"$layout/inputs-stamp"
  rm -rf "$rootfs"
  kts_log "built busybox image layout $(cat "$layout/manifest-digest")"
}

# file_is_static BIN: no ELF interpreter means statically linked (no `file` needed).
file_is_static() {
  ! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter' &&
    LC_ALL=C readelf -h "$1" >/dev/null 2>&1
}

# registry_digest REPO TAG: the manifest digest the registry serves for REPO:TAG, if any.
registry_digest() {
  kts_http_get "$KTS_REGISTRY" "/v2/$1/manifests/$2" "$OCI_MANIFEST" 2>/dev/null |
    tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" {print $2; exit}' || true
}

# push LAYOUT REPO TAG: copies LAYOUT:TAG to the registry unless already there.
push() {
  local layout=$1 repo=$2 tag=$3 want have
  want=$(cat "$layout/manifest-digest")
  have=$(registry_digest "$repo" "$tag")
  if [ "$have" = "$want" ]; then
    return 0
  fi
  command -v skopeo >/dev/null || kts_die "skopeo not found (install the skopeo package)"
  # --insecure-policy: no dependency on /etc/containers/policy.json for a local push.
  skopeo --insecure-policy copy --quiet --preserve-digests --dest-tls-verify=false \
    "oci:$layout:$tag" "docker://$KTS_REGISTRY/$repo:$tag" ||
    kts_die "pushing $repo:$tag to $KTS_REGISTRY failed"
  have=$(registry_digest "$repo" "$tag")
  [ "$have" = "$want" ] || kts_die "registry serves $repo:$tag as '$have', expected $want"
  kts_log "pushed $KTS_REGISTRY/$repo:$tag ($want)"
}

main() {
  [ "$(kts_http_status "$KTS_REGISTRY" /v2/)" = 200 ] ||
    kts_die "no registry answers on $KTS_REGISTRY (run scripts/registry.sh start first)"
  kts_lock images
  mkdir -p "$IMAGES_DIR"
  rm -rf "$IMAGES_DIR"/.work.* "$IMAGES_DIR"/.rootfs.*
  build_pause
  build_busybox
  push "$IMAGES_DIR/pause" kubelet-ts/pause 3.9
  push "$IMAGES_DIR/busybox" kubelet-ts/busybox 1.36
  push "$IMAGES_DIR/busybox" kubelet-ts/busybox latest
}

main
