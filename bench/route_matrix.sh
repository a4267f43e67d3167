# issue 23's probe on the GPU machine: named cases of one 4 GiB f32 job (noise in /dev/shm),
# each run under `taskset` with optional FFTD_* knobs, `--stats` kept whole in $OUT/NAME.k.txt
# and one summary line per run (real seconds, fftd's wall, the bound it names).
#   [FFTD=binary TAG=name KEEP=1 RUNS=2] bash bench/route_matrix.sh CASES_FILE
# CASES_FILE lines: NAME|CORES (a taskset list, or all)|ENV (space-separated K=V, or -)|fftd flags
# KEEP=1 keeps the data file for the next call; every log is also appended to $OUT/all.txt.
source bench/gpu_env.sh
F=${FFTD:-$F}; tag=${TAG:+$TAG.}
cases=${1:?a cases file}; runs=${RUNS:-2}; out=${OUT:-/tmp/route-matrix}; mkdir -p "$out"
data=/dev/shm/route-matrix.f32
[ -f "$data" ] || python3 -c "
import numpy as np
r=np.random.default_rng(0)
with open('$data','wb') as f:
    for _ in range(16): r.standard_normal(1<<26,dtype=np.float32).tofile(f)
"
base=(--file "$data" --input-format f32 --rate 16000 --format f32 --output /dev/null --quiet)
$F "${base[@]}" --device gpu --frame 4096 >/dev/null 2>&1 # the device's kind seen, kernels cached
while IFS='|' read -r name cores env flags; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  [ "$env" = "-" ] && env=""
  [ "$cores" = all ] && cores="0-$(($(nproc) - 1))"
  for k in $(seq 1 "$runs"); do
    log="$out/$tag$name.$k.txt"
    # shellcheck disable=SC2086
    { time env $env taskset -c "$cores" $F "${base[@]}" --stats $flags; } >"$log" 2>&1
    real=$(grep -E "^real" "$log" | awk '{print $2}')
    wall=$(grep -oE "wall [0-9.]+ ?s" "$log" | head -1)
    bound=$(grep -oE "bound[^,;]*" "$log" | head -1)
    echo "$tag$name run $k: real $real | $wall | $bound"
    { echo "=== $tag$name run $k (env: $env)"; grep -v "pinned host block" "$log"; } >>"$out/all.txt"; rm -f "$log"
  done
done <"$cases"
[ "${KEEP:-0}" = 1 ] || rm -f "$data"
