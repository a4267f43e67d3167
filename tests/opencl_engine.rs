//! The tests that drive the OpenCL engine in this process (on PoCL in CI), in one binary: they
//! share `opencl_common`, which sets the process's POCL_CACHE_DIR and FFTD_CACHE_DIR once, so
//! they stay apart from the tests in `suite` (whose spawned fftd would inherit them). Run one
//! file's tests with `cargo test --release --test opencl_engine FILE::`.
mod common;
mod opencl_common;

mod opencl_carry;
mod opencl_conformance;
mod opencl_multi;
mod opencl_router;
mod opencl_sizes;
mod opencl_threestage;
mod opencl_twolevel;
