//! How a run is asked to end, shared by every stage that reads, waits or serves.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The exit status of a run ended by a signal before it could finish: a second SIGINT/SIGTERM,
/// or a write stuck on a reader that took nothing after the first (128 + SIGINT, as a shell
/// reports a process killed by Ctrl-C).
pub const INTERRUPTED_EXIT: i32 = 130;

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
