# Issue 23, last targets: where f64 4096 hop 1024 and plain 4096 spend their time on 4 GiB
# (--stats and a --trace's span statistics, 16 cores), and the GPU route's fixed cost
# (--max-frames 1). Usage: bash bench/gpu_f64_probe.sh [log2 samples, default 30]
source bench/gpu_env.sh
X=/dev/shm/x4.f32
python3 -c "
import numpy as np,sys
r=np.random.default_rng(0); s=1<<int(sys.argv[1])
with open('$X','wb') as f:
    for _ in range(max(1,s>>26)): r.standard_normal(min(s,1<<26),dtype=np.float32).tofile(f)
" "${1:-30}"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; date -u
base="--file $X --input-format f32 --rate 16000 --format f32 --output /dev/null --quiet"
run() { echo "== $*"; /usr/bin/time -f "wall %e s" $F $base --stats "$@" 2>&1 | grep -E "^fftd (time|thread|bound|start|set-up|device|lane)|wall|error" | cut -c1-220; }
$F $base --frame 4096 --device gpu --max-frames 1 # warm caches
for d in cpu gpu; do /usr/bin/time -f "max-frames 1 $d: wall %e s" $F $base --frame 4096 --device $d --max-frames 1; done
for j in "--frame 4096 --hop 1024 --precision f64" "--frame 4096"; do
  for d in cpu gpu; do run $j --device $d; done
  echo "=== trace gpu $j"
  $F $base $j --device gpu --trace /dev/shm/t.json
  python3 bench/trace_spans.py /dev/shm/t.json > /dev/shm/spans.txt 2>&1
  grep -vE "^\('readers [1-9]" /dev/shm/spans.txt | cut -c1-200
done
