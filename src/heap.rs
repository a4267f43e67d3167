//! The process's global allocator: mimalloc, wrapped so that a memory benchmark can tell the heap
//! that is live (allocated and not yet freed) from the memory the allocator and the kernel hold
//! (issue 27: is a long daemon run's memory flat?). With `FFTD_HEAP_COUNT=1` every allocation
//! and free is counted (bytes asked for, allocations, and bytes by power-of-two size class);
//! `/metrics` shows them as `fftd_heap_live_*` gauges beside mimalloc's committed memory
//! (`fftd_heap_committed_bytes`). Without the knob the wrapper only reads one atomic per call.
//! A run with a live input turns transparent huge pages off (`no_huge_pages`).

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

/// Size classes counted: allocations of up to 2^k bytes in class k (the last takes the rest).
const CLASSES: usize = 40;

/// 0: the knob not read yet; 1: not counting; 2: counting.
static STATE: AtomicU8 = AtomicU8::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_COUNT: AtomicI64 = AtomicI64::new(0);
static BY_CLASS: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

/// mimalloc, counting when `FFTD_HEAP_COUNT=1` (read on the first allocation, before `main`).
pub struct CountingMiMalloc;

fn counting() -> bool {
    match STATE.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => {
            // (the first calls may race here: each reads the same environment)
            let on = crate::knobs::heap_count();
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
    }
}

fn class_of(size: usize) -> usize {
    let bits = usize::BITS - size.saturating_sub(1).leading_zeros();
    (bits as usize).min(CLASSES - 1)
}

fn count(size: usize, sign: i64) {
    let bytes = size as i64 * sign;
    LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed);
    LIVE_COUNT.fetch_add(sign, Ordering::Relaxed);
    BY_CLASS[class_of(size)].fetch_add(bytes, Ordering::Relaxed);
}

// SAFETY: every call goes to mimalloc's own with the same arguments, as `MiMalloc` alone would;
// the counting beside it only touches atomics and never allocates (the knob is read with
// `getenv`, not `std::env`).
unsafe impl GlobalAlloc for CountingMiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on unchanged.
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() && counting() {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() && counting() {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counting() {
            count(layout.size(), -1);
        }
        // SAFETY: the caller's contract for `dealloc` (ptr came from this allocator with layout).
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on unchanged.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() && counting() {
            count(layout.size(), -1);
            count(new_size, 1);
        }
        p
    }
}

extern "C" {
    /// mimalloc's process figures (in the linked library whatever the crate's features).
    fn mi_process_info(
        elapsed_msecs: *mut usize,
        user_msecs: *mut usize,
        system_msecs: *mut usize,
        current_rss: *mut usize,
        peak_rss: *mut usize,
        current_commit: *mut usize,
        peak_commit: *mut usize,
        page_faults: *mut usize,
    );
}

/// A run that lasts (a live input, read as it comes): no transparent huge pages for this process
/// from now on. mimalloc asks for huge pages on its arenas (`madvise(MADV_HUGEPAGE)`), so every
/// 2 MiB region it touches becomes resident whole, and the kernel's khugepaged later folds back
/// into huge pages the regions mimalloc had given partly back (`max_ptes_none`): on a 30-minute
/// daemon run RSS rose in 2 MiB steps at random times to 2-3 times the allocator's own figure
/// while the live heap stayed flat (docs/daemon.md). `PR_SET_THP_DISABLE` stops both for the
/// whole process (faults and khugepaged); huge pages already there go as mimalloc purges them.
/// Runs that end (file inputs) keep them: their speed, not their memory over months, counts.
pub fn no_huge_pages() {
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) takes plain integers and changes only this
    // process's memory flags.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r != 0 {
        tracing::debug!(
            "prctl(PR_SET_THP_DISABLE): {}",
            std::io::Error::last_os_error()
        );
    }
}

/// mimalloc's committed memory now and at its peak (bytes).
pub fn committed() -> (usize, usize) {
    let (mut now, mut peak) = (0usize, 0usize);
    let null = std::ptr::null_mut();
    // SAFETY: mimalloc writes only through the pointers it is given, each null (skipped) or a
    // live local `usize`.
    unsafe { mi_process_info(null, null, null, null, null, &mut now, &mut peak, null) };
    (now, peak)
}

/// The live heap: bytes and allocations (None when not counting).
pub fn live() -> Option<(i64, i64)> {
    (STATE.load(Ordering::Relaxed) == 2).then(|| {
        (
            LIVE_BYTES.load(Ordering::Relaxed),
            LIVE_COUNT.load(Ordering::Relaxed),
        )
    })
}

/// The `/metrics` lines: mimalloc's committed memory always, the live heap when counting.
pub(crate) fn render_metrics(out: &mut String) {
    use std::fmt::Write;
    let (now, peak) = committed();
    let mut gauge = |name: &str, help: &str, value: i64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    };
    gauge(
        "fftd_heap_committed_bytes",
        "Memory the allocator (mimalloc) holds committed.",
        now as i64,
    );
    gauge(
        "fftd_heap_committed_peak_bytes",
        "The allocator's committed memory at its peak.",
        peak as i64,
    );
    let Some((bytes, allocations)) = live() else {
        return;
    };
    gauge(
        "fftd_heap_live_bytes",
        "Bytes allocated and not freed (FFTD_HEAP_COUNT=1).",
        bytes,
    );
    gauge(
        "fftd_heap_live_allocations",
        "Allocations not freed (FFTD_HEAP_COUNT=1).",
        allocations,
    );
    out.push_str("# HELP fftd_heap_live_bytes_by_size Live bytes in allocations of size_le bytes or less (and above the class below).\n");
    out.push_str("# TYPE fftd_heap_live_bytes_by_size gauge\n");
    for (k, class) in BY_CLASS.iter().enumerate() {
        let bytes = class.load(Ordering::Relaxed);
        if bytes != 0 {
            let _ = writeln!(
                out,
                "fftd_heap_live_bytes_by_size{{size_le=\"{}\"}} {bytes}",
                1u64 << k
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_power_of_two_classes() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(1), 0);
        assert_eq!(class_of(2), 1);
        assert_eq!(class_of(3), 2);
        assert_eq!(class_of(4096), 12);
        assert_eq!(class_of(4097), 13);
        assert_eq!(class_of(usize::MAX), CLASSES - 1);
    }
}
