#!/usr/bin/env bash
# The GPU check: every workload on one GPU of a bare, offline node (no network, Docker or
# Ray; one Python with a CUDA build of torch), in under 5 minutes by its own estimate
# (printed first), in phases, most important first, judging its own figures.
#   bash bench/gpu/wheels.sh WHEELS --python 3.12   # where an index answers: a few MB
#   bash bench/gpu/check.sh WHEELS OUT               # on the node
#   bash bench/gpu/check.sh --cpu WHEELS OUT         # the same at tiny sizes on the CPU (CI)
# The wheels install offline into a temporary folder, never into the node's environment;
# the project runs from this checkout (PYTHONPATH). OUT receives six files: the journal
# (results.jsonl), results.parquet, report.html, summary.json (each claim held or not, with
# its figures), nvidia-smi.txt and check.log (which ends with the claims and the log tail of
# every cell that did not end ok). Cells the budget left no time for are named as not
# reached, apart from the claims (the budget's, not the product's). Exit 0 when every claim
# held and every cell ran, 3 when every claim held of what ran but some cells were not
# reached, 1 when a claim did not hold, 2 on bad input or a module that cannot be imported
# (one line, before any cell). PYTHON names the interpreter (default python3).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
usage() { echo "usage: bash bench/gpu/check.sh [--cpu] WHEELS OUT" >&2; exit 2; }

mode=gpu args=()
for arg in "$@"; do
    case "$arg" in
        --cpu) mode=cpu ;;
        -h|--help) usage ;;
        -*) echo "check.sh: unknown option $arg" >&2; usage ;;
        *) args+=("$arg") ;;
    esac
done
(( ${#args[@]} == 2 )) || usage
wheels=${args[0]} out=${args[1]}
compgen -G "$wheels/*.whl" >/dev/null ||
    { echo "check.sh: no wheels in $wheels (make them with bench/gpu/wheels.sh)" >&2; exit 2; }
mkdir -p "$out" || { echo "check.sh: cannot make $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$out/check.log"
: >"$log"
started=$SECONDS
say() { echo "check [$((SECONDS - started)) s]: $*" | tee -a "$log"; }

say "mode $mode; $("$python" --version 2>&1) at $(command -v "$python"); repository $repo"
say "installing $(ls "$wheels"/*.whl | wc -l) wheels offline into a temporary folder"
if ! "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
        --no-compile --target "$work/site" "$wheels"/*.whl >>"$log" 2>&1; then
    say "the offline install failed (its output is above in $log)"; exit 2
fi
export PYTHONPATH="$work/site:$repo${PYTHONPATH:+:$PYTHONPATH}"
# Offline and headless: nothing may reach for a network, a display or a usage server.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg RAY_USAGE_STATS_ENABLED=0
export MPLCONFIGDIR="$work/mpl"

"$python" "$repo/bench/gpu/probes.py" imports --mode "$mode" 2>&1 | tee -a "$log"
(( PIPESTATUS[0] == 0 )) || exit 2  # its one line says what is missing
if [[ $mode == gpu ]]; then
    nvidia-smi -q >"$out/nvidia-smi.txt" 2>&1 || say "nvidia-smi -q failed (see nvidia-smi.txt)"
else
    echo "no GPU: the check ran with --cpu" >"$out/nvidia-smi.txt"
fi
say "timing probe: a block of steps by the harness's clock against CUDA events"
"$python" "$repo/bench/gpu/probes.py" timing --mode "$mode" "$work/timing.json" 2>&1 | tee -a "$log"

matrix="$repo/bench/gpu/$mode.yaml"  # gpu.yaml or cpu.yaml
# The whole check's budget: a device command may run 600 s and the session's device time is
# 15 minutes, its start included. MATRIX_BENCH_CHECK_BUDGET_S sets a shared CPU machine's.
budget=300
[[ $mode == cpu ]] && budget=${MATRIX_BENCH_CHECK_BUDGET_S:-180}
"$python" "$repo/bench/gpu/estimate.py" "$matrix" --budget-s "$budget" \
    --phases "$work/phases.tsv" --cells "$work/cells.json" 2>&1 | tee -a "$log"
(( PIPESTATUS[0] == 0 )) || { say "the matrix could not be estimated (above)"; exit 2; }
say "running $matrix serially (--no-ray), no results store, in phases, most important first"
run_started=$SECONDS
not_reached=()
while IFS=$'\t' read -r phase estimate_s only_a only_b; do
    left=$((budget - (SECONDS - started) - 15))  # kept for the summary (3 s on an H200)
    # on the GPU a phase starts only while its estimate fits; on the CPU while time is left
    if (( left <= 0 )) || { [[ $mode == gpu ]] && (( estimate_s > left )); }; then
        say "phase $phase (estimate ${estimate_s} s) not started: ${left} s of the budget left"
        not_reached+=("$phase")
        continue
    fi
    say "phase $phase (estimate ${estimate_s} s, ${left} s left)"
    limit=()
    [[ $mode == gpu ]] && limit=(timeout --signal=INT --kill-after=20 "$left")
    (cd "$work" && "${limit[@]}" "$python" -m orchestrator.cli run "$matrix" --no-ray \
        --db none -o "$work/run" "$only_a" ${only_b:+"$only_b"} </dev/null) 2>&1 | tee -a "$log"
    say "phase $phase took $((SECONDS - run_started)) s so far (exit ${PIPESTATUS[0]})"
done <"$work/phases.tsv"
say "the sweep took $((SECONDS - run_started)) s; not reached: ${not_reached[*]:-none}"
for file in results.jsonl results.parquet report.html; do
    cp "$work/run/$file" "$out/" 2>/dev/null || say "the run left no $file"
done

"$python" "$repo/bench/gpu/summary.py" "$work/run" "$out/summary.json" --mode "$mode" \
    --timing "$work/timing.json" --nvidia-smi "$out/nvidia-smi.txt" \
    --elapsed-s "$((SECONDS - started))" --budget-s "$budget" --cells "$work/cells.json" \
    2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
