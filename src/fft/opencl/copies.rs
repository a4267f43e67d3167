//! The host-to-host reference of an OpenCL engine: timed copies between pinned host memory
//! and a device buffer (`fftd bench`'s PCIe figures).

use super::*;

impl<T: Sample> OpenClEngine<T> {
    /// The reference for host-to-host figures: bytes per second of one `bytes`-long copy between
    /// this device's pinned host memory and a device buffer, (host to device, device to host),
    /// from event profiling, median of `reps`.
    pub(crate) fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<(f64, f64), String> {
        let measured = self.time_copies(bytes, reps);
        if measured.is_err() {
            // nothing may still copy into or out of the block when it is unmapped
            let _ = self.copy_in.finish();
            let _ = self.copy_out.finish();
        }
        measured
    }

    fn time_copies(&self, bytes: usize, reps: usize) -> Result<(f64, f64), String> {
        let len = (bytes / std::mem::size_of::<T>()).max(1);
        let mut host: PinnedBlock<T> = pinned::DevicePinned(self.dev.clone()).alloc(len)?;
        let mut device_buf = Grow::new();
        let dev = ensure(&mut device_buf, &self.dev, CL_MEM_READ_WRITE, len)?;
        let cl = |what: &str, e: opencl3::error_codes::ClError| format!("{what}: {e}");
        let (mut h2d, mut d2h) = (Vec::new(), Vec::new());
        for _ in 0..reps.max(1) + 1 {
            // SAFETY: `host` lives to the end of this function and the copy is waited for on
            // the next line, before `host` is touched again; `dev` holds at least `host.len()`.
            let w = unsafe {
                self.copy_in
                    .enqueue_write_buffer(dev, CL_NON_BLOCKING, 0, host.as_slice(), &[])
            }
            .map_err(|e| cl("write", e))?;
            w.wait().map_err(|e| cl("write", e))?;
            // SAFETY: as the write above: `host` outlives the read, which is waited for at once.
            let r = unsafe {
                self.copy_out
                    .enqueue_read_buffer(dev, CL_NON_BLOCKING, 0, host.as_mut_slice(), &[])
            }
            .map_err(|e| cl("read", e))?;
            r.wait().map_err(|e| cl("read", e))?;
            h2d.push(span(&w) as f64);
            d2h.push(span(&r) as f64);
        }
        let rate = |mut v: Vec<f64>| {
            v.remove(0); // warm-up
            v.sort_by(f64::total_cmp);
            let ns = v[v.len() / 2];
            if ns > 0.0 {
                Ok((len * std::mem::size_of::<T>()) as f64 / (ns * 1e-9))
            } else {
                Err("no profiling times for the copies".to_string())
            }
        };
        Ok((rate(h2d)?, rate(d2h)?))
    }
}
