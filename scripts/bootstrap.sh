#!/usr/bin/env bash
# Install matrix-bench into ./.venv: Python 3.11 or 3.12, PyTorch, the tool itself.
#   bash scripts/bootstrap.sh          # to run matrices
#   bash scripts/bootstrap.sh --dev    # also the test tools and a Docker engine
# Idempotent: a second run only checks. The torch build follows the machine (the CUDA
# build with an NVIDIA GPU, else the CPU-only one: scripts/torch_source.sh); set TORCH_SPEC
# to choose another. Each step says what it installs; the last line, how long it all took.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step() { echo "bootstrap [$((SECONDS - started)) s]: $*"; }

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
    step "installing Python 3.11 from the distribution (apt)"
    as_root apt-get update -qq && as_root apt-get install -y -qq python3.11 python3.11-venv
    python=$(find_python) || { echo "bootstrap: need Python 3.11 or 3.12" >&2; exit 1; }
fi

if [[ ! -x .venv/bin/python ]]; then
    step "making the virtual environment .venv with $("$python" --version)"
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
    command -v git >/dev/null || needed+=(git)  # the tests of your own code's ids make work trees
    .venv/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
        needed+=("python$(.venv/bin/python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-dev")
    if (( ${#needed[@]} )); then
        step "installing ${needed[*]} from the distribution (apt; for torch.compile and git)"
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${needed[@]}" >/dev/null
    fi
fi

# Installs go through uv (about 7x faster than pip from an empty cache: docs/PERFORMANCE.md),
# handed pip's settings on this machine (mirror, wheel folders, constraints:
# scripts/uv_settings.py); through pip where uv cannot be had. MATRIX_BENCH_INSTALLER=pip
# chooses pip.
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
installer=${MATRIX_BENCH_INSTALLER:-uv}
if [[ "$installer" == uv ]]; then
    step "installing uv (the installer) with pip"
    if ! "${pip[@]}" install "uv>=0.9" || ! .venv/bin/uv --version >/dev/null; then
        step "uv cannot be had here: installing with pip instead"
        installer=pip
    fi
fi
uv_args=()
if [[ "$installer" == uv ]]; then
    while IFS= read -r line; do
        if [[ "$line" =~ ^(SSL_CERT_FILE|UV_HTTP_TIMEOUT)=(.*)$ ]]; then
            export "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}"
        elif [[ -n "$line" ]]; then
            uv_args+=("$line")
        fi
    done < <(.venv/bin/python scripts/uv_settings.py)
else
    step "upgrading pip"
    "${pip[@]}" install --upgrade pip
fi
install() {
    if [[ "$installer" == uv ]]; then
        .venv/bin/uv pip install -q --python .venv/bin/python "${uv_args[@]}" "$@"
    else
        "${pip[@]}" install "$@"
    fi
}
# torch first and pinned: the project's range then installs nothing more.
why=$(mktemp)
mapfile -t torch_args < <(PYTHON=.venv/bin/python MATRIX_BENCH_INSTALLER=$installer \
    bash scripts/torch_source.sh 2>"$why")
step "$(cat "$why")"
rm -f "$why"
(( ${#torch_args[@]} )) || { echo "bootstrap: scripts/torch_source.sh chose nothing" >&2; exit 1; }
install "${torch_args[@]}"
# numpy comes with the project, after torch: torch warns on import that it cannot find it
step "installed $(.venv/bin/python -W ignore::UserWarning -c 'import torch; print(
    f"torch {torch.__version__}" + (
    f" (CUDA {torch.version.cuda})" if torch.version.cuda else " (CPU only)"))')"
if [[ "${1:-}" == "--dev" ]]; then
    step "installing matrix-bench with the extras ${extras} with ${installer}: the frameworks" \
         "the tests run (TensorFlow, JAX, transformers), boto3, moto, psycopg, pytest, ruff," \
         "mypy; about 2 GB"
else
    step "installing matrix-bench and its dependencies with ${installer} (Ray, pandas," \
         "pyarrow, Docker SDK, matplotlib; about 0.8 GB)"
fi
install -e ".[${extras}]"
# The tests run stack images on a real engine: make sure one answers.
if [[ "${1:-}" == "--dev" ]]; then
    step "checking for a Docker engine (the tests build and run stack images)"
    bash scripts/docker_engine.sh
    step "checking for Slurm, munge, MariaDB, PostgreSQL and Chromium (the Slurm, results-store and page tests start their own)"
    bash scripts/test_services.sh
fi
step "ready: $(.venv/bin/python --version), $(.venv/bin/matrix --help >/dev/null && echo matrix ok)," \
     ".venv $(du -sh .venv 2>/dev/null | cut -f1), $((SECONDS - started)) s in all"
