# issue 23's route benchmark on the GPU machine (docs/perf.md): NVIDIA OpenCL set up, then
# bench/e2e_routes.py with the binary carried in target/gpu.
source bench/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; date -u
python3 bench/e2e_routes.py --fftd target/gpu/fftd "$@"
