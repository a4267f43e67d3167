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
pub struct Want {
    pub stream: Option<usize>,
    pub width: Option<usize>,
}

/// Why a session ended early.
enum Ended {
    /// The client closed, or its socket failed or stayed full.
    Client,
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

pub async fn run(
    socket: WebSocket,
    hub: Arc<LiveHub>,
    want: Want,
    shutdown: watch::Receiver<bool>,
) {
    hub.serve.ws_sessions.fetch_add(1, Ordering::Relaxed);
    let session = Session {
        stream: want
            .stream
            .unwrap_or(0)
            .min(hub.streams.len().saturating_sub(1)),
        width: want.width.unwrap_or(0),
        view: None,
        rows: None,
        hub: hub.clone(),
    };
    if let Err(Ended::Client) = serve(socket, session, shutdown).await {
        hub.serve.ws_dropped_clients.fetch_add(1, Ordering::Relaxed);
    }
    hub.serve.ws_sessions.fetch_sub(1, Ordering::Relaxed);
}

async fn serve(
    socket: WebSocket,
    mut session: Session,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Ended> {
    let (mut tx, mut rx) = socket.split();
    let hello = serde_json::json!({
        "type": "hello",
        "streams": session.hub.streams,
        "stream": session.stream,
        "fps": super::DISPLAY_FPS,
    });
    send(&mut tx, Message::Text(hello.to_string().into())).await?;
    let mut finished = session.hub.finished();
    let mut told_end = false;
    for message in session.watch() {
        send(&mut tx, message).await?;
    }
    loop {
        let live = async {
            match session.rows.as_mut() {
                Some(rows) => rows.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(want) = serde_json::from_str::<Want>(&text) {
                        session.change(want);
                        told_end = false;
                        for message in session.watch() {
                            send(&mut tx, message).await?;
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Ok(()),
                Some(Ok(_)) => {} // pings are answered by the library; binary is ignored
            },
            row = live => match row {
                Ok(row) => {
                    for message in session.show(&row) {
                        send(&mut tx, message).await?;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    session.hub.serve.ws_rows_skipped.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => session.rows = None,
            },
            _ = finished.changed(), if !told_end => {}
            _ = shutdown.changed() => {
                let _ = tx.send(Message::Close(None)).await;
                return Err(Ended::Shutdown);
            }
        }
        if !told_end && *finished.borrow() {
            told_end = true;
            for message in session.drain() {
                send(&mut tx, message).await?;
            }
            let end = serde_json::json!({"type": "end", "stream": session.stream});
            send(&mut tx, Message::Text(end.to_string().into())).await?;
        }
    }
}

async fn send<S>(tx: &mut S, message: Message) -> Result<(), Ended>
where
    S: futures_util::Sink<Message> + Unpin,
{
    match tokio::time::timeout(SEND_TIMEOUT, tx.send(message)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Ended::Client),
    }
}

impl Session {
    fn change(&mut self, want: Want) {
        if let Some(stream) = want.stream.filter(|&s| s < self.hub.streams.len()) {
            self.stream = stream;
        }
        if let Some(width) = want.width {
            self.width = width;
        }
        self.view = None;
    }

    /// Subscribes to the current stream: its layout and recent rows, to send now.
    fn watch(&mut self) -> Vec<Message> {
        let Some(sub) = self.hub.subscribe_display(self.stream) else {
            self.rows = None;
            return Vec::new();
        };
        self.rows = Some(sub.rows);
        sub.history.iter().flat_map(|row| self.show(row)).collect()
    }

    /// The messages of the rows already waiting (the last ones before the end).
    fn drain(&mut self) -> Vec<Message> {
        let mut waiting = Vec::new();
        while let Some(Ok(row)) = self.rows.as_mut().map(|rows| rows.try_recv()) {
            waiting.push(row);
        }
        waiting.iter().flat_map(|row| self.show(row)).collect()
    }

    /// The messages for one display row: a layout first when it changed, then the row.
    fn show(&mut self, row: &DisplayRow) -> Vec<Message> {
        if row.stream != self.stream {
            return Vec::new();
        }
        let mut messages = Vec::with_capacity(2);
        if !self
            .view
            .as_ref()
            .is_some_and(|v| Arc::ptr_eq(&v.layout, &row.layout))
        {
            let view = View::new(row.layout.clone(), self.width);
            let layout = serde_json::json!({
                "type": "layout",
                "stream": self.stream,
                "n": row.layout.n,
                "bins": row.layout.columns(),
                "columns": view.columns(),
                "columns_hz": view.columns_hz,
            });
            messages.push(Message::Text(layout.to_string().into()));
            self.view = Some(view);
        }
        if let Some(view) = &self.view {
            messages.push(Message::Binary(view.encode(row).into()));
            self.hub.serve.ws_rows_sent.fetch_add(1, Ordering::Relaxed);
        }
        messages
    }
}
