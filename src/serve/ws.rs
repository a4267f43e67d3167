//! One WebSocket session of the page: a hello with the streams, then for the stream the page
//! watches a layout, its recent rows and live display rows reduced to the page's width. The page
//! switches stream or width with a text message (`{"stream":K,"width":W}`). A session that lags
//! loses the oldest rows (counted); one whose socket stays full for `SEND_TIMEOUT` is closed, so a
//! page that stops reading never holds anything up.

use super::display::{DisplayRow, View};
use super::hub::LiveHub;
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Longest one message may wait for room in a client's socket before the client is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// What the page asks for, in the query string or a text message.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct Want {
    pub stream: Option<usize>,
    pub width: Option<usize>,
}

/// Why a session ended early.
enum Ended {
    /// The client closed, or its socket failed.
    Closed,
    /// The client's socket stayed full for `SEND_TIMEOUT`: it stopped reading.
    Stalled,
    /// The server is shutting down.
    Shutdown,
}

struct Session {
    hub: Arc<LiveHub>,
    stream: usize,
    width: usize,
    view: Option<View>,
    rows: Option<broadcast::Receiver<Arc<DisplayRow>>>,
}

/// What a text message from the page changes.
enum Change {
    /// Another stream: subscribe again, send its history.
    Stream,
    /// Only the width: a new layout; the page resamples what it shows.
    Width,
    /// Nothing, with the reason to tell the page.
    Refused(String),
}

pub(crate) async fn run(
    socket: WebSocket,
    hub: Arc<LiveHub>,
    want: Want,
    shutdown: watch::Receiver<bool>,
) {
    hub.serve.ws_sessions.fetch_add(1, Ordering::Relaxed);
    let session = Session {
        stream: hub.first_shown(),
        width: want.width.unwrap_or(0),
        view: None,
        rows: None,
        hub: hub.clone(),
    };
    if let Err(Ended::Stalled) = serve(socket, session, want, shutdown).await {
        hub.serve.ws_dropped_clients.fetch_add(1, Ordering::Relaxed);
    }
    hub.serve.ws_sessions.fetch_sub(1, Ordering::Relaxed);
}

async fn serve(
    socket: WebSocket,
    mut session: Session,
    want: Want,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Ended> {
    let (mut tx, mut rx) = socket.split();
    let refused = match want.stream {
        Some(stream) => session.pick(stream).err(),
        None => None,
    };
    let hello = serde_json::json!({
        "type": "hello",
        "streams": session.hub.streams,
        "stream": session.stream,
        "fps": super::DISPLAY_FPS,
    });
    send(&mut tx, text(hello)).await?;
    if let Some(why) = refused {
        send(&mut tx, error(&why)).await?;
    }
    let mut finished = session.hub.finished();
    let mut told_end = false;
    session.send_history(&mut tx).await?;
    loop {
        // (also for a page that connects after the end: `changed` never fires for it)
        if !told_end && *finished.borrow() {
            told_end = true;
            session.send_waiting(&mut tx).await?;
            let end = serde_json::json!({"type": "end", "stream": session.stream});
            send(&mut tx, text(end)).await?;
        }
        let live = async {
            match session.rows.as_mut() {
                Some(rows) => rows.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Text(message))) => match session.change(&message) {
                    Change::Stream => {
                        told_end = false;
                        session.send_history(&mut tx).await?;
                    }
                    Change::Width => {
                        if let Some(layout) = session.relayout() {
                            send(&mut tx, layout).await?;
                        }
                    }
                    Change::Refused(why) => send(&mut tx, error(&why)).await?,
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Ok(()),
                Some(Ok(_)) => {} // pings are answered by the library; binary is ignored
            },
            row = live => match row {
                Ok(row) => session.send_row(&mut tx, &row).await?,
                Err(broadcast::error::RecvError::Lagged(n)) => session.skipped(n),
                Err(broadcast::error::RecvError::Closed) => session.rows = None,
            },
            _ = finished.changed(), if !told_end => {}
            _ = shutdown.changed() => {
                let _ = tx.send(Message::Close(None)).await;
                return Err(Ended::Shutdown);
            }
        }
    }
}

async fn send<S>(tx: &mut S, message: Message) -> Result<(), Ended>
where
    S: futures_util::Sink<Message> + Unpin,
{
    match tokio::time::timeout(SEND_TIMEOUT, tx.send(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Ended::Closed),
        Err(_) => Err(Ended::Stalled),
    }
}

fn text(json: serde_json::Value) -> Message {
    Message::Text(json.to_string().into())
}

fn error(why: &str) -> Message {
    text(serde_json::json!({"type": "error", "message": why}))
}

impl Session {
    /// Watches `stream`, or says why not.
    fn pick(&mut self, stream: usize) -> Result<(), String> {
        let streams = self.hub.streams.len();
        if stream >= streams {
            return Err(format!(
                "no stream {stream}: this run has streams 0 to {}",
                streams.saturating_sub(1)
            ));
        }
        self.stream = stream;
        Ok(())
    }

    fn change(&mut self, message: &str) -> Change {
        let want = match serde_json::from_str::<Want>(message) {
            Ok(want) => want,
            Err(e) => return Change::Refused(format!("not a request: {e}")),
        };
        if let Some(width) = want.width {
            self.width = width;
        }
        match want.stream {
            Some(stream) if stream != self.stream => match self.pick(stream) {
                Ok(()) => {
                    self.view = None;
                    Change::Stream
                }
                Err(why) => Change::Refused(why),
            },
            _ => Change::Width,
        }
    }

    /// Subscribes to the current stream and sends its recent rows, one at a time.
    async fn send_history<S>(&mut self, tx: &mut S) -> Result<(), Ended>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        let Some(sub) = self.hub.subscribe_display(self.stream) else {
            self.rows = None;
            return Ok(());
        };
        self.rows = Some(sub.rows);
        for row in &sub.history {
            self.send_row(tx, row).await?;
        }
        Ok(())
    }

    /// Sends the rows already waiting (the last ones before the end), past any gap.
    async fn send_waiting<S>(&mut self, tx: &mut S) -> Result<(), Ended>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        loop {
            let Some(rows) = self.rows.as_mut() else {
                return Ok(());
            };
            match rows.try_recv() {
                Ok(row) => self.send_row(tx, &row).await?,
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.skipped(n),
                Err(_) => return Ok(()), // empty or closed
            }
        }
    }

    fn skipped(&self, rows: u64) {
        let skipped = &self.hub.serve.ws_rows_skipped;
        skipped.fetch_add(rows, Ordering::Relaxed);
    }

    /// The current layout at the new width, when there is one.
    fn relayout(&mut self) -> Option<Message> {
        let layout = self.view.as_ref()?.layout.clone();
        Some(self.set_view(View::new(layout, self.width)))
    }

    fn set_view(&mut self, view: View) -> Message {
        let message = text(serde_json::json!({
            "type": "layout",
            "stream": self.stream,
            "n": view.layout.n,
            "bins": view.layout.columns(),
            "columns": view.columns(),
            "columns_hz": view.columns_hz,
        }));
        self.view = Some(view);
        message
    }

    /// Sends one display row of the current stream, after a layout when its columns changed.
    async fn send_row<S>(&mut self, tx: &mut S, row: &DisplayRow) -> Result<(), Ended>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        if row.stream != self.stream {
            return Ok(());
        }
        let current = self.view.as_ref();
        if !current.is_some_and(|v| Arc::ptr_eq(&v.layout, &row.layout)) {
            let layout = self.set_view(View::new(row.layout.clone(), self.width));
            send(tx, layout).await?;
        }
        if let Some(view) = &self.view {
            send(tx, Message::Binary(view.encode(row).into())).await?;
            self.hub.serve.ws_rows_sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}
