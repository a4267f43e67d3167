//! The sink's place in the dispatcher's window: the sink puts the workers' batches in order and
//! reports the next it takes, and the window counts from that batch too when it is older than
//! the oldest unfinished one (`State::within_window`). A batch an encoder's thread has not
//! passed on yet is then still in the window, so the sink holds at most a window for order.

use super::Dispatcher;

impl<T> Dispatcher<T> {
    /// The sink puts this dispatcher's batches in order and reports its place
    /// (`taken_in_order`): the window counts from its next batch too. Before any producer starts.
    pub(crate) fn follow_order(&self) {
        self.lock().ordered = Some(0);
    }

    /// The sink has taken every batch below `next` in order (written it, or gone past a number
    /// that never comes): later batches may go a window ahead of `next`.
    pub(crate) fn taken_in_order(&self, next: u64) {
        let mut state = self.lock();
        if let Some(ordered) = &mut state.ordered {
            if next > *ordered {
                *ordered = next;
                self.room.notify_all();
            }
        }
    }
}
