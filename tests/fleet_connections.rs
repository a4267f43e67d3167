//! `fftd publish --connections` (issue 28, the publisher's speed): nats-server stores what one
//! client connection publishes one message at a time, so the publisher sends each work shard's
//! blocks on a connection of its own (shard k on connection k mod C). Against a real
//! nats-server: a publish opens one connection per shard by default (seen in the server's
//! /connz) and `--connections N` opens N; the blocks reach every shard and a worker's rows are
//! the local run's, each once; a publish resumed with its run id on another number of connections
//! sends nothing twice; a server restarted under them is one outage, said once, and loses
//! nothing; a bad count is a usage error.

use crate::common;
use crate::fleet_common;

use common::*;
use fleet_common::*;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::Duration;

fn setup(server: &NatsServer) {
    let out = fftd()
        .args([
            "fleet",
            "setup",
            "--server",
            &server.url(""),
            "--shards",
            "4",
        ])
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "setup: {}", stderr_text(&out));
}

/// `fftd publish --stats` of `input` (a path, or `-` for stdin) as source `rec`, blocks of 16
/// frames, plus `extra`.
fn publish(server: &NatsServer, input: &Path, extra: &[&str]) -> Child {
    fftd()
        .args(["publish", "--to", &server.url("frames.site1")])
        .args(["--source-id", "rec", "--stats", "--block-frames", "16"])
        .arg("--file")
        .arg(input)
        .args(FRAMING)
        .args(extra)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("publisher starts")
}

fn worker(server: &NatsServer) -> Child {
    fftd()
        .args(["--file", &server.url("FRAMES/workers")])
        .args(["--output", &server.url("spectra.site1")])
        .args(FRAMING)
        .args(["--device", "cpu", "--idle-exit", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("worker starts")
}

fn publisher_connections(monitor: u16) -> usize {
    (clients(monitor).iter())
        .filter(|(name, _)| name.starts_with("fftd publish"))
        .count()
}

/// The shards' stream names of fleet setup's 4.
const SHARDS: [&str; 4] = ["FRAMES", "FRAMES-shard1", "FRAMES-shard2", "FRAMES-shard3"];

/// A live publisher of raw f32 samples on stdin (it connects at once and stays connected
/// while stdin is open), plus `extra`; its stdin.
fn live_publisher(server: &NatsServer, extra: &[&str]) -> (Child, ChildStdin) {
    let mut child = publish(
        server,
        Path::new("-"),
        &[&["--input-format", "f32", "--rate", "8000"], extra].concat(),
    );
    let stdin = child.stdin.take().expect("stdin");
    (child, stdin)
}

#[test]
fn a_publish_sends_each_shard_on_a_connection_of_its_own_and_rows_stay_exactly_once() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let monitor = common::free_port();
    let extra: Vec<OsString> = vec!["-m".into(), monitor.to_string().into()];
    let server = NatsServer::start_with(dir.path(), &extra, ClientAuth::None);
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 60_000);
    setup(&server);
    let said = finish(publish(&server, &wav, &[]), "publisher");
    assert!(
        said.contains("over 4 shard(s) on 4 connection(s)"),
        "{said}"
    );
    for shard in SHARDS {
        assert!(
            messages_in(&server, shard).unwrap_or(0) > 0,
            "{shard} got blocks"
        );
    }
    eprintln!("{}", finish(worker(&server), "worker"));
    assert_eq!(work_messages(&server), Some(0), "every block acked");
    assert_equals_local(&server, &wav);
    // the server sees them: one connection per shard, or --connections N
    for (connections, extra) in [(4, &[][..]), (2, &["--connections", "2"][..])] {
        let (live, mut stdin) = live_publisher(&server, extra);
        wait_for(
            "the publisher's connections",
            Duration::from_secs(60),
            || publisher_connections(monitor) == connections,
        );
        stdin.write_all(&[0; 16_384]).expect("samples to stdin");
        drop(stdin);
        let said = finish(live, "live publisher");
        let want = format!("over 4 shard(s) on {connections} connection(s)");
        assert!(said.contains(&want), "{said}");
    }
}

/// The blocks a publisher's `--stats` line says it sent, and how many were there already.
fn published(stats: &str) -> (u64, u64) {
    let number_before = |word: &str| -> u64 {
        let at = stats
            .find(word)
            .unwrap_or_else(|| panic!("'{word}' in {stats}"));
        let digits: String = (stats[..at].trim_end().chars().rev())
            .take_while(char::is_ascii_digit)
            .collect();
        (digits.chars().rev().collect::<String>())
            .parse()
            .expect("a count")
    };
    (number_before(" blocks"), number_before(" already there"))
}

#[test]
fn a_publish_resumed_on_another_number_of_connections_sends_nothing_twice() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 40_000);
    setup(&server);
    let first = finish(
        publish(&server, &wav, &["--run-id", "r1", "--connections", "1"]),
        "publisher on 1 connection",
    );
    assert!(first.contains("on 1 connection(s)"), "{first}");
    let (blocks, there) = published(&first);
    assert_eq!(there, 0, "{first}");
    // the same run on a connection per shard: each block goes to the shard it went to before,
    // whose duplicate window drops it
    let again = finish(
        publish(&server, &wav, &["--run-id", "r1", "--connections", "9"]),
        "publisher on 4 connections",
    );
    assert!(
        again.contains("on 4 connection(s)"),
        "at most one per shard: {again}"
    );
    assert_eq!(published(&again), (blocks, blocks), "{again}");
    assert_eq!(work_messages(&server), Some(blocks));
    eprintln!("{}", finish(worker(&server), "worker"));
    assert_equals_local(&server, &wav);
}

#[test]
fn a_connection_count_out_of_range_is_a_usage_error() {
    for bad in ["0", "65", "two"] {
        let out = fftd()
            .args([
                "publish",
                "--to",
                "nats://127.0.0.1:1/frames.x",
                "--file",
                "x.wav",
            ])
            .args(["--connections", bad])
            .output()
            .expect("fftd runs");
        assert_clean_error(&out, 2, &["--connections"]);
    }
}

#[test]
fn a_server_restart_under_a_publishers_connections_is_one_outage_and_loses_nothing() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 60_000);
    setup(&server);
    let mut publisher = publish(&server, Path::new("-"), &["--retry", "forever"]);
    let mut stdin = publisher.stdin.take().expect("stdin");
    let bytes = std::fs::read(&wav).expect("wav");
    let feed = |stdin: &mut ChildStdin, bytes: &[u8]| {
        for piece in bytes.chunks(16_384) {
            stdin.write_all(piece).expect("write to stdin");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let third = bytes.len() / 3;
    feed(&mut stdin, &bytes[..third]);
    wait_for("the first blocks", Duration::from_secs(60), || {
        work_messages(&server).unwrap_or(0) > 0
    });
    // every connection is lost at once, while blocks are cut
    // (the outage's length and the pause after it are not what is checked: the loss and the
    // return are the client's connection events, and with --retry forever the blocks cut meanwhile
    // wait for the server however long it is away or the publisher takes to see it back)
    server.stop();
    feed(&mut stdin, &bytes[third..2 * third]);
    std::thread::sleep(Duration::from_secs(2));
    server.launch();
    std::thread::sleep(Duration::from_secs(3));
    feed(&mut stdin, &bytes[2 * third..]);
    drop(stdin);
    let said = finish(publisher, "publisher");
    eprintln!("{said}");
    assert!(said.contains("on 4 connection(s)"), "{said}");
    assert_eq!(
        said.matches("NATS connection lost").count(),
        1,
        "said once, not once per connection: {said}"
    );
    assert!(said.contains("answers again after"), "{said}");
    let (blocks, _) = published(&said);
    assert_eq!(
        work_messages(&server),
        Some(blocks),
        "each block stored once"
    );
    eprintln!("{}", finish(worker(&server), "worker"));
    assert_equals_local(&server, &wav);
}
