#!/usr/bin/env bash
# Install matrix-bench into ./.venv: Python 3.11 or 3.12, PyTorch, the tool itself.
#   bash scripts/bootstrap.sh          # to run matrices
#   bash scripts/bootstrap.sh --dev    # also the test tools and a Docker engine
# Idempotent: a second run only checks. Set TORCH_SPEC to choose another torch build.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="torch"
[[ "${1:-}" == "--dev" ]] && extras="torch,nlp,tf,jax,cloud,dev"  # the tests run every workload and probe

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

find_python() {
    for candidate in python3.11 python3.12 python3; do
        if command -v "$candidate" >/dev/null &&
           "$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))'; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

if ! python=$(find_python); then
    echo "bootstrap: installing Python 3.11 from the distribution" >&2
    as_root apt-get update -qq && as_root apt-get install -y -qq python3.11 python3.11-venv
    python=$(find_python) || { echo "bootstrap: need Python 3.11 or 3.12" >&2; exit 1; }
fi

if [[ ! -x .venv/bin/python ]]; then
    if ! "$python" -m venv .venv 2>/dev/null; then  # Debian/Ubuntu ship venv separately
        rm -rf .venv
        version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        as_root apt-get update -qq && as_root apt-get install -y -qq "python${version}-venv"
        "$python" -m venv .venv
    fi
fi

# torch.compile on a CPU builds C++ against Python's headers; the tests run rnn_micro's
# `compiled` cells, which are `unsupported` without them.
if [[ "${1:-}" == "--dev" ]]; then
    needed=()
    command -v g++ >/dev/null || command -v c++ >/dev/null || needed+=(g++)
    .venv/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
        needed+=("python$(.venv/bin/python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-dev")
    if (( ${#needed[@]} )); then
        echo "bootstrap: installing ${needed[*]} from the distribution (for torch.compile)" >&2
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${needed[@]}" >/dev/null
    fi
fi

pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
# torch first and pinned: the project's range then installs nothing more.
"${pip[@]}" install "${TORCH_SPEC:-torch==2.13.0}"
"${pip[@]}" install -e ".[${extras}]"
# The tests run stack images on a real engine: make sure one answers.
[[ "${1:-}" == "--dev" ]] && bash scripts/docker_engine.sh
echo "bootstrap: ready ($(.venv/bin/python --version), $(.venv/bin/matrix --help >/dev/null && echo matrix ok))"
