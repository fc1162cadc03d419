//! keel's peer runtime (`keel::net::peer`) on real loopback sockets (ports 3300-3399,
//! each test its own):
//! three Zab cores (`keel::zab::Peer`) with in-memory storage, each run by a small loop
//! in this file that feeds ticks (real time) and executes actions, talk only through
//! `PeerNet`:
//! - they elect a leader, it establishes its epoch, a proposal commits on all three;
//!   the leader's runtime is dropped, the other two elect a new leader and commit; the
//!   old leader restarts on its storage, rejoins and catches up; all three stop and
//!   restart from local snapshots, one with its store wiped, which rejoins by SNAP;
//! - garbage, truncated and oversized bytes on a member's election and quorum ports
//!   close only that connection: the leader and its epoch stay and the ensemble keeps
//!   committing;
//! - two members dialing each other at once end with exactly one election connection,
//!   the one the larger sid opened;
//! - a peer that stops reading fills its queue and loses its connection (reported),
//!   while another peer gets every message and the sender never waits;
//! - a learner's messages read at once reach the core in order, and once the core closes
//!   the connection amid them, none of the rest does;
//! - with quorum TLS (`sslQuorum`, ports 17800-17899), two members with certificates
//!   from the trust store exchange notifications, while one with an untrusted CA's
//!   certificate and one in plaintext are heard by neither and hear neither.
//!
//! Deadlines are generous (liveness only); nothing asserts a duration.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use keel::config::ServerSpec;
use keel::net::peer::tls::PeerTls;
use keel::net::peer::{PeerInbox, PeerNet, PeerParams};
use keel::zab::message::{Message, Notification, ServerState};
use keel::zab::quorum::QuorumVerifier;
use keel::zab::storage::{read_for_diff, MemStorage, ZabStorage};
use keel::zab::wire::election::{ElectionAddress, InitialMessage};
use keel::zab::wire::packet::{Limits, QuorumPacket};
use keel::zab::wire::quorum::{encode_message, Side, PROTOCOL_VERSION};
use keel::zab::{Action, Config, Input, Peer, RoleChange, Sid, Txn, Zxid};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// tickTime: syncLimit 5 ticks is a second without the leader before re-electing.
const TICK_MS: u64 = 200;
const DEADLINE: Duration = Duration::from_secs(60);

/// The runtime's log lines in the test output (`RUST_LOG` overrides: keel at warn).
fn logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("keel=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

fn quorum_port(base: u16, sid: Sid) -> u16 {
    base + 2 * sid as u16
}

fn election_port(base: u16, sid: Sid) -> u16 {
    quorum_port(base, sid) + 1
}

fn servers(base: u16, n: Sid) -> Vec<ServerSpec> {
    (1..=n)
        .map(|id| ServerSpec {
            id,
            host: "127.0.0.1".into(),
            quorum_port: quorum_port(base, id),
            election_port: election_port(base, id),
            observer: false,
            client_address: None,
            client_port: None,
        })
        .collect()
}

fn params() -> PeerParams {
    PeerParams {
        cnx_timeout: Duration::from_secs(2),
        quorum_connect_timeout: Duration::from_secs(2),
        reconnect_max: Duration::from_millis(500),
        ..PeerParams::default()
    }
}

/// Starts a member's PeerNet, retrying while a dropped predecessor's ports are still
/// being released.
async fn start_net(sid: Sid, servers: &[ServerSpec]) -> (PeerNet, PeerInbox) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match PeerNet::start(sid, servers, params()).await {
            Ok(r) => return r,
            Err(e) if Instant::now() < until => {
                eprintln!("server.{sid}: start: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("server.{sid} cannot start: {e}"),
        }
    }
}

/// The state a snapshot carries here: the applied txns, as the data of the root znode
/// of a ZooKeeper DataTree stream (no sessions, no ACLs, the root, then "/"), so the
/// runtime can find its end as it finds a real one.
fn snapshot_of(applied: &[Txn]) -> Bytes {
    let mut data = BytesMut::new();
    for t in applied {
        data.put_u64(t.zxid);
        data.put_u32(t.data.len() as u32);
        data.put_slice(&t.data);
    }
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_i32(0);
    b.put_i32(0);
    b.put_i32(data.len() as i32);
    b.put_slice(&data);
    b.put_i64(-1);
    b.put_slice(&[0; 60]);
    b.put_i32(1);
    b.put_u8(b'/');
    b.freeze()
}

fn applied_of(snapshot: &[u8]) -> Vec<Txn> {
    if snapshot.is_empty() {
        return Vec::new();
    }
    let mut b = &snapshot[12..];
    let len = b.get_i32() as usize;
    let mut data = &b[..len];
    let mut out = Vec::new();
    while data.has_remaining() {
        let zxid = data.get_u64();
        let n = data.get_u32() as usize;
        out.push(Txn {
            zxid,
            data: Bytes::copy_from_slice(&data[..n]),
        });
        data.advance(n);
    }
    out
}

/// What a member shows the test.
#[derive(Default)]
struct Status {
    role: Option<RoleChange>,
    applied: Vec<Txn>,
    /// How many times the runtime reported each peer's quorum connection lost.
    disconnects: BTreeMap<Sid, u64>,
    /// How many SNAPs the member installed.
    snapshots: u64,
}

impl Status {
    fn has(&self, payload: &[u8]) -> bool {
        self.applied.iter().any(|t| &t.data[..] == payload)
    }
}

/// One member: its storage survives its runtime.
struct Member {
    sid: Sid,
    storage: Arc<Mutex<MemStorage>>,
    status: Arc<Mutex<Status>>,
    propose: Option<mpsc::Sender<Bytes>>,
    task: Option<JoinHandle<()>>,
}

/// The loop that runs one Zab core over a PeerNet, executing its actions at once
/// (storage syncs on every append).
struct Runner {
    peer: Peer,
    net: PeerNet,
    storage: Arc<Mutex<MemStorage>>,
    status: Arc<Mutex<Status>>,
    applied_zxid: Zxid,
    epoch: Instant,
}

impl Runner {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn step(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            if let Input::Disconnected { peer } = input {
                *self.status.lock().disconnects.entry(peer).or_default() += 1;
            }
            let actions = self.peer.step(self.now(), input);
            self.execute(actions, &mut inputs);
        }
    }

    fn execute(&mut self, actions: Vec<Action>, inputs: &mut VecDeque<Input>) {
        for a in actions {
            let mut storage = self.storage.lock();
            match a {
                Action::Send { to, msg } => {
                    if matches!(msg, Message::Diff { .. } | Message::Trunc { .. }) {
                        eprintln!("server.{}: to {to}: {msg:?}", self.peer.sid());
                    }
                    self.net.send(to, msg)
                }
                Action::SendSnapshot { to, zxid } => {
                    let snapshot = snapshot_of(&self.status.lock().applied);
                    eprintln!("server.{}: SNAP to {to} at {zxid:#x}", self.peer.sid());
                    self.net.send(to, Message::Snap { zxid, snapshot });
                }
                Action::CloseConnection { peer } => self.net.close(peer),
                Action::Deliver { .. } => {}
                Action::ReadLog {
                    peer,
                    after,
                    upto,
                    snapshot_size_factor,
                } => {
                    let txns = read_for_diff(&*storage, after, upto, snapshot_size_factor);
                    inputs.push_back(Input::LogRead { peer, after, txns });
                }
                Action::AppendTxns { txns, .. } => {
                    storage.append(&txns);
                    let zxid = storage.sync();
                    inputs.push_back(Input::Durable { zxid });
                }
                Action::PersistAcceptedEpoch { epoch } => storage.set_accepted_epoch(epoch),
                Action::PersistCurrentEpoch { epoch } => storage.set_current_epoch(epoch),
                Action::TruncateLog { after } => storage.truncate_after(after),
                Action::InstallSnapshot { zxid, snapshot } => {
                    storage.install_snapshot(zxid, snapshot.clone());
                    let mut status = self.status.lock();
                    status.applied = applied_of(&snapshot);
                    status.snapshots += 1;
                    eprintln!(
                        "server.{}: installed {zxid:#x}: {:?}",
                        self.peer.sid(),
                        status.applied
                    );
                    self.applied_zxid = zxid;
                }
                Action::Commit { upto } => {
                    let txns = storage.read_range(self.applied_zxid, upto);
                    self.applied_zxid = upto;
                    self.status.lock().applied.extend(txns);
                }
                Action::Proposed { .. } | Action::ProposeRefused => {}
                Action::ConfigSeen { .. } | Action::ConfigActivated { .. } => {}
                Action::RoleChanged(rc) => {
                    eprintln!("server.{}: {rc:?}", self.peer.sid());
                    self.status.lock().role = Some(rc);
                }
            }
        }
    }
}

async fn run_member(
    sid: Sid,
    servers: Vec<ServerSpec>,
    storage: Arc<Mutex<MemStorage>>,
    status: Arc<Mutex<Status>>,
    mut proposals: mpsc::Receiver<Bytes>,
) {
    let (net, mut inbox) = start_net(sid, &servers).await;
    let participants: Vec<Sid> = servers.iter().map(|s| s.id).collect();
    let config = Config::new(sid, QuorumVerifier::new(participants, []), TICK_MS, 10, 5);
    let (recovered, snapshot) = {
        let s = storage.lock();
        (s.recover(), s.snapshot())
    };
    *status.lock() = Status {
        applied: applied_of(&snapshot.1),
        ..Status::default()
    };
    let epoch = Instant::now();
    let (peer, actions) = Peer::new(config, recovered, 0);
    let mut r = Runner {
        peer,
        net,
        storage,
        status,
        applied_zxid: snapshot.0,
        epoch,
    };
    let mut pending = VecDeque::new();
    r.execute(actions, &mut pending);
    while let Some(i) = pending.pop_front() {
        r.step(i);
    }
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS / 2));
    loop {
        let input = tokio::select! {
            _ = tick.tick() => Input::Tick,
            i = inbox.recv() => i,
            Some(txn) = proposals.recv() => Input::Propose { txn },
        };
        r.step(input);
    }
}

impl Member {
    fn new(sid: Sid) -> Member {
        Member {
            sid,
            storage: Arc::new(Mutex::new(MemStorage::new())),
            status: Arc::default(),
            propose: None,
            task: None,
        }
    }

    fn start(&mut self, servers: &[ServerSpec]) {
        let (tx, rx) = mpsc::channel(16);
        self.propose = Some(tx);
        self.task = Some(tokio::spawn(run_member(
            self.sid,
            servers.to_vec(),
            self.storage.clone(),
            self.status.clone(),
            rx,
        )));
    }

    /// Drops the member's runtime (its PeerNet and every socket with it).
    async fn kill(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
        self.propose = None;
        self.status.lock().role = None;
    }

    fn role(&self) -> Option<RoleChange> {
        self.status.lock().role
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < until, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the running members have one established leader that all the others
/// serve; its sid and epoch.
async fn settled(members: &[Member]) -> (Sid, u32) {
    let mut found = (0, 0);
    eventually("one established leader, served by the others", || {
        let running: Vec<&Member> = members.iter().filter(|m| m.task.is_some()).collect();
        let leaders: Vec<(Sid, u32)> = running
            .iter()
            .filter_map(|m| match m.role() {
                Some(RoleChange::LeaderEstablished { epoch }) => Some((m.sid, epoch)),
                _ => None,
            })
            .collect();
        let [(leader, epoch)] = leaders[..] else {
            return false;
        };
        found = (leader, epoch);
        running
            .iter()
            .filter(|m| m.sid != leader)
            .all(|m| m.role() == Some(RoleChange::LearnerServing { leader, epoch }))
    })
    .await;
    found
}

/// Proposes `payload` on the leader until every running member has applied it.
async fn commit_everywhere(members: &[Member], leader: Sid, payload: &'static [u8]) {
    let m = &members[leader as usize - 1];
    m.propose
        .as_ref()
        .expect("the leader runs")
        .send(Bytes::from_static(payload))
        .await
        .expect("the leader's loop runs");
    eventually(
        &format!(
            "{:?} applied on every running member",
            String::from_utf8_lossy(payload)
        ),
        || {
            members
                .iter()
                .filter(|m| m.task.is_some())
                .all(|m| m.status.lock().has(payload))
        },
    )
    .await;
}

fn applied_zxids(m: &Member) -> Vec<Zxid> {
    m.status.lock().applied.iter().map(|t| t.zxid).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_elects_commits_survives_its_leader_and_takes_it_back() {
    logs();
    let servers = servers(3300, 3);
    let mut members: Vec<Member> = (1..=3).map(Member::new).collect();
    for m in &mut members {
        m.start(&servers);
    }
    let (leader, epoch) = settled(&members).await;
    eprintln!("leader {leader} in epoch {epoch}");
    commit_everywhere(&members, leader, b"first").await;

    members[leader as usize - 1].kill().await;
    let (second, epoch2) = settled(&members).await;
    assert_ne!(second, leader);
    assert!(epoch2 > epoch, "a new epoch: {epoch2} after {epoch}");
    commit_everywhere(&members, second, b"second").await;

    members[leader as usize - 1].start(&servers);
    let old = &members[leader as usize - 1];
    eventually("the old leader catches up", || {
        let s = old.status.lock();
        s.has(b"first") && s.has(b"second")
    })
    .await;
    let (third, _) = settled(&members).await;
    commit_everywhere(&members, third, b"third").await;

    // Every member stops, each with a local snapshot of what it applied (its txn log
    // now starts after it); all restart, one with its dataDir wiped: it rejoins by
    // SNAP, whose stream crosses the wire after the SNAP packet and is found whole.
    for m in &mut members {
        m.kill().await;
        let applied = m.status.lock().applied.clone();
        let zxid = applied.last().map_or(0, |t| t.zxid);
        m.storage.lock().save_snapshot(zxid, snapshot_of(&applied));
    }
    let wiped = &mut members[third as usize % 3];
    wiped.storage = Arc::new(Mutex::new(MemStorage::new()));
    for m in &mut members {
        m.start(&servers);
    }
    let wiped = &members[third as usize % 3];
    eventually("the wiped member catches up by SNAP", || {
        let s = wiped.status.lock();
        s.snapshots > 0 && s.has(b"first") && s.has(b"second") && s.has(b"third")
    })
    .await;
    let (fourth, _) = settled(&members).await;
    commit_everywhere(&members, fourth, b"fourth").await;
    let want = applied_zxids(&members[0]);
    for m in &members {
        assert_eq!(applied_zxids(m), want, "server.{} applied the same", m.sid);
    }
    for m in &mut members {
        m.kill().await;
    }
}

/// Reads until the member closes the connection; panics if it does not.
async fn closed_by_member(mut s: TcpStream, what: &str) {
    let closed = tokio::time::timeout(DEADLINE, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the member kept the connection: {what}");
}

async fn dial(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect")
}

/// Sends `bytes` on a new connection to `port`, half-closes it when `then_eof`, and
/// checks the member closes it.
async fn abuse(port: u16, bytes: &[u8], then_eof: bool, what: &str) {
    let mut s = dial(port).await;
    s.write_all(bytes).await.expect("write");
    if then_eof {
        s.shutdown().await.expect("shutdown");
    }
    closed_by_member(s, what).await;
    eprintln!("closed: {what}");
}

fn hello(sid: Sid) -> Bytes {
    InitialMessage::v1(
        sid,
        ElectionAddress {
            host: "127.0.0.1".into(),
            port: 3399,
        },
    )
    .encode()
    .unwrap()
}

fn follower_info(sid: Sid) -> BytesMut {
    let mut b = BytesMut::new();
    let msg = Message::FollowerInfo {
        accepted_epoch: 0,
        sid,
        protocol_version: PROTOCOL_VERSION,
        config_version: 0,
    };
    encode_message(&msg, Side::Learner, &mut b).unwrap();
    b
}

/// An ensemble of four server lines with server.4 never started: its sid is the one
/// the test's own connections claim, so they never displace a real member's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bytes_on_either_port_close_only_that_connection() {
    logs();
    let base = 3320;
    let servers = servers(base, 4);
    let mut members: Vec<Member> = (1..=3).map(Member::new).collect();
    for m in &mut members {
        m.start(&servers);
    }
    let (leader, epoch) = settled(&members).await;
    commit_everywhere(&members, leader, b"before").await;
    let follower = (1..=3).find(|&s| s != leader).unwrap();

    for target in [leader, follower] {
        let ep = election_port(base, target);
        abuse(ep, &[0xde; 64], false, "election: garbage initial message").await;
        abuse(
            ep,
            &hello(4)[..10],
            true,
            "election: truncated initial message",
        )
        .await;
        let mut long_address = BytesMut::new();
        long_address.put_i64(-65536);
        long_address.put_i64(4);
        long_address.put_i32(5000);
        abuse(ep, &long_address, false, "election: oversized address").await;
        let mut frame = BytesMut::from(&hello(4)[..]);
        frame.put_i32(100);
        frame.put_slice(&[7; 10]);
        abuse(ep, &frame, true, "election: truncated frame").await;
        let mut frame = BytesMut::from(&hello(4)[..]);
        frame.put_i32(600_000);
        abuse(ep, &frame, false, "election: frame over PACKETMAXSIZE").await;
        let mut garbage = BytesMut::from(&hello(4)[..]);
        garbage.put_slice(&[0xff; 32]);
        abuse(ep, &garbage, false, "election: garbage frame").await;
    }
    let qp = quorum_port(base, leader);
    abuse(qp, &[0xde; 64], false, "quorum: garbage first packet").await;
    let fi = follower_info(4);
    abuse(
        qp,
        &fi[..fi.len() / 2],
        true,
        "quorum: truncated FOLLOWERINFO",
    )
    .await;
    // Past its first packet a connection is server.4's to the leader's core: the
    // runtime, not the core (which would close it only after initLimit, unreported),
    // must end it and report it lost.
    let lost_4 = || {
        members[leader as usize - 1]
            .status
            .lock()
            .disconnects
            .get(&4)
            .copied()
            .unwrap_or(0)
    };
    let mut big = follower_info(4);
    big.put_i32(2);
    big.put_i64(0);
    big.put_i32(3 << 20);
    let mut cut = follower_info(4);
    cut.put_i32(2);
    cut.put_i64(0);
    cut.put_i32(100);
    cut.put_slice(&[1; 10]);
    let mut odd = follower_info(4);
    odd.put_slice(&[0xde; 40]);
    for (bytes, eof, what) in [
        (big, false, "quorum: data over jute.maxbuffer"),
        (cut, true, "quorum: truncated PROPOSAL"),
        (odd, false, "quorum: garbage after FOLLOWERINFO"),
    ] {
        let before = lost_4();
        abuse(qp, &bytes, eof, what).await;
        eventually(&format!("{what}: reported lost by the runtime"), || {
            lost_4() > before
        })
        .await;
    }

    commit_everywhere(&members, leader, b"after").await;
    assert_eq!(
        settled(&members).await,
        (leader, epoch),
        "the leader and its epoch stand"
    );
    for m in &mut members {
        m.kill().await;
    }
}

fn vote(sid: Sid) -> Message {
    Message::Notification(Notification {
        state: ServerState::Looking,
        leader: sid,
        zxid: 0,
        election_epoch: 1,
        peer_epoch: 0,
        config: Bytes::new(),
    })
}

/// Waits for a notification from `from`.
async fn heard(inbox: &mut PeerInbox, from: Sid) {
    let got = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Input::Message { from: f, .. } = inbox.recv().await {
                if f == from {
                    return;
                }
            }
        }
    })
    .await;
    assert!(got.is_ok(), "no notification from {from}");
}

fn same_connection(a: Option<SocketAddr>, b: Option<SocketAddr>) -> bool {
    a.is_some() && a == b
}

async fn both<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_dialing_each_other_keep_one_election_connection() {
    logs();
    let base = 3340;
    let servers = servers(base, 2);
    let ((mut n1, mut in1), (mut n2, mut in2)) =
        both(start_net(1, &servers), start_net(2, &servers)).await;
    for round in 0..3 {
        n1.send(2, vote(1));
        n2.send(1, vote(2));
        both(heard(&mut in1, 2), heard(&mut in2, 1)).await;
        let (l1, l2) = (n1.election_link(2), n2.election_link(1));
        let (Some(l1), Some(l2)) = (l1, l2) else {
            panic!("round {round}: a side has no election connection: {l1:?} {l2:?}");
        };
        assert!(
            same_connection(Some(l1.local), Some(l2.remote))
                && same_connection(Some(l1.remote), Some(l2.local)),
            "round {round}: both ends of one connection: {l1:?} {l2:?}"
        );
        assert_eq!(
            l1.local.port(),
            election_port(base, 1),
            "server.2 (the larger sid) opened it"
        );
        assert_eq!(
            (l1.connections, l2.connections),
            (1, 1),
            "round {round}: one connection ever, on each side"
        );
    }
}

/// A fake leader's quorum port.
async fn bind(port: u16) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind a fake leader's quorum port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_loses_its_connection_and_delays_no_other() {
    logs();
    let base = 3360;
    let servers = servers(base, 3);
    let (mut net, mut inbox) = PeerNet::start(
        1,
        &servers,
        PeerParams {
            queue_bytes: 4 << 20,
            ..params()
        },
    )
    .await
    .expect("start");
    let info = |sid| Message::FollowerInfo {
        accepted_epoch: 0,
        sid,
        protocol_version: PROTOCOL_VERSION,
        config_version: 0,
    };
    let (l2, l3) = (
        bind(quorum_port(base, 2)).await,
        bind(quorum_port(base, 3)).await,
    );
    net.send(2, info(1));
    net.send(3, info(1));
    let ((stalled, _), (mut reading, _)) = (l2.accept().await.unwrap(), l3.accept().await.unwrap());
    const COMMITS: u64 = 200;
    let big = Bytes::from(vec![7u8; 512 * 1024]);
    for zxid in 1..=COMMITS {
        net.send(
            2,
            Message::Request {
                session_id: 1,
                cxid: zxid as i32,
                opcode: 1,
                body: big.clone(),
                auth: Vec::new(),
            },
        );
        net.send(3, Message::Ack { zxid });
    }
    let lost = tokio::time::timeout(DEADLINE, inbox.recv()).await;
    assert!(
        matches!(lost, Ok(Input::Disconnected { peer: 2 })),
        "the stalled peer's connection is reported lost: {lost:?}"
    );
    let got = tokio::time::timeout(DEADLINE, async {
        let mut buf = BytesMut::new();
        let mut acks = 0;
        loop {
            while let Some((p, used)) =
                QuorumPacket::decode(&buf, Limits::default()).expect("well-formed packets")
            {
                buf.advance(used);
                acks += u64::from(p.kind == 3);
            }
            if acks == COMMITS {
                return acks;
            }
            if reading.read_buf(&mut buf).await.expect("read") == 0 {
                return acks;
            }
        }
    })
    .await;
    assert_eq!(
        got.ok(),
        Some(COMMITS),
        "every ACK reached the reading peer"
    );
    drop(stalled);
}

/// [`params`] with quorum TLS, presenting the key store `store` of
/// `tests/data/tls/quorum/` (see the README there) and trusting its `ca.pem`.
fn tls_params(store: &str) -> PeerParams {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/quorum");
    let mut config = keel::config::Config {
        ssl_quorum: true,
        ..keel::config::Config::default()
    };
    config.quorum_ssl.key_store_location = Some(format!("{dir}/{store}.pem").into());
    config.quorum_ssl.trust_store_location = Some(format!("{dir}/ca.pem").into());
    PeerParams {
        tls: PeerTls::from_config(&config).expect("the fixtures' stores load"),
        ..params()
    }
}

/// Drains `inbox` for `window`; fails on a notification from one of `refused`.
async fn hears_none_of(inbox: &mut PeerInbox, refused: &[Sid], window: Duration, who: Sid) {
    let _ = tokio::time::timeout(window, async {
        loop {
            if let Input::Message { from, .. } = inbox.recv().await {
                assert!(
                    !refused.contains(&from),
                    "server.{who} heard server.{from}, which should be refused"
                );
            }
        }
    })
    .await;
}

/// Starts members 1-4 of `servers` with `params` (in sid order), then checks that 1 and
/// 2 link while every pair with 3 or 4 is refused both ways for a few reconnect rounds
/// (`what` names why, for the messages), and that the refusals cost 1-2 nothing.
async fn only_members_1_and_2_link(
    servers: Vec<ServerSpec>,
    params: [PeerParams; 4],
    what: &str,
) -> Vec<(PeerNet, PeerInbox)> {
    let mut members = Vec::new();
    for (sid, p) in (1..).zip(params) {
        let started = PeerNet::start(sid, &servers, p).await;
        members.push(started.unwrap_or_else(|e| panic!("server.{sid} cannot start: {e}")));
    }
    let [(n1, in1), (n2, in2), (n3, in3), (n4, in4)] = &mut members[..] else {
        unreachable!("four members");
    };
    for _ in 0..2 {
        n1.send(2, vote(1));
        n2.send(1, vote(2));
        both(heard(in1, 2), heard(in2, 1)).await;
    }
    assert!(n1.election_link(2).is_some(), "1 and 2 linked ({what})");
    for _ in 0..3 {
        for (net, me) in [(&mut *n1, 1), (&mut *n2, 2)] {
            net.send(3, vote(me));
            net.send(4, vote(me));
        }
        for (net, me) in [(&mut *n3, 3), (&mut *n4, 4)] {
            net.send(1, vote(me));
            net.send(2, vote(me));
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let window = Duration::from_millis(1500);
    tokio::join!(
        hears_none_of(in1, &[3, 4], window, 1),
        hears_none_of(in2, &[3, 4], window, 2),
        hears_none_of(in3, &[1, 2], window, 3),
        hears_none_of(in4, &[1, 2], window, 4),
    );
    for (net, me) in [(&*n1, 1), (&*n2, 2)] {
        for other in [3, 4] {
            assert!(
                net.election_link(other).is_none(),
                "server.{me} has no connection up to refused server.{other} ({what})"
            );
        }
    }
    n1.send(2, vote(1));
    heard(in2, 1).await;
    assert_eq!(n1.election_link(2).map(|l| l.connections), Some(1));
    members
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_tls_links_trusted_members_and_refuses_the_others() {
    logs();
    // 3 presents an untrusted CA's certificate, 4 speaks plaintext.
    let params = [
        tls_params("member"),
        tls_params("member"),
        tls_params("intruder"),
        params(),
    ];
    only_members_1_and_2_link(servers(17800, 4), params, "quorum TLS").await;
}

/// [`params`] with quorum SASL enabled and required both ways, logging in as user
/// `test` with `password` (the server side knows `test` / `mypassword`).
fn sasl_params(password: &str) -> PeerParams {
    let jaas = keel::sasl::jaas::JaasConfig::parse(&format!(
        "QuorumServer {{ org.apache.zookeeper.server.auth.DigestLoginModule required \
         user_test=\"mypassword\"; }};\n\
         QuorumLearner {{ org.apache.zookeeper.server.auth.DigestLoginModule required \
         username=\"test\" password=\"{password}\"; }};"
    ))
    .unwrap();
    let settings = keel::sasl::quorum::QuorumSaslSettings {
        enabled: true,
        server_require: true,
        learner_require: true,
        ..Default::default()
    };
    PeerParams {
        sasl: Some(Arc::new(
            keel::sasl::quorum::QuorumSasl::from_jaas(settings, &jaas).unwrap(),
        )),
        ..params()
    }
}

/// Waits for a quorum message from `from`.
async fn heard_on_quorum(inbox: &mut PeerInbox, from: Sid, within: Duration) -> bool {
    tokio::time::timeout(within, async {
        loop {
            if let Input::Message {
                from: f,
                msg: Message::FollowerInfo { .. },
            } = inbox.recv().await
            {
                if f == from {
                    return;
                }
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_sasl_links_members_with_credentials_and_refuses_the_others() {
    logs();
    // 3 logs in with a wrong password, 4 has no quorum SASL.
    let params = [
        sasl_params("mypassword"),
        sasl_params("mypassword"),
        sasl_params("wrong"),
        params(),
    ];
    let mut members = only_members_1_and_2_link(servers(17850, 4), params, "quorum SASL").await;
    let [(_, in1), (n2, _), (n3, _), (n4, _)] = &mut members[..] else {
        unreachable!("four members");
    };
    // The quorum port: a learner with credentials reaches the leader's inbox with its
    // FOLLOWERINFO; the wrong password's and the one without SASL do not.
    let info = |sid| Message::FollowerInfo {
        accepted_epoch: 0,
        sid,
        protocol_version: PROTOCOL_VERSION,
        config_version: 0,
    };
    n3.send(1, info(3));
    n4.send(1, info(4));
    assert!(!heard_on_quorum(in1, 3, Duration::from_millis(1500)).await);
    assert!(!heard_on_quorum(in1, 4, Duration::from_millis(500)).await);
    n2.send(1, info(2));
    assert!(
        heard_on_quorum(in1, 2, Duration::from_secs(10)).await,
        "server.2's FOLLOWERINFO reached server.1 after SASL"
    );
}

/// A learner's new quorum connection replaces its old one: the core's non-waiting
/// drain (`PeerInbox::try_recv`) reports the old one gone and then stops at the new
/// one's first message, which only `recv` hands over. The core executes the sends it
/// decided for the old connection in between (corked or not), and they are dropped;
/// taking the new one in the same drain would have put them on the new connection
/// ahead of LEADERINFO. Once handed over, the new connection gets what is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_drain_stops_at_a_new_connection() {
    logs();
    let base = 3380;
    let servers = servers(base, 2);
    let (leader, mut inbox) = start_net(1, &servers).await;
    let (mut learner, mut learner_inbox) = start_net(2, &servers).await;
    let info = Message::FollowerInfo {
        accepted_epoch: 0,
        sid: 2,
        protocol_version: PROTOCOL_VERSION,
        config_version: 0,
    };
    learner.send(1, info.clone());
    assert!(
        heard_on_quorum(&mut inbox, 2, DEADLINE).await,
        "no FOLLOWERINFO on the first connection"
    );
    // A second FOLLOWERINFO opens a new connection, replacing the first; a PING
    // follows it on the new one.
    learner.send(1, info);
    learner.send(
        1,
        Message::Ping {
            zxid: 0,
            touched: Vec::new(),
        },
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut drained = Vec::new();
    while let Some(input) = inbox.try_recv() {
        drained.push(input);
    }
    assert!(
        matches!(drained[..], [Input::Disconnected { peer: 2 }]),
        "the drain should report the old connection gone and stop: {drained:?}"
    );
    // What the core sends now was meant for the replaced connection: dropped, not put
    // on the new one, which the core has not been handed.
    let mut leader = leader;
    leader.send_corked(2, Message::Commit { zxid: 7 });
    leader.send(2, Message::Commit { zxid: 8 });
    leader.flush();
    // Then `recv` hands over the new connection's FOLLOWERINFO (type 11), then its
    // PING (type 5).
    for want in [11, 5] {
        let next = tokio::time::timeout(DEADLINE, inbox.recv()).await;
        let kind = match &next {
            Ok(Input::Message { from: 2, msg }) => msg.packet_type(),
            _ => None,
        };
        assert_eq!(kind, Some(want), "{next:?}");
    }
    let heard = commit_heard(&mut learner_inbox, Duration::from_millis(500)).await;
    assert_eq!(heard, None, "a COMMIT reached the new connection");
    // Once handed over, the connection is the core's: a COMMIT now reaches it, corked
    // or not.
    leader.send_corked(2, Message::Commit { zxid: 9 });
    leader.flush();
    assert_eq!(commit_heard(&mut learner_inbox, DEADLINE).await, Some(9));
}

/// The zxid of the first COMMIT `inbox` gets within `within`.
async fn commit_heard(inbox: &mut PeerInbox, within: Duration) -> Option<Zxid> {
    tokio::time::timeout(within, async {
        loop {
            if let Input::Message {
                msg: Message::Commit { zxid },
                ..
            } = inbox.recv().await
            {
                return zxid;
            }
        }
    })
    .await
    .ok()
}

/// A learner's messages that one read brings reach the core one input each and in
/// order; when the core closes the connection between two of them, the rest, already
/// decoded and queued in the inbox, is lost with the connection (Zab's stream has no gaps: a message may be lost only with its
/// connection, never skipped on one that goes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_amid_one_reads_messages_delivers_none_after() {
    logs();
    let base = 3390;
    let servers = servers(base, 2);
    let (net, mut inbox) = start_net(1, &servers).await;
    const SENT: u64 = 200;
    const TAKEN: u64 = 150;
    let mut bytes = follower_info(2);
    for zxid in 1..=SENT {
        encode_message(&Message::Ack { zxid }, Side::Learner, &mut bytes).unwrap();
    }
    // One write: the member reads the lot at once (about 5 KB), so the ACKs after the
    // 150th are in the inbox, decoded, when the core closes the connection.
    let mut learner = dial(quorum_port(base, 1)).await;
    learner.write_all(&bytes).await.expect("write");
    assert!(matches!(
        message_from_2(&mut inbox).await,
        Message::FollowerInfo { sid: 2, .. }
    ));
    // Every ACK but the first taken as the core drains, without waiting.
    let mut acks = vec![message_from_2(&mut inbox).await];
    while (acks.len() as u64) < TAKEN {
        match inbox.try_recv() {
            Some(Input::Message { from: 2, msg }) => acks.push(msg),
            Some(other) => panic!("not a message from server.2: {other:?}"),
            None => acks.push(message_from_2(&mut inbox).await),
        }
    }
    let want: Vec<Message> = (1..=TAKEN).map(|zxid| Message::Ack { zxid }).collect();
    assert_eq!(acks, want, "the ACKs in the order sent");
    net.close(2);
    let after = tokio::time::timeout(Duration::from_millis(500), inbox.recv()).await;
    assert!(
        after.is_err(),
        "after the core closed the connection the inbox gave {after:?}"
    );
}

/// The next input, which must be a message from server.2.
async fn message_from_2(inbox: &mut PeerInbox) -> Message {
    match tokio::time::timeout(DEADLINE, inbox.recv()).await {
        Ok(Input::Message { from: 2, msg }) => msg,
        other => panic!("not a message from server.2: {other:?}"),
    }
}
