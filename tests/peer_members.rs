//! keel's peer runtime (`keel::net::peer`) following dynamic membership (ZooKeeper
//! 3.5+ reconfig) on real loopback sockets, ports 25000-25399, each test its own
//! (below Linux's ephemeral range, so no outgoing connection of a parallel test can
//! hold one of them):
//! - a server not in a member's config that dials in is heard and answered on the
//!   election port, whichever sid is larger (the tie-break keeps its connection, or the
//!   member dials back at the address its initial message gave), and its learner
//!   connection to the member's quorum port is accepted;
//! - after `set_members` names a new server, the member dials it on its own; a server
//!   left out loses its election link;
//! - when a server's addresses move, the election connection to the old address is
//!   closed and the new one dialed, and a learner connection goes to the new quorum
//!   port;
//! - a member whose own line moves listens at its new election and quorum ports and
//!   no longer at the old ones;
//! - unlisted sids are bounded on both ports: election links that went away make room
//!   for new ones, learners past the bound are refused.
//!
//! Every check is a message received or a connection closed; deadlines are generous
//! (liveness only) and nothing asserts a duration.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use keel::config::ServerSpec;
use keel::net::peer::{PeerInbox, PeerNet, PeerParams};
use keel::zab::message::{Message, Notification, ServerState};
use keel::zab::wire::config::ServerLine;
use keel::zab::wire::election::{decode_frame, decode_notification, InitialMessage};
use keel::zab::wire::quorum::PROTOCOL_VERSION;
use keel::zab::{Input, Sid};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_secs(30);

fn logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("keel=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// server.`sid` with its quorum port at `base + 2 * sid` and election port next to it.
fn spec(base: u16, sid: Sid) -> ServerSpec {
    ServerSpec {
        id: sid,
        host: "127.0.0.1".into(),
        quorum_port: base + 2 * sid as u16,
        election_port: base + 2 * sid as u16 + 1,
        observer: false,
        client_address: None,
        client_port: None,
    }
}

fn specs(base: u16, sids: &[Sid]) -> Vec<ServerSpec> {
    sids.iter().map(|&sid| spec(base, sid)).collect()
}

fn lines(specs: &[ServerSpec]) -> Vec<ServerLine> {
    specs.iter().map(ServerLine::from).collect()
}

fn params() -> PeerParams {
    PeerParams {
        cnx_timeout: Duration::from_secs(2),
        quorum_connect_timeout: Duration::from_secs(2),
        reconnect_max: Duration::from_millis(500),
        ..PeerParams::default()
    }
}

async fn start(sid: Sid, servers: &[ServerSpec]) -> (PeerNet, PeerInbox) {
    PeerNet::start(sid, servers, params())
        .await
        .unwrap_or_else(|e| panic!("server.{sid} cannot start: {e}"))
}

/// A LOOKING vote for `sid` in round `round`.
fn vote(sid: Sid, round: u64) -> Message {
    Message::Notification(Notification {
        state: ServerState::Looking,
        leader: sid,
        zxid: 0,
        election_epoch: round,
        peer_epoch: 0,
        config: bytes::Bytes::new(),
    })
}

fn follower_info(sid: Sid) -> Message {
    Message::FollowerInfo {
        accepted_epoch: 0,
        sid,
        protocol_version: PROTOCOL_VERSION,
        config_version: 0,
    }
}

/// Waits for a message from `from` that `want` accepts, skipping others.
async fn received(inbox: &mut PeerInbox, from: Sid, what: &str, want: impl Fn(&Message) -> bool) {
    let got = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Input::Message { from: f, msg } = inbox.recv().await {
                if f == from && want(&msg) {
                    return;
                }
            }
        }
    })
    .await;
    assert!(got.is_ok(), "{what}: nothing from server.{from}");
}

/// Waits for `from`'s vote in `round`.
async fn heard(inbox: &mut PeerInbox, from: Sid, round: u64, what: &str) {
    received(
        inbox,
        from,
        what,
        |m| matches!(m, Message::Notification(n) if n.election_epoch == round),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_in_the_config_is_heard_and_answered_and_may_sync() {
    logs();
    let base = 25000;
    // server.2 knows only itself and server.3; server.1 (a smaller sid) and server.4 (a
    // larger one) are joining and know all four.
    let old = specs(base, &[2, 3]);
    let all = specs(base, &[1, 2, 3, 4]);
    let (mut a, mut a_in) = start(2, &old).await;
    let (_b, mut b_in) = start(3, &old).await;
    let (mut c, mut c_in) = start(1, &all).await;
    let (mut d, mut d_in) = start(4, &all).await;

    a.send(3, vote(2, 1));
    heard(&mut b_in, 2, 1, "the configured member").await;

    // server.4 dials and, the larger sid, keeps its connection.
    d.send(2, vote(4, 2));
    heard(&mut a_in, 4, 2, "a larger unlisted sid dialed").await;
    a.send(4, vote(2, 3));
    heard(&mut d_in, 2, 3, "the answer on its connection").await;

    // server.1 dials, is closed, and server.2 dials back at the address it gave.
    c.send(2, vote(1, 4));
    heard(&mut a_in, 1, 4, "a smaller unlisted sid dialed").await;
    a.send(1, vote(2, 5));
    heard(&mut c_in, 2, 5, "the answer on the dialed-back connection").await;
    let link = a
        .election_link(1)
        .expect("server.2 holds a link to server.1");
    assert_eq!(
        link.remote.port(),
        spec(base, 1).election_port,
        "server.2 dialed server.1's advertised election address"
    );

    // A joining server syncs as a learner before the config that adds it.
    d.send(2, follower_info(4));
    received(&mut a_in, 4, "FOLLOWERINFO from an unlisted sid", |m| {
        matches!(m, Message::FollowerInfo { sid: 4, .. })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_members_dials_a_new_server_and_drops_a_gone_one() {
    logs();
    let base = 25100;
    let old = specs(base, &[1, 2]);
    let all = specs(base, &[1, 2, 3]);
    let (mut a, _a_in) = start(1, &old).await;
    let (mut b, _b_in) = start(2, &old).await;
    let (_c, mut c_in) = start(3, &all).await;

    // server.3 never speaks first: each member reaches it on its own.
    a.set_members(&lines(&all));
    b.set_members(&lines(&all));
    a.send(3, vote(1, 1));
    heard(&mut c_in, 1, 1, "server.1 after set_members").await;
    b.send(3, vote(2, 2));
    heard(&mut c_in, 2, 2, "server.2 after set_members").await;

    // server.2 leaves server.1's configuration: no link to it remains.
    a.set_members(&lines(&specs(base, &[1, 3])));
    assert!(a.election_link(2).is_none(), "server.2's link stopped");
    a.send(3, vote(1, 3));
    heard(&mut c_in, 1, 3, "the remaining member's link").await;
}

/// Reads an initial message and one notification frame from `s`.
async fn read_hello_and_vote(s: &mut TcpStream) -> (Sid, u64) {
    let mut buf = BytesMut::new();
    let sid = loop {
        if let Some((m, used)) = InitialMessage::decode(&buf).expect("an initial message") {
            buf.advance(used);
            break m.sid;
        }
        assert!(
            s.read_buf(&mut buf).await.expect("read") > 0,
            "closed early"
        );
    };
    loop {
        if let Some((body, _)) = decode_frame(&buf).expect("a frame") {
            let n = decode_notification(body).expect("a notification");
            return (sid, n.election_epoch);
        }
        assert!(
            s.read_buf(&mut buf).await.expect("read") > 0,
            "closed early"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_change_is_followed_on_both_ports() {
    logs();
    let base = 25200;
    // server.1 first lives at `base`'s ports, a listener here that reads and never
    // closes, then moves to ports 100 higher.
    let before = specs(base, &[1, 2]);
    let (mut a, _a_in) = start(2, &before).await;
    let old_port = spec(base, 1).election_port;
    let old = tokio::net::TcpListener::bind(("127.0.0.1", old_port))
        .await
        .expect("bind the old election port");
    a.send(1, vote(2, 1));
    let (mut old_conn, _) = tokio::time::timeout(DEADLINE, old.accept())
        .await
        .expect("server.2 dials the old address")
        .expect("accept");
    assert_eq!(read_hello_and_vote(&mut old_conn).await, (2, 1));

    let after = vec![spec(base + 100, 1), spec(base, 2)];
    let (_c, mut c_in) = start(1, &after).await;
    a.set_members(&lines(&after));
    assert!(
        closed_by_member(&mut old_conn, DEADLINE).await,
        "the connection to the old address is closed"
    );
    a.send(1, vote(2, 2));
    heard(&mut c_in, 2, 2, "the election port at the new address").await;
    a.send(1, follower_info(2));
    received(&mut c_in, 2, "FOLLOWERINFO at the new quorum port", |m| {
        matches!(m, Message::FollowerInfo { sid: 2, .. })
    })
    .await;
}

/// Opens an election connection to `port` as `sid` (larger than the member's, so the
/// member keeps it) and sends one LOOKING vote in `round`.
async fn introduce(port: u16, sid: Sid, round: u64) -> TcpStream {
    use keel::zab::wire::election::{encode_frame, encode_notification, ElectionAddress};
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the election port");
    let hello = InitialMessage::v1(
        sid,
        ElectionAddress {
            host: "127.0.0.1".into(),
            port: 1,
        },
    )
    .encode()
    .unwrap();
    s.write_all(&hello).await.unwrap();
    let Message::Notification(n) = vote(sid, round) else {
        unreachable!()
    };
    let frame = encode_frame(&encode_notification(&n, b"version=0")).unwrap();
    s.write_all(&frame).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_of_unlisted_sids_that_went_away_make_room_for_new_ones() {
    logs();
    let base = 25360;
    let servers = specs(base, &[2, 3]);
    let port = spec(base, 2).election_port;
    let (_a, mut a_in) = PeerNet::start(
        2,
        &servers,
        PeerParams {
            unlisted_links: 2,
            cnx_timeout: Duration::from_millis(300),
            ..params()
        },
    )
    .await
    .expect("start");
    // Two unlisted sids fill the slots and stay connected: a third is refused (the
    // member closes its connection) and its vote is never delivered.
    let held10 = introduce(port, 10, 1).await;
    heard(&mut a_in, 10, 1, "the first unlisted sid").await;
    let held11 = introduce(port, 11, 2).await;
    heard(&mut a_in, 11, 2, "the second unlisted sid").await;
    let mut refused = introduce(port, 12, 3).await;
    assert!(
        closed_by_member(&mut refused, DEADLINE).await,
        "a third unlisted sid is refused while both are connected"
    );
    // Both go away after holding their links longer than cnxTimeout. Right after, a
    // newcomer is still refused: the grace counts from the disconnect (the holders may
    // be reconnecting), not from the link's start.
    tokio::time::sleep(Duration::from_millis(600)).await;
    drop(held10);
    drop(held11);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut early = introduce(port, 12, 3).await;
    assert!(
        closed_by_member(&mut early, DEADLINE).await,
        "a newcomer right after the holders left is refused"
    );
    // Once cnxTimeout has passed since, their links are dropped for newcomers.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _s12 = introduce(port, 12, 4).await;
    heard(&mut a_in, 12, 4, "a newcomer after the others left").await;
    let _s13 = introduce(port, 13, 5).await;
    heard(&mut a_in, 13, 5, "a second newcomer").await;
}

/// Opens a learner connection to the quorum `port` as `sid` and sends FOLLOWERINFO.
async fn learner(port: u16, sid: Sid) -> TcpStream {
    use keel::zab::wire::quorum::{encode_message, Side};
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the quorum port");
    let mut out = BytesMut::new();
    encode_message(&follower_info(sid), Side::Learner, &mut out).unwrap();
    s.write_all(&out).await.unwrap();
    s
}

/// Whether the member closes `s` (read returns end of stream or an error).
async fn closed_by_member(s: &mut TcpStream, within: Duration) -> bool {
    let mut rest = [0u8; 64];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut rest).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_of_unlisted_sids_are_bounded() {
    logs();
    let base = 25380;
    let servers = specs(base, &[2, 3]);
    let port = spec(base, 2).quorum_port;
    let (_a, mut a_in) = PeerNet::start(
        2,
        &servers,
        PeerParams {
            unlisted_links: 2,
            ..params()
        },
    )
    .await
    .expect("start");
    let is_info =
        |sid| move |m: &Message| matches!(m, Message::FollowerInfo { sid: s, .. } if *s == sid);
    let _l10 = learner(port, 10).await;
    received(&mut a_in, 10, "the first unlisted learner", is_info(10)).await;
    let l11 = learner(port, 11).await;
    received(&mut a_in, 11, "the second unlisted learner", is_info(11)).await;
    let mut l12 = learner(port, 12).await;
    assert!(
        closed_by_member(&mut l12, DEADLINE).await,
        "a third unlisted learner is refused"
    );
    // A listed sid is never counted, and a slot freed is taken again.
    let _l3 = learner(port, 3).await;
    received(&mut a_in, 3, "a listed learner", is_info(3)).await;
    drop(l11);
    let gone = tokio::time::timeout(DEADLINE, async {
        while !matches!(a_in.recv().await, Input::Disconnected { peer: 11 }) {}
    })
    .await;
    assert!(
        gone.is_ok(),
        "server.11's learner connection is reported closed"
    );
    let _l13 = learner(port, 13).await;
    received(&mut a_in, 13, "a learner once a slot is free", is_info(13)).await;
}

/// Whether connecting to `port` is refused within the deadline.
async fn refused(port: u16) -> bool {
    tokio::time::timeout(DEADLINE, async {
        while TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_own_line_moves_listens_at_the_new_ports() {
    logs();
    let base = 25320;
    let before = specs(base, &[1, 2]);
    let (mut a, mut a_in) = start(2, &before).await;
    let (mut b, mut b_in) = start(1, &before).await;
    a.send(1, vote(2, 1));
    heard(&mut b_in, 2, 1, "before the move").await;

    // server.2 moves both ports 10 up (base 25320's ports stay below 25340).
    let moved = ServerLine::from(&ServerSpec {
        quorum_port: spec(base, 2).quorum_port + 10,
        election_port: spec(base, 2).election_port + 10,
        ..spec(base, 2)
    });
    a.set_own_line(&moved).await.expect("the new ports bind");
    let old_election = spec(base, 2).election_port;
    // The old listeners are closed by the time the move returns.
    assert!(
        refused(old_election).await,
        "the old election port is closed"
    );
    assert!(
        refused(spec(base, 2).quorum_port).await,
        "the old quorum port is closed"
    );
    // The new ports accept: a vote and a learner arrive there.
    let _v = introduce(moved.election_port, 9, 2).await;
    heard(&mut a_in, 9, 2, "a vote on the new election port").await;
    let _l = learner(moved.quorum_port, 1).await;
    received(&mut a_in, 1, "FOLLOWERINFO on the new quorum port", |m| {
        matches!(m, Message::FollowerInfo { sid: 1, .. })
    })
    .await;
    // server.1, told of the move, reaches server.2 there; server.2 advertises the new
    // election address when it dials (server.1 dials back there: the smaller sid).
    b.set_members(&[moved.clone(), ServerLine::from(&spec(base, 1))]);
    b.send(2, vote(1, 3));
    heard(&mut a_in, 1, 3, "server.1 at the new election port").await;
    // Moving to where it already is changes nothing.
    a.set_own_line(&moved).await.expect("no change");

    // The two ports swapped: each new port is one the member holds, so the old
    // listeners close first; both then serve at their new ports.
    let swapped = ServerLine::from(&ServerSpec {
        quorum_port: moved.election_port,
        election_port: moved.quorum_port,
        ..spec(base, 2)
    });
    a.set_own_line(&swapped).await.expect("swapped ports bind");
    let _v = introduce(swapped.election_port, 8, 4).await;
    heard(&mut a_in, 8, 4, "a vote on the swapped election port").await;
    let _l = learner(swapped.quorum_port, 1).await;
    received(
        &mut a_in,
        1,
        "FOLLOWERINFO on the swapped quorum port",
        |m| matches!(m, Message::FollowerInfo { sid: 1, .. }),
    )
    .await;

    // Rotated onto a port another socket holds: the move fails, and both ports listen
    // where they were again.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", base + 19)).expect("squat");
    let blocked = ServerLine::from(&ServerSpec {
        election_port: swapped.quorum_port,
        quorum_port: base + 19,
        ..spec(base, 2)
    });
    assert!(
        a.set_own_line(&blocked).await.is_err(),
        "a port held by another socket does not bind"
    );
    let _v = introduce(swapped.election_port, 7, 5).await;
    heard(
        &mut a_in,
        7,
        5,
        "the election port listens again after the failed move",
    )
    .await;
    let _l = learner(swapped.quorum_port, 1).await;
    received(
        &mut a_in,
        1,
        "the quorum port listens again after the failed move",
        |m| matches!(m, Message::FollowerInfo { sid: 1, .. }),
    )
    .await;
    drop(squatter);
}
