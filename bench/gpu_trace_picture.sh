# A GPU-route run's timeline for docs/tracing.md: hop 512 of 4096 on 1 GiB, --stats and --trace
# (device spans on the host clock, one track per OpenCL queue) written under $OUT.
source bench/gpu_env.sh data
$F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --frame 4096 --hop 512 --format f32 --output /dev/null --device gpu --quiet
$F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --frame 4096 --hop 512 --format f32 --output /dev/null --device gpu --quiet --stats --trace "$OUT/gpu.json" 2>&1
python3 -c "
import json; t=json.load(open('$OUT/gpu.json')); print('device clocks:', t.get('otherData',{}).get('device_clocks'))"
python3 bench/trace_spans.py "$OUT/gpu.json" | head -40
