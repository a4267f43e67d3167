# Where the GPU route's batches spend their time: --trace of three jobs, span statistics per thread (issue 23).
source bench/gpu_env.sh data
for args in "--frame 2048 --hop 512 --scale db --bands mel:128" "--frame 65536 --hop 8192" "--frame 4096 --hop 512"; do
echo "=== $args"
RUST_LOG=fftd=debug $F --file /dev/shm/x.f32 --input-format f32 --rate 16000 --format f32 --output /dev/null --device gpu --quiet --trace /dev/shm/t.json $args 2>&1 | grep -E "built OpenCL|lane ready|engines ready" | cut -c1-250
python3 bench/trace_spans.py /dev/shm/t.json 2>&1 | grep -E "fft|main|upload|kernel|download|engine|start" 
done
