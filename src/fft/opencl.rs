//! OpenCL engine (in progress on its own branch).
