//! How a run is asked to end, shared by every stage that reads, waits or serves.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How a run is asked to end: `stop` makes the stages stop reading and drain (set by a signal,
/// and by the stages themselves: a limit, a closed stdout, an error); `interrupted` is set by
/// SIGINT/SIGTERM only, and ends `--serve`'s serving after the input; `reopen` by SIGHUP.
#[derive(Clone, Default)]
pub struct Signals {
    pub stop: Arc<AtomicBool>,
    pub interrupted: Arc<AtomicBool>,
    /// Set by SIGHUP: every output file is closed and the next rows open new ones.
    pub reopen: Arc<AtomicBool>,
}
