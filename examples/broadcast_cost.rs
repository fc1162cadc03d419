//! What a write costs a 3-member ensemble's consensus core and state machines, without
//! the runtime: the same [`Replica`]s a member runs (Zab, prep, apply, the replies),
//! in one thread, every peer message encoded and decoded as on the wire (PROPOSAL, ACK,
//! COMMIT, REQUEST), every append durable as soon as the queue of messages is empty
//! (a group commit per round). No sockets, threads, clock or disk: those are the
//! runtime's costs, which `compat-tests/bench/profile_ensemble.sh` measures.
//!
//! Why: a member's CPU per write is the figure issue 16's throughput targets rest on,
//! and the ensemble benchmark's run-to-run noise (10-15 %) hides the 1-3 % that most
//! single changes to the core are worth. Here the work is deterministic: run it under
//! callgrind for instructions per write, nearly the same count every time (two runs
//! differed by 0.001 %: the ACL cache's HashMap is seeded at random).
//!
//!     cargo build --release --example broadcast_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out --collect-atstart=no \
//!         --toggle-collect='*measured*' $CARGO_TARGET_DIR/release/examples/broadcast_cost set
//!     callgrind_annotate /tmp/cg.out | head -40
//!
//! Arguments: the phase (`create`, `set` or `delete`), the number of writes (50,000)
//! and of znodes (5,000). One client session on a follower keeps 256 writes in flight
//! on znodes of 100 bytes, as zkload 4 x 64 does; `set` first creates the znodes
//! (uncounted), then sets znodes picked at random (a fixed sequence), so most sets, as
//! in zkload's set phase, find a znode set before; `delete` creates as many znodes as
//! it then deletes.
//! The count includes the harness's own work: building each request (path, record,
//! decode: about 4 %), a buffer per peer message (the runtime's cork writes a turn's
//! messages for a peer into one), the in-memory log's copy of each txn, and reading
//! the replies. Compare counts between builds; the absolute figure overstates what the
//! members cost. It prints the writes, the rounds they took, and the wall time per
//! write (a rough figure; callgrind's instruction count is the one to compare).

use bytes::{Bytes, BytesMut};
use jute::{ConnectRequest, CreateRequest, DeleteRequest, Record, SetDataRequest};
use keel::member::replica::{Effect, Replica};
use keel::proto::request::Request;
use keel::server::{self, Outbound, Settings};
use keel::zab::message::{Message, ServerState};
use keel::zab::quorum::QuorumVerifier;
use keel::zab::storage::{MemStorage, ZabStorage};
use keel::zab::wire::packet::{Limits, QuorumPacket};
use keel::zab::wire::quorum::{encode_message, from_packet, Inbound, Side};
use keel::zab::{Action, Config, Sid};
use std::collections::VecDeque;
use std::time::Instant;

/// The server's allocator (`src/main.rs`): allocation is a good part of a write's cost,
/// and glibc's costs differ.
#[global_allocator]
static ALLOCATOR: keel::allocator::Allocator = keel::allocator::Allocator;

/// Writes in flight from the one client session.
const IN_FLIGHT: usize = 256;
/// The client's connection id on the follower.
const CONN: u64 = 1;
/// Milliseconds between the ticks the members get while they elect a leader.
const TICK_MS: u64 = 5;

struct Member {
    replica: Replica,
    storage: MemStorage,
    /// The last zxid appended and not yet reported durable.
    unsynced: Option<i64>,
}

struct Ensemble {
    members: Vec<Member>,
    /// Peer messages in flight, each as the bytes its QuorumPacket takes on the wire
    /// (election notifications and the sync's messages as values).
    wire: VecDeque<(Sid, Sid, Wire)>,
    now_ms: u64,
    /// Frames the client's connection got, not yet read.
    to_client: Vec<Bytes>,
}

enum Wire {
    Bytes(Bytes),
    Value(Message),
}

impl Ensemble {
    fn new() -> Ensemble {
        let mut e = Ensemble {
            members: Vec::new(),
            wire: VecDeque::new(),
            now_ms: 1_000_000,
            to_client: Vec::new(),
        };
        let mut membership = String::new();
        for sid in 1..=3u32 {
            membership.push_str(&format!(
                "server.{sid}=127.0.0.1:{}:{}:participant\n",
                2888 + sid,
                3888 + sid
            ));
        }
        membership.push_str("version=0");
        let mut started = Vec::new();
        for sid in 1..=3 {
            let storage = MemStorage::new();
            let config = Config::new(sid, QuorumVerifier::new(1..=3, []), 500, 10, 5);
            let (replica, effects) = Replica::new(
                config,
                Settings::default(),
                storage.recover(),
                &storage.snapshot().1,
                Bytes::from(membership.clone()),
                e.now_ms,
                sid,
            )
            .expect("a replica starts");
            e.members.push(Member {
                replica,
                storage,
                unsynced: None,
            });
            started.push((sid, effects));
        }
        for (sid, effects) in started {
            e.execute(sid, effects);
        }
        e
    }

    fn m(&mut self, sid: Sid) -> &mut Member {
        &mut self.members[sid as usize - 1]
    }

    fn side(&self, sid: Sid) -> Side {
        if self.members[sid as usize - 1].replica.peer().state() == ServerState::Leading {
            Side::Leader
        } else {
            Side::Learner
        }
    }

    /// Runs `effects`, then hands the emptied vector back to the replica for its next
    /// ones, as the runtime does.
    fn execute(&mut self, sid: Sid, mut effects: Vec<Effect>) {
        for effect in effects.drain(..) {
            match effect {
                Effect::Zab(Action::Send { to, msg }) => {
                    let wire = if msg.is_steady() {
                        // One buffer per message, with room for the usual one (the
                        // runtime's cork puts a turn's messages for a peer in one).
                        let mut out = BytesMut::with_capacity(4096);
                        encode_message(&msg, self.side(sid), &mut out).expect("encodes");
                        Wire::Bytes(out.freeze())
                    } else {
                        Wire::Value(msg)
                    };
                    self.wire.push_back((sid, to, wire));
                }
                Effect::Zab(Action::AppendTxns { txns, .. }) => {
                    let m = self.m(sid);
                    m.storage.append(&txns);
                    m.unsynced = txns.last().map(|t| t.zxid as i64).or(m.unsynced);
                }
                Effect::Zab(Action::PersistAcceptedEpoch { epoch }) => {
                    self.m(sid).storage.set_accepted_epoch(epoch)
                }
                Effect::Zab(Action::PersistCurrentEpoch { epoch }) => {
                    self.m(sid).storage.set_current_epoch(epoch)
                }
                Effect::Zab(Action::TruncateLog { after }) => {
                    self.m(sid).storage.truncate_after(after)
                }
                Effect::Zab(Action::InstallSnapshot { zxid, snapshot }) => {
                    self.m(sid).storage.install_snapshot(zxid, snapshot)
                }
                Effect::Zab(other) => panic!("member {sid}: unexpected {other:?}"),
                Effect::Client { conn, out } => {
                    assert_eq!(conn, CONN, "only the one client connects");
                    if let Outbound::Packet(p) = out {
                        self.to_client.push(p);
                    }
                }
                Effect::Storage(_) => {}
                Effect::Halt { reason } => panic!("member {sid} halted: {reason}"),
            }
        }
        self.m(sid).replica.recycle(effects);
    }

    /// Delivers every message in flight (and those they cause), then reports each
    /// member's appends durable; returns whether anything happened.
    fn round(&mut self) -> bool {
        let mut busy = false;
        while let Some((from, to, wire)) = self.wire.pop_front() {
            busy = true;
            let msg = match wire {
                Wire::Value(msg) => msg,
                Wire::Bytes(b) => {
                    let (packet, used) = QuorumPacket::decode(&b, Limits::default())
                        .expect("decodes")
                        .expect("whole");
                    assert_eq!(used, b.len());
                    match from_packet(packet).expect("a message") {
                        Inbound::Message(m) => m,
                        Inbound::Snap { .. } => unreachable!("SNAP is not steady"),
                    }
                }
            };
            let now = self.now_ms;
            let effects = self.m(to).replica.message(now, from, msg);
            self.execute(to, effects);
        }
        for sid in 1..=3 {
            let m = self.m(sid);
            let Some(zxid) = m.unsynced.take() else {
                continue;
            };
            busy = true;
            m.storage.sync();
            let now = self.now_ms;
            let effects = self.m(sid).replica.durable(now, zxid as u64);
            self.execute(sid, effects);
        }
        busy
    }

    fn tick(&mut self) {
        self.now_ms += TICK_MS;
        for sid in 1..=3 {
            let now = self.now_ms;
            let effects = self.m(sid).replica.tick(now);
            self.execute(sid, effects);
        }
    }

    fn follower(&self) -> Sid {
        (1..=3)
            .find(|&s| {
                self.members[s as usize - 1].replica.peer().state() == ServerState::Following
            })
            .expect("a follower")
    }

    fn client(&mut self, sid: Sid, input: server::Input) {
        let now = self.now_ms;
        let effects = self.m(sid).replica.client(now, input);
        self.execute(sid, effects);
    }
}

fn encode<R: Record>(r: &R) -> Bytes {
    let mut b = BytesMut::new();
    r.encode(&mut b);
    b.freeze()
}

/// A persistent create of `path` open to everyone.
fn create_request(path: String, data: Option<Bytes>) -> CreateRequest {
    CreateRequest {
        path,
        data,
        acl: keel::tree::acl::open_acl(),
        flags: 0,
    }
}

/// The request of write number `i` of `phase`, as its opcode and record bytes.
fn write(phase: &str, i: usize, keys: usize, data: &Bytes) -> (i32, Bytes) {
    let key = if phase == "set" {
        // A fixed pseudo-random walk over the znodes (Knuth's MMIX LCG).
        let x = (i as u64 + 1)
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize % keys
    } else {
        i
    };
    let path = format!("/w/n{key:08}");
    match phase {
        "create" => (1, encode(&create_request(path, Some(data.clone())))),
        "set" => (
            5,
            encode(&SetDataRequest {
                path,
                data: Some(data.clone()),
                version: -1,
            }),
        ),
        "delete" => (2, encode(&DeleteRequest { path, version: -1 })),
        other => panic!("unknown phase {other} (create, set or delete)"),
    }
}

/// Runs writes `0..n` (`request` gives each one's opcode and record) from the client on
/// member `at`, `IN_FLIGHT` at a time; returns the rounds they took.
fn run_phase(
    e: &mut Ensemble,
    at: Sid,
    n: usize,
    xid: &mut i32,
    request: impl Fn(usize) -> (i32, Bytes),
) -> u64 {
    let (mut sent, mut answered, mut rounds) = (0, 0, 0u64);
    while answered < n {
        while sent < n && sent - answered < IN_FLIGHT {
            let (opcode, body) = request(sent);
            *xid += 1;
            let req = Request::decode(opcode, &body).expect("a request");
            e.client(
                at,
                server::Input::Request {
                    conn: CONN,
                    xid: *xid,
                    opcode,
                    req,
                    body,
                },
            );
            sent += 1;
        }
        assert!(e.round(), "writes in flight but nothing moves");
        rounds += 1;
        for frame in std::mem::take(&mut e.to_client) {
            // [length][xid][zxid][err]: a watch event (xid -1) is not an answer.
            let xid = i32::from_be_bytes(frame[4..8].try_into().expect("a header"));
            let err = i32::from_be_bytes(frame[16..20].try_into().expect("a header"));
            if xid > 0 {
                assert_eq!(err, 0, "write {xid} failed");
                answered += 1;
            }
        }
    }
    rounds
}

/// The counted phase, a function of its own so that callgrind can count only it
/// (`--collect-atstart=no --toggle-collect='*measured*'`).
#[inline(never)]
fn measured(e: &mut Ensemble, at: Sid, n: usize, keys: usize, phase: &str, xid: &mut i32) -> u64 {
    let data = Bytes::from(vec![b'x'; 100]);
    run_phase(e, at, n, xid, |i| write(phase, i, keys, &data))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let phase = args.get(1).map_or("set", String::as_str);
    let n: usize = args.get(2).map_or(50_000, |s| s.parse().expect("a count"));
    let keys: usize = args.get(3).map_or(5_000, |s| s.parse().expect("a count"));
    let mut e = Ensemble::new();
    // Elect: deliver until quiet, ticking, until there is a leader and two followers.
    for _ in 0..10_000 {
        while e.round() {}
        let states: Vec<ServerState> = e.members.iter().map(|m| m.replica.peer().state()).collect();
        let leading = states
            .iter()
            .filter(|s| **s == ServerState::Leading)
            .count();
        let following = states
            .iter()
            .filter(|s| **s == ServerState::Following)
            .count();
        if leading == 1 && following == 2 {
            break;
        }
        e.tick();
    }
    let f = e.follower();
    e.client(
        f,
        server::Input::Connected {
            conn: CONN,
            addr: "127.0.0.1:5000".parse().expect("an address"),
        },
    );
    e.client(
        f,
        server::Input::Handshake {
            conn: CONN,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out_ms: 30_000,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: false,
            },
        },
    );
    for _ in 0..10_000 {
        if !e.to_client.is_empty() {
            break;
        }
        if !e.round() {
            e.tick();
        }
    }
    assert_eq!(e.to_client.len(), 1, "the session is connected");
    e.to_client.clear();
    let mut xid = 0;
    let data = Bytes::from(vec![b'x'; 100]);
    run_phase(&mut e, f, 1, &mut xid, |_| {
        (1, encode(&create_request("/w".into(), None)))
    });
    match phase {
        "set" => run_phase(&mut e, f, keys, &mut xid, |i| {
            write("create", i, keys, &data)
        }),
        "delete" => run_phase(&mut e, f, n, &mut xid, |i| write("create", i, n, &data)),
        _ => 0,
    };
    let t0 = Instant::now();
    let rounds = measured(&mut e, f, n, keys, phase, &mut xid);
    let secs = t0.elapsed().as_secs_f64();
    // Only sets use the znodes argument; a create or delete phase has one znode per write.
    let znodes = if phase == "set" { keys } else { n };
    println!(
        "phase={phase} writes={n} znodes={znodes} rounds={rounds} wall_ns_per_write={:.0}",
        secs * 1e9 / n as f64
    );
}
