#!/usr/bin/env bash
# Make sure a Docker engine answers, for stack images and the Docker tests.
#   bash scripts/docker_engine.sh
# Where one already answers (Docker Desktop, a system service), it does nothing. Otherwise,
# on Debian/Ubuntu, it installs docker.io, debootstrap (the tests build their base image
# with it: no registry is needed) and docker-registry (the push tests), then starts dockerd
# in the background with overlay2 and no iptables/bridge (containers run with --network
# none; builds use the host's network), logging to /tmp/matrix-bench-dockerd.log.
set -euo pipefail

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v docker-registry >/dev/null || missing+=(docker-registry)
if ((${#missing[@]})); then
    echo "docker_engine: installing ${missing[*]}" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
    echo "docker_engine: an engine answers"
    exit 0
fi
echo "docker_engine: starting dockerd" >&2
as_root bash -c 'nohup dockerd --storage-driver=overlay2 --iptables=false --bridge=none \
    >/tmp/matrix-bench-dockerd.log 2>&1 &'
for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && { echo "docker_engine: an engine answers"; exit 0; }
    sleep 1
done
echo "docker_engine: dockerd did not answer in 60 s; see /tmp/matrix-bench-dockerd.log" >&2
exit 1
