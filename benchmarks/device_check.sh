#!/usr/bin/env bash
# The GPU kernels natively on a GPU host, the references on its CPU: one prepared call.
#
#   OUT=DIR bash benchmarks/device_check.sh [--dry-run] [--examples N]
#
# On a GPU host (jax with CUDA and torch installed, as on the workplace's H200 image): installs
# what is missing from wheels in .whl/ if there are any (no network needed), then runs `run`
# (correctness: every case against the float64 truth computed on the CPU) and `bench` (native
# timings) for every kernel that registers on a GPU there: Pallas GPU mha and decode (up to jax
# 0.12.0.1: 0.12.1 removed their modules), torch SDPA's fused backends, tokamax's triton and cudnn
# paths where tokamax installs. Writes the store, the HTML report and the console logs under $OUT
# (a tarball of the store too, since a device run brings back a few files only). Exit: the worst
# of the steps (0 pass, 1 a failure).
#
# --dry-run: the same steps on this host without a GPU, at the smallest budget (1 case per
# kernel, 1 benchmark shape, forward only): the Pallas GPU kernels under their interpreter where they
# register, else jax_xla, so that every step runs something. tests/test_device_check.py runs it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-reports/device}
DRY=0
EXAMPLES=30
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1; EXAMPLES=1 ;;
        --examples) EXAMPLES=$2; shift ;;
        *) echo "device_check.sh: unknown argument $1 (use --dry-run, --examples N)" >&2; exit 2 ;;
    esac
    shift
done
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/device-site .whl/*.whl || exit 3
    export PYTHONPATH="$PYTHONPATH:/tmp/device-site"
fi
# The project's own imports (no network there: what the image lacks must come as .whl/).
"$PY" -c "import harness.cli, jax, numpy, hypothesis, jinja2" || { echo "device_check.sh: a package is missing (carry it in .whl/)" >&2; exit 3; }
"$PY" -c "import jax; print('jax', jax.__version__, 'devices', jax.devices())" | tee "$OUT/devices.txt"
# Every kernel that computes on a GPU here (its device as records show it); on a dry run, the Pallas GPU kernels
# where this jax has them, else jax_xla.
KERNELS=$("$PY" - "$DRY" <<'PY'
import sys
from harness.core import contract
names = contract.names("kernel")
gpu = [n for n in names if "gpu" in contract.resolve(n).device().lower() or "cuda" in contract.resolve(n).device().lower()]
dry = [n for n in ("pallas_gpu", "pallas_gpu_decode") if n in names] or ["jax_xla"]
print(" ".join(gpu or (dry if sys.argv[1] == "1" else [])))
PY
)
if [ -z "$KERNELS" ]; then
    echo "device_check.sh: no kernel computes on a GPU here (jax sees no GPU?); --dry-run checks the script on a CPU host" >&2
    exit 4
fi
echo "kernels: $KERNELS" | tee "$OUT/kernels.txt"
ARGS=()
for k in $KERNELS; do ARGS+=(--kernel "$k"); done
STORE="$OUT/store"
worst=0
step() {  # step NAME ARGS...: run one harness command, log it, keep the worst exit status (4, cannot run here, counts as 0)
    local name=$1; shift
    echo "== $name: python -m harness $*"
    "$PY" -m harness "$@" 2>&1 | tee "$OUT/$name.log"
    local code=${PIPESTATUS[0]}
    [ "$code" = 4 ] && code=0
    [ "$code" -gt "$worst" ] && worst=$code
    return 0
}
SHAPES=()
SELECT="($(echo "$KERNELS" | sed 's/ / or /g'))"
if [ "$DRY" = 1 ]; then SHAPES=(--shape mha_f32_256); SELECT="$SELECT and not fwd_bwd"; fi
step run run "${ARGS[@]}" --examples "$EXAMPLES" --jobs 1 --no-database --out "$STORE"
step bench bench "${SHAPES[@]}" -k "$SELECT" --out "$STORE"
step report report --store "$STORE" --out "$OUT/report.html"
tar -czf "$OUT/store.tgz" -C "$OUT" store
echo "device check: exit $worst; store $STORE ($OUT/store.tgz), report $OUT/report.html"
exit "$worst"
