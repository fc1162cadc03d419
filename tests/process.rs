//! keel as a real process over real TCP: framing limits, malformed input, four-letter
//! words, a bad zoo.cfg, and a clean stop on SIGTERM.

use bytes::{BufMut, Bytes, BytesMut};
use jute::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Keel {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Keel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "keel-test-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs keel on `cfg` until it exits (a start-up that must fail); its status and stderr.
fn run_to_exit(cfg: &std::path::Path) -> (std::process::ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg(cfg)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// As [`run_to_exit`], but a keel still running after `limit` is killed: `None` for
/// its status then (it started where it had to refuse).
fn run_to_exit_within(
    cfg: &std::path::Path,
    limit: Duration,
) -> (Option<std::process::ExitStatus>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status, err)
}

fn start(extra: &str) -> Keel {
    let port = free_port();
    let dir = temp_dir("proc");
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!("tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=ruok,srvr\nmaxClientCnxns=0\nadmin.enableServer=false\n{extra}\n", dir.join("data").display()),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Owned by the guard at once, so a failed start still kills and reaps it.
    let keel = Keel { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return keel;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("keel did not start on port {port}");
}

fn frame<R: Record>(header: Option<RequestHeader>, r: &R) -> Vec<u8> {
    let mut body = BytesMut::new();
    if let Some(h) = header {
        h.encode(&mut body);
    }
    r.encode(&mut body);
    let mut out = Vec::new();
    out.put_i32(body.len() as i32);
    out.extend_from_slice(&body);
    out
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn session(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out_ms: 10000,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: false,
    };
    s.write_all(&frame(None, &req)).unwrap();
    let resp: ConnectResponse = decode_all(&read_frame(&mut s).unwrap()).unwrap();
    assert_ne!(resp.session_id, 0);
    s
}

fn create(s: &mut TcpStream, xid: i32, path: &str, data: Vec<u8>) -> ReplyHeader {
    let req = CreateRequest {
        path: path.into(),
        data: Some(Bytes::from(data)),
        acl: vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }],
        flags: 0,
    };
    s.write_all(&frame(Some(RequestHeader { xid, op_type: 1 }), &req))
        .unwrap();
    let body = read_frame(s).unwrap();
    let mut d = Decoder::new(&body);
    ReplyHeader::decode(&mut d).unwrap()
}

fn is_closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(s.read(&mut buf), Ok(0) | Err(_))
}

#[test]
fn malformed_records_are_refused_and_oversized_packets_close_only_their_connection() {
    let keel = start("");
    let mut good = session(keel.port);
    assert_eq!(create(&mut good, 1, "/ok", b"v".to_vec()).err, 0);

    // Garbage after the handshake: a create whose ACL count runs past the packet.
    let mut bad = session(keel.port);
    let mut pkt = Vec::new();
    pkt.put_i32(16);
    pkt.put_i32(1); // xid
    pkt.put_i32(1); // create
    pkt.put_i32(1); // path length 1 ...
    pkt.put_u8(b'/');
    pkt.extend_from_slice(&[0xff, 0xff, 0x7f]);
    bad.write_all(&pkt).unwrap();
    // ZooKeeper 3.8 answers a known opcode whose record does not decode with
    // MARSHALLINGERROR and keeps the connection (measured; rawdiff cases opcodes.py).
    let body = read_frame(&mut bad).unwrap();
    let header = ReplyHeader::decode(&mut Decoder::new(&body)).unwrap();
    assert_eq!(
        (header.xid, header.err),
        (1, -5),
        "MARSHALLINGERROR for xid 1"
    );
    assert_eq!(
        create(&mut bad, 2, "/after-bad", vec![]).err,
        0,
        "connection kept"
    );

    // A frame longer than jute.maxbuffer (0xfffff).
    let mut big = session(keel.port);
    assert_eq!(
        create(&mut big, 1, "/half", vec![7u8; 512 * 1024]).err,
        0,
        "512 KB fits"
    );
    let mut huge = Vec::new();
    huge.put_i32(2 * 1024 * 1024);
    huge.extend_from_slice(&[0u8; 64]);
    big.write_all(&huge).unwrap();
    assert!(
        is_closed(&mut big),
        "oversized packet must close the connection"
    );

    // The first connection is untouched.
    assert_eq!(create(&mut good, 2, "/still", vec![]).err, 0);
    assert_eq!(create(&mut good, 3, "/still", vec![]).err, -110);
}

#[test]
fn four_letter_words_answer_in_one_write_and_follow_the_whitelist() {
    let keel = start("");
    let ask = |word: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", keel.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(word.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    assert_eq!(ask("ruok"), "imok");
    let srvr = ask("srvr");
    assert!(srvr.starts_with("Zookeeper version: 3.8.0"), "{srvr}");
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(
        ask("envi"),
        "envi is not executed because it is not in the whitelist.\n"
    );
}

#[test]
fn conf_counts_keels_data_and_log_files() {
    let keel = start("4lw.commands.whitelist=conf");
    // The first txn opens the txn log (a fresh ZooKeeper has no log file either).
    let mut client = session(keel.port);
    assert_eq!(create(&mut client, 1, "/a", b"x".to_vec()).err, 0);
    let mut s = TcpStream::connect(("127.0.0.1", keel.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"conf").unwrap();
    let mut conf = String::new();
    s.read_to_string(&mut conf).unwrap();
    let size = |key: &str| -> u64 {
        let line = conf.lines().find(|l| l.starts_with(key)).expect(key);
        line[key.len() + 1..].parse().unwrap()
    };
    // The snapshot store (keel-db) and the preallocated txn log segment (keel-txnlog).
    assert!(size("dataDirSize") > 0, "{conf}");
    assert!(size("dataLogSize") >= 1 << 20, "{conf}");
}

#[test]
fn bad_config_names_key_and_line() {
    let dir = temp_dir("badcfg");
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!("dataDir={}\nclientPort=2181\ntickTime=abc\n", dir.display()),
    )
    .unwrap();
    let (status, err) = run_to_exit(&cfg);
    assert!(!status.success());
    assert!(err.contains("tickTime") && err.contains("line 3"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A zoo.cfg in `dir` for a 3-member ensemble on free loopback ports, with `data` as
/// its dataDir; its path.
fn ensemble_cfg(dir: &std::path::Path, data: &std::path::Path) -> PathBuf {
    let cfg = dir.join("zoo.cfg");
    let mut text = format!(
        "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={}\n\
         admin.enableServer=false\n",
        data.display(),
        free_port()
    );
    for sid in 1..=3 {
        text += &format!("server.{sid}=127.0.0.1:{}:{}\n", free_port(), free_port());
    }
    std::fs::write(&cfg, text).unwrap();
    cfg
}

#[test]
fn an_ensemble_member_without_its_server_line_is_refused() {
    let dir = temp_dir("ensemble-cfg");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    // ZooKeeper 3.8: "My id 4 not in the peer list".
    std::fs::write(data.join("myid"), "4\n").unwrap();
    let cfg = ensemble_cfg(&dir, &data);
    let (status, err) = run_to_exit(&cfg);
    assert!(!status.success());
    assert!(
        err.contains("myid is 4") && err.contains("no server.4 line"),
        "{err}"
    );
    assert!(
        !data.join("keel-db").exists(),
        "nothing is written to the dataDir of a refused start"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_stops_within_two_seconds() {
    let mut keel = start("");
    let _s = session(keel.port);
    let t0 = Instant::now();
    Command::new("kill")
        .arg("-TERM")
        .arg(keel.child.id().to_string())
        .status()
        .unwrap();
    loop {
        if let Some(status) = keel.child.try_wait().unwrap() {
            assert!(status.success(), "clean exit, got {status}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "still running 2 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn silent_admin_connections_are_closed_after_admin_idle_timeout() {
    let admin_port = free_port();
    let keel = start(&format!(
        "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin_port}\nadmin.idleTimeout=500"
    ));
    // Half a request, then silence: the slot must come back (ZooKeeper's Jetty idle
    // timeout), or a few such clients would lock monitoring out.
    let mut silent = TcpStream::connect(("127.0.0.1", admin_port)).unwrap();
    silent
        .write_all(b"GET /commands/ruok HTTP/1.1\r\n")
        .unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    let n = silent
        .read(&mut buf)
        .expect("closed, not timed out on our side");
    assert_eq!(n, 0, "expected the server to close the idle connection");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "closed too early: {waited:?}"
    );
    // A whole request on a fresh connection is still answered.
    let mut http = TcpStream::connect(("127.0.0.1", admin_port)).unwrap();
    http.write_all(b"GET /commands/ruok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    http.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"command\""), "{reply}");
    drop(keel);
}

/// A member whose txn log skips a zxid after its snapshot (a damaged store, or one an
/// older keel's learner wrote) is refused at start-up with the zxids around the hole
/// named, and loses nothing: the store still holds every txn it held (RocksDB's own
/// open may flush its WAL into a table file; the records are the same).
#[test]
fn an_ensemble_member_whose_txn_log_has_a_hole_is_refused() {
    use keel::storage::zab::ZabStore;
    use keel::zab::{zxid, Txn};
    let dir = temp_dir("ensemble-hole");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("myid"), "1\n").unwrap();
    let txns: Vec<Txn> = [1, 2, 4]
        .into_iter()
        .map(|c| Txn {
            zxid: zxid(1, c),
            data: Bytes::from_static(b"txn"),
        })
        .collect();
    {
        let mut store = ZabStore::open(&data, &data, true).unwrap();
        store.try_append(&txns).unwrap();
        store.try_sync().unwrap();
    }
    let cfg = ensemble_cfg(&dir, &data);
    let (status, err) = run_to_exit_within(&cfg, Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| !s.success()),
        "started on a log with a hole ({status:?}): {err}"
    );
    assert!(
        err.contains("skips from zxid 0x100000002 to 0x100000004"),
        "the hole named: {err}"
    );
    let after = ZabStore::open(&data, &data, true)
        .unwrap()
        .try_recover()
        .unwrap();
    assert_eq!(after.log, txns, "the refused store still holds its txns");
    assert_eq!(after.snapshot_zxid, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
