# The GPU route's --stats over a sweep of jobs, workers and batch sizes (issue 23, docs/perf.md).
source bench/gpu_env.sh data
nvidia-smi --query-gpu=name --format=csv,noheader
run() { echo "== $*"; /usr/bin/time -f "wall %e s" $F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --format f32 --output /dev/null --stats --quiet "$@" 2>&1 | grep -E "^fftd (time|thread fft|bound|start)|wall|error" ; }
$F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --frame 4096 --format f32 --output /dev/null --device gpu --quiet
run --frame 4096 --hop 512 --device cpu
run --frame 4096 --hop 512 --device gpu
for w in 1 2 4; do for b in 256 1024 4096; do run --frame 4096 --hop 512 --device gpu --workers $w --batch $b; done; done
run --frame 4096 --device cpu
run --frame 4096 --device gpu
run --frame 4096 --device gpu --workers 1
run --frame 65536 --hop 8192 --device cpu
run --frame 65536 --hop 8192 --device gpu
run --frame 2048 --hop 512 --scale db --bands mel:128 --device cpu
run --frame 2048 --hop 512 --scale db --bands mel:128 --device gpu
run --frame 4096 --hop 2048 --average 64 --device cpu
run --frame 4096 --hop 2048 --average 64 --device gpu
for c in 2 4 8; do echo "## taskset $c cores"; F="taskset -c 0-$((c-1)) target/gpu/fftd"; run --frame 4096 --hop 512 --device cpu; run --frame 4096 --hop 512 --device gpu; run --frame 2048 --hop 512 --scale db --bands mel:128 --device cpu; run --frame 2048 --hop 512 --scale db --bands mel:128 --device gpu; done
