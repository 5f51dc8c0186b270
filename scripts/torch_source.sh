#!/usr/bin/env bash
# Which torch build bootstrap.sh installs, and from where: prints the installer's arguments, one per
# line, on stdout, and why, in one line, on stderr.
#   - TORCH_SPEC set: exactly that (e.g. TORCH_SPEC='torch==2.13.0+cu128 --index-url ...').
#   - Installing with uv (MATRIX_BENCH_INSTALLER=uv) and PyTorch's index answers: uv's own
#     choice of build for this machine (`--torch-backend auto`: the CUDA build its driver
#     runs, else the CPU-only one).
#   - An NVIDIA GPU here: torch from the package index, which serves the CUDA build.
#   - No GPU: the CPU-only build from PyTorch's CPU index (0.75 GB installed, against the CUDA
#     build's 5.4 GB with its nvidia-* wheels); where that index cannot be reached, the
#     package index's build, said so.
# For tests: MATRIX_BENCH_GPU=yes|no stands for the detection, and
# MATRIX_BENCH_TORCH_CPU_INDEX for PyTorch's CPU index.
set -euo pipefail

TORCH_VERSION="2.13.0"
CPU_INDEX="${MATRIX_BENCH_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
# where pip finds everything else: the machine's own setting, else PyPI
PACKAGE_INDEX="${PIP_INDEX_URL:-$("${PYTHON:-python3}" -m pip config get global.index-url \
    2>/dev/null || echo https://pypi.org/simple)}"

if [[ -n "${TORCH_SPEC:-}" ]]; then
    echo "torch: TORCH_SPEC=${TORCH_SPEC}, as given" >&2
    read -r -a given <<< "$TORCH_SPEC"  # a spec and pip options, split on spaces only
    printf '%s\n' "${given[@]}"
    exit 0
fi

has_gpu() {
    case "${MATRIX_BENCH_GPU:-}" in
        yes) return 0 ;;
        no) return 1 ;;
    esac
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        return 0
    fi
    [[ -d /proc/driver/nvidia/gpus ]] && [[ -n "$(ls -A /proc/driver/nvidia/gpus 2>/dev/null)" ]]
}

reachable() {  # the index answers a request for torch's page within 8 s
    "${PYTHON:-python3}" - "$1" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=8).read(1)
EOF
}

if [[ "${MATRIX_BENCH_INSTALLER:-pip}" == uv ]] && reachable "$CPU_INDEX"; then
    echo "torch: uv chooses the build of torch==${TORCH_VERSION} for this machine's GPU and" \
         "driver, or the CPU-only one, from PyTorch's index (--torch-backend auto)" >&2
    printf '%s\n' "torch==${TORCH_VERSION}" --torch-backend auto
elif has_gpu; then
    echo "torch: an NVIDIA GPU is here: torch==${TORCH_VERSION} from the package index, the" \
         "CUDA build (about 5.4 GB with its nvidia-* wheels)" >&2
    echo "torch==${TORCH_VERSION}"
elif reachable "$CPU_INDEX"; then
    echo "torch: no NVIDIA GPU here: the CPU-only build of torch==${TORCH_VERSION} from" \
         "${CPU_INDEX} (a 0.2 GB download, 0.75 GB installed)" >&2
    printf '%s\n' "torch==${TORCH_VERSION}" --index-url "$CPU_INDEX" \
        --extra-index-url "$PACKAGE_INDEX"
else
    echo "torch: no NVIDIA GPU here, but PyTorch's CPU index (${CPU_INDEX}) cannot be" \
         "reached: torch==${TORCH_VERSION} from the package index instead, which may be the" \
         "CUDA build (about 5.4 GB); set TORCH_SPEC to choose" >&2
    echo "torch==${TORCH_VERSION}"
fi
