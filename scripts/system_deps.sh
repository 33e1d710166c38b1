#!/usr/bin/env bash
# System packages the sandboxes need (bubblewrap, Docker engine, debootstrap). Needs root; skips what is present.
set -euo pipefail
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "missing system packages: ${need[*]} (run as root or install them)"; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
echo "system deps ok: $(command -v bwrap) $(command -v dockerd) $(command -v debootstrap)"
