//! The live view's accept loop and HTTP/1.1 connections (hyper, driven here rather than through
//! `axum::serve`, which has no timeouts or cap): each connection takes a permit (or evicts one
//! still waiting for a request, or is answered 503), does its TLS handshake when `--serve-tls-*`
//! is given, and is closed when its clock's deadline passes (`limits`). On shutdown connections
//! waiting for a request close at once; those serving one finish it (the caller bounds that).

use super::limits::{Clock, Registry, Timed};
use super::options::Timeouts;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

/// What every connection needs.
pub(super) struct Context {
    pub router: Router,
    pub tls: Option<TlsAcceptor>,
    pub timeouts: Timeouts,
    pub max_connections: usize,
    pub shutdown: watch::Receiver<bool>,
}

/// Accepts until the shutdown; then waits up to `grace` for the connections (WebSocket sessions
/// too) to end.
pub(super) async fn serve(listener: tokio::net::TcpListener, cx: Context, grace: Duration) {
    let cx = Arc::new(cx);
    let permits = Arc::new(Semaphore::new(cx.max_connections));
    let registry = Arc::new(Registry::default());
    let mut stopping = cx.shutdown.clone();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // (out of descriptors, say: wait a moment rather than spin)
                    tracing::warn!("--serve: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping.wait_for(|&s| s) => break,
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(admit(stream, cx.clone(), permits.clone(), registry.clone()));
    }
    drop(listener);
    let all = u32::try_from(cx.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(grace, permits.acquire_many(all)).await;
}

/// Gives `stream` a permit, making room by evicting a waiting connection if need be.
async fn admit(
    stream: TcpStream,
    cx: Arc<Context>,
    permits: Arc<Semaphore>,
    registry: Arc<Registry>,
) {
    // (every newcomer evicts again until it has a place: places freed go to whoever waits)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    let permit = loop {
        if let Ok(p) = permits.clone().try_acquire_owned() {
            break p;
        }
        if tokio::time::Instant::now() >= deadline || !registry.evict_oldest_waiting() {
            return too_many(stream, cx.max_connections).await;
        }
        let freed = permits.clone().acquire_owned();
        if let Ok(Ok(p)) = tokio::time::timeout(Duration::from_millis(50), freed).await {
            break p;
        }
    };
    let entry = registry.enter(permit);
    let clock = entry.clock.clone();
    let io = Timed::new(stream, entry);
    let Some(tls) = &cx.tls else {
        return connection(io, clock, &cx).await;
    };
    let mut stopping = cx.shutdown.clone();
    // (the handshake counts in the header timeout, and may be evicted like a request head)
    let handshake = tokio::select! {
        done = tls.accept(io) => done,
        _ = clock.expired(&cx.timeouts) => return,
        _ = stopping.wait_for(|&s| s) => return,
    };
    match handshake {
        Ok(tls) => connection(tls, clock, &cx).await,
        // (plain HTTP to the TLS port, a scanner, a client that does not trust the certificate)
        Err(e) => tracing::debug!("--serve: TLS handshake: {e}"),
    }
}

/// Every permit is serving a request or a session: a short 503 and the connection closed.
async fn too_many(mut stream: TcpStream, max: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = format!("fftd: too many connections (--serve-max-connections {max}); try again\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nretry-after: 1\r\nx-content-type-options: nosniff\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    // (the request is read, a little of it, so that closing does not reset the connection
    // before the client has read the reply)
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// Serves HTTP/1.1 on `io` until the client closes, the clock's deadline passes, or shutdown.
async fn connection<I>(io: I, clock: Arc<Clock>, cx: &Context)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let router = TowerToHyperService::new(cx.router.clone());
    let requests = clock.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        requests.begin();
        let done = Done(requests.clone());
        let responding = hyper::service::Service::call(&router, request);
        async move {
            let response = responding.await?;
            // the request counts as in flight until its body has been written (or given up)
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                    let _in_flight = &done;
                    frame
                }))
            }))
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None) // (the clock's, which also covers idle connections)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(served);
    let mut stopping = cx.shutdown.clone();
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("--serve: connection: {e}");
                }
                // a WebSocket session lives on with the socket (and its permit)
                clock.upgraded();
                return;
            }
            _ = clock.expired(&cx.timeouts) => return,
            _ = stopping.wait_for(|&s| s), if !shutting_down => {
                if clock.waiting() {
                    return;
                }
                served.as_mut().graceful_shutdown();
                shutting_down = true;
            }
        }
    }
}

/// Ends its request's time in flight when dropped.
struct Done(Arc<Clock>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.end();
    }
}
