//! ZooKeeper's tree digest and DataTree serialization against real ZooKeeper 3.8
//! (ports 3400-3449):
//! - a script of creates (persistent, sequential, ephemeral, container, TTL, with ACLs,
//!   under /zookeeper/quota), sets, setACLs, deletes and a failed create runs on
//!   ZooKeeper up to zxid 0x100; ZooKeeper is killed and restarted (it writes
//!   snapshot.100 at start-up). keel's digest of the tree read from that file equals
//!   the digest ZooKeeper wrote into it, the one its `hash` word logged for 0x100, and
//!   the digest of the tree its clients see;
//! - the same script on keel: `hash` and the AdminServer `hash` command answer in
//!   ZooKeeper's shape for the same zxids, with the digest of the tree keel's clients
//!   see (values differ from ZooKeeper's only through ctime and mtime);
//! - keel writes a snapshot file from its own tree into an empty dataDir; ZooKeeper
//!   starts on it, serves the same znodes (paths, data, ACLs, every Stat field) and
//!   counts no digest mismatch; a file with a wrong digest makes it count one.
//!
//! Skips, saying why, when ZooKeeper (/usr/share/java/zookeeper.jar) is not installed.

mod common;

use bytes::Bytes;
use common::{ruok, Client, CreateMode, TempDir};
use jute::{
    Acl, CreateRequest, CreateTtlRequest, Decoder, GetAclResponse, Id, PathRequest, Record,
    SetAclRequest, Stat,
};
use keel::proto::opcode as op;
use keel::tree::digest::node_digest;
use keel::tree::znode::{CONTAINER_OWNER, TTL_MASK};
use keel::tree::{acl::open_acl, DataTree, ZnodeMeta};
use keel::zab::wire::snap::write_snapshot_file;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The TTL of the script's TTL node, ms.
const TTL_MS: i64 = 3_600_000;

fn have_zookeeper() -> bool {
    if Path::new(ZOOKEEPER_JAR).exists() {
        return true;
    }
    eprintln!("skipped: ZooKeeper is not installed ({ZOOKEEPER_JAR} missing)");
    false
}

/// ZooKeeper's classpath as Debian installs it (/work/shared/tools/realzk-exec.sh),
/// with Jetty and Jackson for its AdminServer (compat-tests/admin/run.sh): without them
/// it runs without one.
fn zk_classpath() -> String {
    let jars = [
        "zookeeper",
        "zookeeper-jute",
        "slf4j-api",
        "slf4j-simple",
        "netty-handler",
        "netty-common",
        "netty-buffer",
        "netty-transport",
        "netty-codec",
        "netty-resolver",
        "netty-transport-native-epoll",
        "netty-transport-native-unix-common",
        "metrics-core",
        "commons-cli",
        "snappy-java",
        "commons-io",
        "jline",
        "jetty9-server",
        "jetty9-servlet",
        "jetty9-util",
        "jetty9-http",
        "jetty9-io",
        "jetty9-security",
        "jetty9-util-ajax",
        "servlet-api",
        "jackson-core",
        "jackson-databind",
        "jackson-annotations",
    ];
    jars.map(|j| format!("/usr/share/java/{j}.jar")).join(":")
}

/// A server process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts ZooKeeper (`zk`) or keel on `dir/data`, client port `port`, AdminServer on
/// `port + 1`; waits for `ruok`.
fn start(zk: bool, dir: &Path, port: u16) -> Proc {
    let cfg = dir.join("zoo.cfg");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=true\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort={}\nextendedTypesEnabled=true\n\
             maxSessionTimeout=600000\n",
            dir.join("data").display(),
            port + 1
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join(if zk { "zk.log" } else { "keel.log" })).unwrap();
    let mut cmd = if zk {
        let mut c = Command::new("/usr/bin/java");
        c.arg("-Xmx256m")
            .arg("-cp")
            .arg(zk_classpath())
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain");
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_keel"))
    };
    let child = cmd
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn the server");
    let p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    // `ruok` answers before ZooKeeper serves; `srvr` says when it does.
    while !ruok(port) || word(port, "srvr").contains("not currently serving") {
        assert!(Instant::now() < deadline, "not serving on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    p
}

/// A four-letter word's answer.
fn word(port: u16, w: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // ZooKeeper can leave a word asked while it starts unanswered and open.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(w.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The AdminServer command `name` as JSON.
fn admin(port: u16, name: &str) -> serde_json::Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /commands/{name} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}: {out}"))
}

/// `hash`'s lines as (zxid, digest).
fn hash_lines(text: &str) -> Vec<(i64, i64)> {
    text.lines()
        .map(|l| {
            let (z, d) = l
                .split_once(": ")
                .unwrap_or_else(|| panic!("hash line {l:?}"));
            (i64::from_str_radix(z, 16).unwrap(), d.parse().unwrap())
        })
        .collect()
}

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

fn guarded() -> Vec<Acl> {
    vec![
        acl(31, "digest", "u:Eq8iQ8eK6aT0bL6vX2gkM3m3mWc="),
        // ADMIN for the test's client, so ZooKeeper shows it the digest ids unmasked.
        acl(31, "ip", "127.0.0.1"),
    ]
}

fn create(
    c: &mut Client,
    opcode: i32,
    path: &str,
    data: &[u8],
    acl: Vec<Acl>,
    flags: i32,
) -> Result<Vec<u8>, i32> {
    let req = CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl,
        flags,
    };
    c.call(opcode, &|b| req.encode(b))
}

fn set_acl(c: &mut Client, path: &str, acl: Vec<Acl>) {
    let req = SetAclRequest {
        path: path.into(),
        acl,
        version: -1,
    };
    c.call(op::SET_ACL, &|b| req.encode(b)).unwrap();
}

/// The script, on a fresh server, ending at zxid 0x100 with the session left open.
fn script(c: &mut Client) {
    c.create("/app", Some(b"v1"), CreateMode::Persistent)
        .unwrap();
    for _ in 0..3 {
        c.create("/app/seq-", Some(b"s"), CreateMode::PersistentSequential)
            .unwrap();
    }
    c.create("/app/e", Some(b"eph"), CreateMode::Ephemeral)
        .unwrap();
    c.create("/app/null", None, CreateMode::Persistent).unwrap();
    create(c, op::CREATE, "/guarded", b"g", guarded(), 0).unwrap();
    create(c, op::CREATE_CONTAINER, "/box", b"", open_acl(), 4).unwrap();
    c.create("/box/x", Some(b"in a box"), CreateMode::Persistent)
        .unwrap();
    let ttl = CreateTtlRequest {
        path: "/ttl".into(),
        data: Some(Bytes::from_static(b"t")),
        acl: open_acl(),
        flags: 5,
        ttl_ms: TTL_MS,
    };
    c.call(op::CREATE_TTL, &|b| ttl.encode(b)).unwrap();
    c.create(
        "/zookeeper/quota/q",
        Some(b"left out"),
        CreateMode::Persistent,
    )
    .unwrap();
    c.set_data("/app", Some(b"v2"), -1).unwrap();
    c.delete("/app/seq-0000000001", -1).unwrap();
    c.create("/gone", None, CreateMode::Persistent).unwrap();
    c.delete("/gone", -1).unwrap();
    // A failed write takes a zxid too.
    assert!(c.create("/app", None, CreateMode::Persistent).is_err());
    set_acl(
        c,
        "/app/null",
        vec![acl(31, "world", "anyone"), acl(1, "ip", "10.0.0.0/8")],
    );
    c.create("/pad", None, CreateMode::Persistent).unwrap();
    while c.last_zxid() < 0x100 {
        c.set_data("/pad", Some(format!("{}", c.last_zxid()).as_bytes()), -1)
            .unwrap();
    }
    assert_eq!(c.last_zxid(), 0x100);
}

/// Every znode a client sees: path -> (data, ACL, Stat).
type Dump = BTreeMap<String, (Option<Vec<u8>>, Vec<Acl>, Stat)>;

fn dump(c: &mut Client) -> Dump {
    let mut out = Dump::new();
    let mut todo = vec!["/".to_string()];
    while let Some(p) = todo.pop() {
        let (data, _) = c.get_data(&p, false).unwrap();
        let req = PathRequest { path: p.clone() };
        let body = c.call(op::GET_ACL, &|b| req.encode(b)).unwrap();
        let r: GetAclResponse = Decoder::new(&body).record().unwrap();
        for child in c.get_children(&p, false).unwrap() {
            todo.push(if p == "/" {
                format!("/{child}")
            } else {
                format!("{p}/{child}")
            });
        }
        out.insert(p, (data, r.acl, r.stat));
    }
    out
}

/// ZooKeeper's digest of the tree `d` shows (the script's container and TTL node
/// given their stored ephemeralOwner, which clients see as 0).
fn digest_of(d: &Dump) -> i64 {
    d.iter().fold(0i64, |sum, (p, (data, _, s))| {
        let owner = match p.as_str() {
            "/box" => CONTAINER_OWNER,
            "/ttl" => TTL_MASK | TTL_MS,
            _ => s.ephemeral_owner,
        };
        let meta = ZnodeMeta {
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            // Clients see creates + deletes; the digest hashes the stored creates.
            child_creates: (s.cversion + s.num_children) / 2,
            aversion: s.aversion,
            ephemeral_owner: owner,
        };
        sum.wrapping_add(node_digest(
            p.as_bytes(),
            data.as_deref().unwrap_or(&[]),
            &meta,
        ))
    })
}

fn snapshot_file(dir: &Path, zxid: i64) -> PathBuf {
    dir.join("data/version-2")
        .join(format!("snapshot.{zxid:x}"))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn digests_match_zookeepers_snapshot_hash_and_admin_shapes() {
    if !have_zookeeper() {
        return;
    }
    // ZooKeeper: the script, then its `hash` and the tree its client sees.
    let zk_dir = TempDir::new("snap-zk");
    let zk = start(true, &zk_dir.path, 3401);
    let mut c = Client::connect(3401, 600_000).unwrap();
    script(&mut c);
    let zk_dump = dump(&mut c);
    let zk_hash = hash_lines(&word(3401, "hash"));
    let zk_admin = admin(3402, "hash");
    c.abandon();
    drop(zk);
    // Restarted, it replays its log and writes snapshot.100 before serving.
    let zk = start(true, &zk_dir.path, 3401);
    let snap_path = snapshot_file(&zk_dir.path, 0x100);
    wait_for("snapshot.100", || snap_path.exists());
    drop(zk);
    let bytes = std::fs::read(&snap_path).unwrap();
    let snap = keel::import::snapshot::parse(&bytes, 0x100, &mut |_| {}).unwrap();
    let mut tree = DataTree::empty();
    for (p, n) in &snap.nodes {
        tree.insert_loaded(p, n.data.as_deref(), &n.acl, &n.meta());
    }
    tree.finish_loading();
    let written = snap.digest.expect("ZooKeeper 3.8 writes a digest");
    eprintln!(
        "ZooKeeper snapshot.100: digest {} (version {}, zxid 0x{:x}); keel's digest of its tree {}; ZooKeeper's hash: {zk_hash:?}",
        written.digest, written.version, written.zxid, tree.digest()
    );
    assert_eq!((written.zxid, written.version), (0x100, 2));
    assert_eq!(
        tree.digest(),
        written.digest,
        "keel's digest of ZooKeeper's snapshot"
    );
    assert_eq!(zk_hash, [(0x80, zk_hash[0].1), (0x100, written.digest)]);
    assert_eq!(
        digest_of(&zk_dump),
        written.digest,
        "the digest of what ZooKeeper serves"
    );
    // The ephemeral, the container, the TTL node and the excluded quota node are there.
    for p in ["/app/e", "/box", "/ttl", "/zookeeper/quota/q", "/guarded"] {
        assert!(tree.get(p).is_some(), "{p}");
    }

    // keel: the same script; the same shapes, its own values.
    let keel_dir = TempDir::new("snap-keel");
    let keel = start(false, &keel_dir.path, 3411);
    let mut c = Client::connect(3411, 600_000).unwrap();
    script(&mut c);
    let keel_dump = dump(&mut c);
    let keel_hash = hash_lines(&word(3411, "hash"));
    let keel_admin = admin(3412, "hash");
    c.abandon();
    drop(keel);
    eprintln!("keel's hash: {keel_hash:?}\nZooKeeper's admin hash: {zk_admin}\nkeel's admin hash: {keel_admin}");
    let zxids = |h: &[(i64, i64)]| h.iter().map(|e| e.0).collect::<Vec<_>>();
    assert_eq!(zxids(&keel_hash), zxids(&zk_hash));
    assert_eq!(
        keel_hash[1].1,
        digest_of(&keel_dump),
        "keel's hash is the digest of what it serves"
    );
    assert_eq!(
        keel_dump.keys().collect::<Vec<_>>(),
        zk_dump.keys().collect::<Vec<_>>()
    );
    // The AdminServer answers: the same keys and zxids, the digests `hash` printed.
    let shape = |v: &serde_json::Value| -> Vec<(Vec<String>, serde_json::Value)> {
        v["digests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let keys = d.as_object().unwrap().keys().cloned().collect();
                (keys, d["zxid"].clone())
            })
            .collect()
    };
    assert_eq!(shape(&keel_admin), shape(&zk_admin));
    let top = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(top(&keel_admin), top(&zk_admin));
    for (v, h) in [(&zk_admin, &zk_hash), (&keel_admin, &keel_hash)] {
        let got: Vec<i64> = v["digests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["digest"].as_i64().unwrap())
            .collect();
        assert_eq!(got, h.iter().map(|e| e.1).collect::<Vec<_>>());
    }
}

/// A tree built with keel's own mutations: every kind of znode, ACLs, data, deletes.
fn keel_tree(now_ms: i64) -> (DataTree, Vec<(i64, i32)>, i64) {
    let mut t = DataTree::new();
    let open = Arc::new(open_acl());
    let guarded = Arc::new(guarded());
    let session = 0x1000_0000_0000_0001;
    let mut z = 0x2_0000_0000;
    let mut next = || {
        z += 1;
        z
    };
    t.create("/a", Some(b"alpha"), &open, 0, 1, next(), now_ms)
        .unwrap();
    t.create("/a/b", None, &guarded, 0, 1, next(), now_ms + 1)
        .unwrap();
    t.create("/a/e", Some(b"mine"), &open, session, 2, next(), now_ms + 2)
        .unwrap();
    t.create(
        "/a-b",
        Some(&[0, 1, 2, 255]),
        &open,
        0,
        2,
        next(),
        now_ms + 3,
    )
    .unwrap();
    t.create(
        "/box",
        Some(b""),
        &open,
        CONTAINER_OWNER,
        3,
        next(),
        now_ms + 4,
    )
    .unwrap();
    t.create("/box/in", None, &open, 0, 1, next(), now_ms + 5)
        .unwrap();
    t.create(
        "/ttl",
        Some(b"t"),
        &open,
        TTL_MASK | TTL_MS,
        4,
        next(),
        now_ms + 6,
    )
    .unwrap();
    t.create("/zookeeper/quota/q", None, &open, 0, 1, next(), now_ms + 7)
        .unwrap();
    t.create("/a/gone", None, &open, 0, 3, next(), now_ms + 8)
        .unwrap();
    t.delete("/a/gone", next()).unwrap();
    t.set_data("/a", Some(b"alpha2"), 1, next(), now_ms + 9)
        .unwrap();
    t.set_acl("/a-b", &guarded, 1).unwrap();
    (t, vec![(session, 600_000)], z)
}

#[test]
fn zookeeper_starts_on_a_snapshot_file_keel_wrote() {
    if !have_zookeeper() {
        return;
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (tree, sessions, zxid) = keel_tree(now_ms);
    let dir = TempDir::new("snap-zk-from-keel");
    std::fs::create_dir_all(dir.path.join("data/version-2")).unwrap();
    std::fs::write(
        snapshot_file(&dir.path, zxid),
        write_snapshot_file(&tree, &sessions, zxid),
    )
    .unwrap();
    let zk = start(true, &dir.path, 3421);
    let mut c = Client::connect(3421, 30_000).unwrap();
    let served = dump(&mut c);
    let mntr = word(3421, "mntr");
    let srvr = word(3421, "srvr");
    c.close().unwrap();
    drop(zk);
    let mut want = Dump::new();
    for e in tree.nodes_after(None) {
        let n = e.node();
        want.insert(
            e.path(),
            (
                n.data().map(<[u8]>::to_vec),
                tree.acl(n).as_ref().clone(),
                n.stat(),
            ),
        );
    }
    // Null data reads back as null, empty as empty: both are kept apart.
    assert_eq!(served, want);
    // It took up from the snapshot's zxid: the client's createSession is the next.
    assert!(
        srvr.contains(&format!("Zxid: 0x{:x}\n", zxid + 1)),
        "{srvr}"
    );
    assert!(mntr.contains("zk_digest_mismatches_count\t0\n"), "{mntr}");
    let log = std::fs::read_to_string(dir.path.join("zk.log")).unwrap();
    assert!(!log.contains("Digests are not matching"), "{log}");

    // Teeth: the same file with a digest one off is a mismatch ZooKeeper counts.
    let dir = TempDir::new("snap-zk-bad-digest");
    std::fs::create_dir_all(dir.path.join("data/version-2")).unwrap();
    let mut file = write_snapshot_file(&tree, &sessions, zxid).to_vec();
    // The digest is the long before the last seal (8 + 4 + 1 bytes); fix up that seal.
    let n = file.len();
    let at = n - 13 - 8;
    let d = i64::from_be_bytes(file[at..at + 8].try_into().unwrap()).wrapping_add(1);
    file[at..at + 8].copy_from_slice(&d.to_be_bytes());
    let sum = keel::import::input::adler32(&file[..n - 13]);
    file[n - 13..n - 5].copy_from_slice(&sum.to_be_bytes());
    std::fs::write(snapshot_file(&dir.path, zxid), &file).unwrap();
    let zk = start(true, &dir.path, 3431);
    let mntr = word(3431, "mntr");
    drop(zk);
    assert!(mntr.contains("zk_digest_mismatches_count\t1\n"), "{mntr}");
}
