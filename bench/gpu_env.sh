# Sourced by the GPU machine scripts in bench/: NVIDIA's OpenCL ICD registered, the binary
# carried in target/gpu (with the libasound it links) on the library path, 1 GiB of f32 noise in
# /dev/shm/x.f32 when $1 is "data" (docs/perf.md).
mkdir -p /etc/OpenCL/vendors && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/target/gpu
F=target/gpu/fftd
if [ "${1:-}" = data ]; then
python3 -c "
import numpy as np
r=np.random.default_rng(0)
with open('/dev/shm/x.f32','wb') as f:
    for _ in range(4): r.standard_normal(1<<26,dtype=np.float32).tofile(f)
"
fi
