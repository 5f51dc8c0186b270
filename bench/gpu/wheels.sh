#!/usr/bin/env bash
# Gather, where a package index answers, exactly the wheels a GPU node lacks for the GPU
# check (bench/gpu/check.sh): what needs.txt names, with its dependencies, resolved for
# Linux x86-64 and the node's CPython, less every dependency node-packages.txt says the
# node already has (what needs.txt names is always carried). A few MB; carry the folder.
#   bash bench/gpu/wheels.sh DIR [--python 3.12]
# pip answers from its configured index; PIP_NO_INDEX=1 with PIP_FIND_LINKS=FOLDER takes
# the wheels from a folder instead (the CPU test does, offline).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { echo "usage: bash bench/gpu/wheels.sh DIR [--python 3.12]" >&2; exit 2; }

dir="" python_version=3.12
while (( $# )); do
    case "$1" in
        --python) (( $# >= 2 )) || usage; python_version=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "wheels.sh: unknown option $1" >&2; usage ;;
        *) [[ -z "$dir" ]] || usage; dir=$1; shift ;;
    esac
done
[[ -n "$dir" ]] || usage
[[ "$python_version" =~ ^3\.[0-9]+$ ]] || { echo "wheels.sh: --python takes X.Y, not $python_version" >&2; exit 2; }

platforms=()
for minor in 17 24 27 28 31 34 35 39; do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64)

resolved=$(mktemp -d)
trap 'rm -rf "$resolved"' EXIT
echo "wheels.sh: resolving $(grep -v '^#' "$here/needs.txt" | xargs) for CPython $python_version, Linux x86-64"
"${PIP_PYTHON:-python3}" -m pip download --quiet --disable-pip-version-check \
    --only-binary=:all: --implementation cp --python-version "$python_version" "${platforms[@]}" \
    --dest "$resolved" -r "$here/needs.txt"

mkdir -p "$dir"
has=$(grep -v '^#' "$here/node-packages.txt")
# what needs.txt names itself is carried even where the node has a copy: its floor may be
# above the node's (typing_extensions for pydantic_core), and the carried one comes first
named=$(grep -v '^#' "$here/needs.txt" | sed -E 's/[<>=!~; ].*//' | tr 'A-Z_.' 'a-z--')
kept=()
for wheel in "$resolved"/*.whl; do
    file=$(basename "$wheel")
    name=$(echo "${file%%-*}" | tr 'A-Z_.' 'a-z--')
    if grep -qx "$name" <<<"$named" || ! grep -qx "$name" <<<"$has"; then
        cp "$wheel" "$dir/"
        kept+=("$file")
    fi
done
(( ${#kept[@]} )) || { echo "wheels.sh: the node lacks nothing of needs.txt" >&2; exit 1; }
echo "wheels.sh: ${#kept[@]} wheels the node lacks, $(du -sh "$dir" | cut -f1) in $dir:"
printf '  %s\n' "${kept[@]}"
