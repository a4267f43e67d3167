mkdir -p /etc/OpenCL/vendors && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/target/gpu
F=target/gpu/fftd
python3 -c "
import numpy as np
r=np.random.default_rng(0)
with open('/dev/shm/x.f32','wb') as f:
    for _ in range(4): r.standard_normal(1<<26,dtype=np.float32).tofile(f)
"
for args in "--frame 2048 --hop 512 --scale db --bands mel:128" "--frame 65536 --hop 8192" "--frame 4096 --hop 512"; do
echo "=== $args"
RUST_LOG=fftd=debug $F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --format f32 --output /dev/null --device gpu --quiet --trace /dev/shm/t.json $args 2>&1 | grep -E "built OpenCL|lane ready|engines ready" | cut -c1-250
python3 bench/trace_spans.py /dev/shm/t.json 2>&1 | grep -E "fft|main|upload|kernel|download|engine|start" 
done
