//! The service side of issue 27: packaging/fftd.service passes `systemd-analyze verify` and has
//! the restart policy, the reload and the hardening the issue lists; config/daemon.toml is a
//! valid configuration; logs carry no colour codes when stderr is not a terminal (journald).

mod common;

use common::{run, write_f32};
use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../packaging/fftd.service");

#[test]
fn the_service_unit_verifies_and_is_hardened() {
    for line in [
        "Restart=on-failure",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "AmbientCapabilities=\n",
    ] {
        assert!(UNIT.contains(line), "the unit has {line:?}");
    }
    let have = Command::new("systemd-analyze").arg("--version").output();
    if !have.is_ok_and(|o| o.status.success()) {
        eprintln!("skipping systemd-analyze verify: systemd-analyze is missing");
        return;
    }
    // verify checks that ExecStart's program exists: the built binary stands in
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("fftd.service");
    let text = UNIT.replace("/usr/local/bin/fftd", env!("CARGO_BIN_EXE_fftd"));
    std::fs::write(&unit, text).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", unit.to_str().unwrap()])
        .output()
        .expect("systemd-analyze runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn the_example_daemon_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/daemon.toml");
    let settings =
        fftd::app::config::Settings::resolve(fftd::app::config::Options::default(), Some(&path))
            .expect("config/daemon.toml resolves");
    assert!(matches!(
        settings.source.input,
        fftd::source::spec::Input::Mic(_)
    ));
    assert!(settings.output.rotate.is_some());
    assert_eq!(settings.alerts.rules.len(), 2);
    assert!(settings.serve.is_some());
}

#[test]
fn logs_have_no_colour_codes_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    let x: Vec<f64> = (0..8000)
        .map(|i| (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 8000.0).sin())
        .collect();
    write_f32(&input, &x);
    let out = common::fftd()
        .env("RUST_LOG", "fftd=info")
        .args([
            "--file",
            input.to_str().unwrap(),
            "--rate",
            "8000",
            "--frame",
            "400",
        ])
        .args(["--output", "/dev/null", "--device", "cpu", "--quiet"])
        .args(["--alert", "name=tone,band=900-1100,above=-20"])
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("alert start"), "{log}");
    assert!(!log.contains('\u{1b}'), "no escape codes: {log:?}");
    let _ = run;
}
