set -e
mkdir -p /etc/OpenCL/vendors && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/target/gpu
F=target/gpu/fftd
python3 -c "
import numpy as np
r=np.random.default_rng(0)
with open('/dev/shm/x.f32','wb') as f:
    for _ in range(4): r.standard_normal(1<<26,dtype=np.float32).tofile(f)
"
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
