//! keel's log lines, read from a real process's stderr: sessions opening and closing,
//! and every refused request with its reason (ZooKeeper logs these at INFO); the level
//! set from zoo.cfg's `keel.logLevel`.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Waits until `keel`'s stderr holds `needle` (log lines are written as they happen).
fn wait_for_log(keel: &Keel, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = keel.stderr();
        if log.contains(needle) || Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sessions_and_refused_requests_are_logged_with_the_reason() {
    let mut keel = Keel::new("log-info", KeelOptions::default());
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    let session = format!("0x{:x}", c.session_id);
    c.create("/taken", Some(b"x"), CreateMode::Persistent)
        .unwrap();
    assert!(c.create("/taken", None, CreateMode::Persistent).is_err());
    assert!(c.get_data("/missing/child", false).is_err());
    c.close().unwrap();

    let log = wait_for_log(&keel, "session closed");
    let line = |needle: &str| log.lines().find(|l| l.contains(needle)).map(str::to_string);
    let created = line("session created").expect("a session-created line");
    assert!(created.contains(&session), "{created}");
    let exists = line("NodeExists").unwrap_or_else(|| panic!("no NodeExists line in:\n{log}"));
    assert!(
        exists.contains("request refused")
            && exists.contains("/taken")
            && exists.contains("create"),
        "{exists}"
    );
    let no_node = line("NoNode").unwrap_or_else(|| panic!("no NoNode line in:\n{log}"));
    assert!(
        no_node.contains("/missing/child") && no_node.contains(&session),
        "{no_node}"
    );
    assert!(line("session closed").unwrap().contains(&session));
}

#[test]
fn log_level_comes_from_zoo_cfg() {
    let options = KeelOptions {
        extra: "keel.logLevel=WARN\n".into(),
        ..KeelOptions::default()
    };
    let mut keel = Keel::new("log-warn", options);
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    assert!(c.create("/", None, CreateMode::Persistent).is_err());
    c.close().unwrap();
    // The same requests that log at INFO above leave nothing at WARN.
    std::thread::sleep(Duration::from_millis(300));
    let log = keel.stderr();
    assert!(!log.contains("INFO"), "INFO lines at WARN level:\n{log}");
    assert!(!log.contains("session created"), "{log}");
}

#[test]
fn unknown_log_level_stops_start_up_naming_key_and_line() {
    let options = KeelOptions {
        extra: "keel.logLevel=LOUD\n".into(),
        ..KeelOptions::default()
    };
    let mut keel = Keel::new("log-bad", options);
    let (status, stderr) = keel.start_expecting_exit();
    assert!(!status.success());
    assert!(
        stderr.contains("keel.logLevel") && stderr.contains("line 9") && stderr.contains("LOUD"),
        "{stderr}"
    );
}

#[test]
fn a_closed_stderr_does_not_stop_the_server() {
    use std::process::{Command, Stdio};
    let dir = TempDir::new("log-closed");
    let port = free_port();
    let cfg = dir.path.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\n",
            dir.path.join("data").display()
        ),
    )
    .unwrap();
    /// Kills keel even when an assertion fails first.
    struct Guard(std::process::Child);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut guard = Guard(
        Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut guard.0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ruok(port) {
        assert!(Instant::now() < deadline, "keel did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The log reader goes away (a restarted journald, `| head`): every later log
    // line fails to write. Sessions (each logs a line) must still be served.
    drop(child.stderr.take());
    for i in 0..3 {
        let mut c = Client::connect(port, 10_000).unwrap();
        c.create(&format!("/n{i}"), Some(b"x"), CreateMode::Persistent)
            .unwrap();
        c.close().unwrap();
    }
    assert!(ruok(port), "no longer answering after its log pipe closed");
    assert!(child.try_wait().unwrap().is_none(), "keel exited");
}
