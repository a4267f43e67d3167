# issue 23's route benchmark on the GPU machine (docs/perf.md): NVIDIA OpenCL set up, then
# bench/e2e_routes.py with the binary carried in target/gpu.
mkdir -p /etc/OpenCL/vendors && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/target/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; date -u
python3 bench/e2e_routes.py --fftd target/gpu/fftd "$@"
