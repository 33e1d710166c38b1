#!/usr/bin/env bash
# Make a Docker engine answer and the sandbox image exist, offline. Runs as root; safe to run again (idempotent).
#   1. `docker info` fails -> start `dockerd --storage-driver=vfs` in the background (log: /tmp/dockerd.log).
#   2. image propel-sandbox:py3 missing -> debootstrap a minimal Debian with python3 and `docker import` it.
set -euo pipefail
IMAGE="${PROPEL_SANDBOX_IMAGE:-propel-sandbox:py3}"
SUITE="${PROPEL_SANDBOX_SUITE:-bookworm}"

if ! docker info >/dev/null 2>&1; then
  if [ -n "${DOCKER_HOST:-}" ]; then echo "DOCKER_HOST=$DOCKER_HOST does not answer 'docker info'; start that engine" >&2; exit 1; fi
  if [ "$(id -u)" != 0 ]; then echo "no Docker engine answers and starting one needs root" >&2; exit 1; fi
  command -v dockerd >/dev/null || { echo "dockerd missing: run scripts/system_deps.sh" >&2; exit 1; }
  echo "starting dockerd (log: /tmp/dockerd.log)"
  # setsid: its own session, so the end of the shell or job group that started it does not take it down
  setsid nohup dockerd --storage-driver=vfs >/tmp/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see /tmp/dockerd.log" >&2; tail -20 /tmp/dockerd.log >&2; exit 1; }
fi

if docker image inspect "$IMAGE" >/dev/null 2>&1; then echo "docker engine ok; image $IMAGE present"; exit 0; fi

# The Debian mirror apt already uses here (deb822 sources or one-line sources.list), else the default.
MIRROR="$(grep -hoE '^URIs:[[:space:]]*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
          | grep -v security | head -1 || true)"
if [ -z "$MIRROR" ]; then
  MIRROR="$(grep -hE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | grep -i debian | grep -v security | awk '{print $2}' | head -1 || true)"
fi
MIRROR="${PROPEL_DEBIAN_MIRROR:-${MIRROR:-http://deb.debian.org/debian}}"
command -v debootstrap >/dev/null || { echo "debootstrap missing: run scripts/system_deps.sh" >&2; exit 1; }
ROOTFS="$(mktemp -d /tmp/propel-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "building $IMAGE: debootstrap $SUITE from $MIRROR (about a minute)"
debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/propel-debootstrap.log 2>&1 \
  || { echo "debootstrap failed; see /tmp/propel-debootstrap.log" >&2; tail -20 /tmp/propel-debootstrap.log >&2; exit 1; }
# Docs, man pages and translations are a third of the image; with the vfs driver every container copies it all.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/* "$ROOTFS"/usr/share/info/*
chmod 755 "$ROOTFS"  # mktemp made it 0700; the image's / must be traversable by unprivileged users
tar -C "$ROOTFS" -c . | docker import - "$IMAGE" >/dev/null
echo "docker engine ok; image $IMAGE built"
