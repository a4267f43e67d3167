# issue 23's probe of one job on the GPU machine: --stats of the cpu and gpu routes with
# `taskset` core sets, on 4 GiB of f32 noise in /dev/shm (bench/gpu_env.sh sets up OpenCL).
#   bash bench/route_stats.sh "0-7 0-15" "--frame 4096" [more fftd flags]
source bench/gpu_env.sh
cores=${1:-"0-7"}; shift
python3 -c "
import numpy as np
r=np.random.default_rng(0)
with open('/dev/shm/route-stats.f32','wb') as f:
    for _ in range(16): r.standard_normal(1<<26,dtype=np.float32).tofile(f)
"
run() { $F --file /dev/shm/route-stats.f32 --input-format f32 --rate 16000 --format f32 \
  --output /dev/null --quiet "$@"; }
run --device gpu --frame 4096 >/dev/null 2>&1 # the device's kind recorded, its kernels cached
for c in $cores; do
  for d in cpu gpu; do
    for k in 1 2; do
      echo "== taskset -c $c --device $d $* (run $k)"
      taskset -c "$c" bash -c "time $F --file /dev/shm/route-stats.f32 --input-format f32 \
        --rate 16000 --format f32 --output /dev/null --quiet --device $d --stats $*" 2>&1 |
        grep -E "devices|wall|bound|thread|real|set-up"
    done
  done
done
rm -f /dev/shm/route-stats.f32
