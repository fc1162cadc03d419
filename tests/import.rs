//! `keel import-zookeeper`: the ZooKeeper snapshot and txn log readers on small
//! hand-built byte images (layouts from ZooKeeper's FileSnap, FileTxnLog and
//! zookeeper.jute, encoded here independently of the readers), the replay rules, and
//! whole imports into a keel store read back through `Server::recover`.

use keel::import::input::adler32;
use keel::import::replay::{node_digest, ZkTree};
use keel::import::snapshot::{self, SNAP_MAGIC};
use keel::import::txnlog::{self, LogEnd, LogFile, Txn, LOG_MAGIC};
use keel::import::{ImportError, Options};
use keel::proto::opcode as op;
use keel::server::Server;
use keel::storage::rocks::RocksStorage;
use keel::tree::znode::{CONTAINER_OWNER, TTL_MASK};
use std::path::Path;

/// A jute writer.
#[derive(Default, Clone)]
struct W(Vec<u8>);

impl W {
    fn int(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn long(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn byte(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn buf(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            None => self.int(-1),
            Some(b) => {
                self.int(b.len() as i32);
                self.0.extend_from_slice(b);
                self
            }
        }
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.buf(Some(s.as_bytes()))
    }
    /// vector<ACL> of (perms, scheme, id).
    fn acls(&mut self, acls: &[(i32, &str, &str)]) -> &mut Self {
        self.int(acls.len() as i32);
        for (perms, scheme, id) in acls {
            self.int(*perms).str(scheme).str(id);
        }
        self
    }
    /// SnapStream.sealStream: Adler-32 of everything so far, then "/".
    fn seal(&mut self) -> &mut Self {
        let a = adler32(&self.0);
        self.long(a).str("/")
    }
}

/// A znode in a hand-built snapshot: (path, data, ACL id, czxid, mzxid, ctime, mtime,
/// version, cversion, aversion, ephemeralOwner, pzxid).
type SnapNode<'a> = (&'a str, Option<&'a [u8]>, i64, [i64; 4], [i32; 3], i64, i64);

const WORLD_ALL: (i32, &str, &str) = (31, "world", "anyone");
const WORLD_READ: (i32, &str, &str) = (1, "world", "anyone");
const DIGEST_ACL: (i32, &str, &str) = (31, "digest", "u:Eq8iQ8eK6aT0bL6vX2gkM3m3mWc=");

/// The body of a snapshot up to (not including) its first seal.
fn snapshot_body(sessions: &[(i64, i32)], nodes: &[SnapNode<'_>]) -> W {
    let mut w = W::default();
    w.int(SNAP_MAGIC).int(2).long(0);
    w.int(sessions.len() as i32);
    for (id, t) in sessions {
        w.long(*id).int(*t);
    }
    // ACL table: 1 = the config node's read-only ACL, 2 = a digest ACL.
    w.int(2);
    w.long(1).acls(&[WORLD_READ]);
    w.long(2).acls(&[DIGEST_ACL]);
    for (path, data, acl, [czxid, mzxid, ctime, mtime], [v, cv, av], owner, pzxid) in nodes {
        w.str(path).buf(*data).long(*acl);
        w.long(*czxid).long(*mzxid).long(*ctime).long(*mtime);
        w.int(*v).int(*cv).int(*av).long(*owner).long(*pzxid);
    }
    w.str("/");
    w
}

/// The system znodes every ZooKeeper snapshot holds.
fn system_nodes() -> Vec<SnapNode<'static>> {
    vec![
        ("", Some(b""), -1, [0; 4], [0, 1, 0], 0, 0),
        ("/zookeeper", Some(b""), -1, [0; 4], [0, 0, 0], 0, 0),
        ("/zookeeper/quota", Some(b""), -1, [0; 4], [0, 0, 0], 0, 0),
        ("/zookeeper/config", Some(b""), 1, [0; 4], [0, 0, -1], 0, 0),
    ]
}

/// A snapshot at zxid 5: /a (cversion 3, two children), /a/b, /a/e (ephemeral of
/// session 0x77), /c (digest ACL, null data), sessions 0x77 and 0x78.
fn sample_nodes() -> Vec<SnapNode<'static>> {
    let mut n = system_nodes();
    n[0].4 = [0, 2, 0];
    n[0].6 = 4;
    n.extend([
        ("/a", Some(&b"A"[..]), -1, [1, 2, 100, 200], [1, 3, 0], 0, 5),
        (
            "/a/b",
            Some(&b"bee"[..]),
            -1,
            [3, 3, 300, 300],
            [0, 0, 0],
            0,
            3,
        ),
        (
            "/a/e",
            Some(&b""[..]),
            -1,
            [5, 5, 500, 500],
            [0, 0, 0],
            0x77,
            5,
        ),
        ("/c", None, 2, [4, 4, 400, 400], [0, 0, 2], 0, 4),
    ]);
    n
}

fn sample_snapshot(digest: Option<(i64, i64)>) -> Vec<u8> {
    let mut w = snapshot_body(&[(0x77, 30000), (0x78, 10000)], &sample_nodes());
    w.seal();
    if let Some((zxid, d)) = digest {
        w.long(zxid).int(2).long(d).seal();
    }
    w.0
}

/// A log record payload: TxnHeader, body, optional TxnDigest.
fn payload(session: i64, zxid: i64, kind: i32, body: &W, digest: Option<i64>) -> Vec<u8> {
    let mut w = W::default();
    w.long(session)
        .int(1)
        .long(zxid)
        .long(1000 + zxid)
        .int(kind);
    w.0.extend_from_slice(&body.0);
    if let Some(d) = digest {
        w.int(2).long(d);
    }
    w.0
}

/// A log file: header, one record per payload, `padding` zero bytes.
fn log_file(payloads: &[Vec<u8>], padding: usize) -> Vec<u8> {
    let mut w = W::default();
    w.int(LOG_MAGIC).int(2).long(0);
    for p in payloads {
        w.long(adler32(p)).int(p.len() as i32);
        w.0.extend_from_slice(p);
        w.byte(b'B');
    }
    w.0.extend(std::iter::repeat_n(0u8, padding));
    w.0
}

fn create_body(path: &str, data: &[u8], ephemeral: bool, parent_cversion: i32) -> W {
    let mut w = W::default();
    w.str(path).buf(Some(data)).acls(&[WORLD_ALL]);
    w.byte(ephemeral as u8).int(parent_cversion);
    w
}

fn parse_snapshot(bytes: &[u8]) -> Result<snapshot::ZkSnapshot, keel::import::input::Malformed> {
    snapshot::parse(bytes, 5, &mut |_| {})
}

#[test]
fn snapshot_round_trips() {
    let bytes = sample_snapshot(Some((5, 1234)));
    let s = parse_snapshot(&bytes).unwrap();
    assert_eq!(s.sessions, vec![(0x77, 30000), (0x78, 10000)]);
    assert_eq!(s.nodes.len(), 8);
    let root = &s.nodes["/"];
    assert_eq!(
        root.children.iter().map(|c| &**c).collect::<Vec<_>>(),
        ["a", "c", "zookeeper"]
    );
    let a = &s.nodes["/a"];
    assert_eq!(a.data.as_deref(), Some(&b"A"[..]));
    assert_eq!((a.czxid, a.mzxid, a.ctime, a.mtime), (1, 2, 100, 200));
    assert_eq!(
        (a.version, a.child_creates, a.aversion, a.pzxid),
        (1, 3, 0, 5)
    );
    // ZooKeeper stores the create count; clients see creates + deletes.
    assert_eq!(a.stat().cversion, 2 * 3 - 2);
    assert_eq!(s.nodes["/a/e"].stat().ephemeral_owner, 0x77);
    let c = &s.nodes["/c"];
    assert_eq!(c.data, None);
    assert_eq!(c.acl[0].id.scheme, "digest");
    assert_eq!(c.aversion, 2);
    assert_eq!(s.nodes["/zookeeper/config"].acl[0].perms, 1);
    assert_eq!(s.nodes["/zookeeper/config"].aversion, -1);
    assert_eq!(s.nodes["/a"].acl[0].id.id, "anyone");
    assert_eq!(
        s.digest.map(|d| (d.zxid, d.version, d.digest)),
        Some((5, 2, 1234))
    );
    // Without the 3.6+ digest trailer, and with the 3.9+ lastProcessedZxid alone.
    assert!(parse_snapshot(&sample_snapshot(None))
        .unwrap()
        .digest
        .is_none());
    let mut w = snapshot_body(&[], &sample_nodes());
    w.seal().long(9).seal();
    let s = parse_snapshot(&w.0).unwrap();
    assert_eq!((s.digest, s.last_processed_zxid), (None, Some(9)));
}

#[test]
fn snapshot_damage_is_refused_with_its_offset() {
    let good = sample_snapshot(Some((5, 1)));
    let seal_at = snapshot_body(&[(0x77, 30000), (0x78, 10000)], &sample_nodes())
        .0
        .len();
    // A flipped byte inside /a/b's data: the seal's Adler-32 no longer matches.
    let at = good.windows(3).position(|w| w == b"bee").unwrap();
    let mut bad = good.clone();
    bad[at] ^= 0x20;
    let e = parse_snapshot(&bad).unwrap_err();
    assert_eq!(e.offset, seal_at as u64);
    assert!(e.what.contains("checksum mismatch (Adler-32"), "{e:?}");
    // Truncated anywhere: refused, never a panic.
    for cut in [0, 3, 17, seal_at - 1, seal_at + 3, good.len() - 1] {
        let e = parse_snapshot(&good[..cut]).unwrap_err();
        assert!(
            e.what.contains("truncated") || e.what.contains("does not fit"),
            "cut {cut}: {e:?}"
        );
    }
    let mut magic = good.clone();
    magic[0] = b'X';
    let e = parse_snapshot(&magic).unwrap_err();
    assert!(
        e.what.contains("ZKSN") && e.what.contains("checksum mismatch"),
        "{e:?}"
    );
    // Damage that breaks the structure (a path length) is refused as damage too.
    let mut path = good.clone();
    let at = good.windows(4).position(|w| w == b"/a/b").unwrap();
    path[at - 4] = 0xff;
    let e = parse_snapshot(&path).unwrap_err();
    assert_eq!(e.offset, at as u64 - 4);
    assert!(e.what.contains("checksum mismatch"), "{e:?}");
    // A structure this reader refuses in an intact file is not called damage.
    let mut w = snapshot_body(&[], &sample_nodes());
    w.0[7] = 3;
    w.seal();
    let e = parse_snapshot(&w.0).unwrap_err();
    assert!(
        e.what.contains("version 3") && !e.what.contains("checksum"),
        "{e:?}"
    );
    // A damaged digest trailer is refused too (its own seal fails).
    let mut trailer = good.clone();
    let n = trailer.len();
    trailer[n - 20] ^= 1;
    assert!(parse_snapshot(&trailer).is_err());
    let mut extra = good.clone();
    extra.push(0);
    assert!(parse_snapshot(&extra).is_err());
}

#[test]
fn snapshot_structure_errors() {
    let mut nodes = sample_nodes();
    nodes[5].2 = 9; // /a/b refers to an ACL id the table lacks
    let mut w = snapshot_body(&[], &nodes);
    w.seal();
    assert!(parse_snapshot(&w.0).unwrap_err().what.contains("ACL id 9"));
    let mut nodes = sample_nodes();
    nodes.swap(4, 5); // /a/b before /a
    let mut w = snapshot_body(&[], &nodes);
    w.seal();
    assert!(parse_snapshot(&w.0)
        .unwrap_err()
        .what
        .contains("before its parent"));
}

fn read_all(
    bytes: &[u8],
) -> Result<(Vec<txnlog::TxnRecord>, LogEnd), keel::import::input::Malformed> {
    let mut log = LogFile::open(bytes, txnlog::max_record_bytes(0xfffff))?;
    let mut out = Vec::new();
    while let Some(r) = log.next_record()? {
        out.push(r);
    }
    Ok((out, log.end().cloned().unwrap()))
}

#[test]
fn every_txn_type_decodes() {
    let s = 0x77;
    let mut ttl = W::default();
    ttl.str("/t")
        .buf(Some(b"t"))
        .acls(&[WORLD_ALL])
        .int(7)
        .long(60_000);
    let mut container = W::default();
    container.str("/k").buf(None).acls(&[WORLD_ALL]).int(8);
    let mut set = W::default();
    set.str("/a").buf(Some(b"v2")).int(4);
    let mut acl = W::default();
    acl.str("/a").acls(&[DIGEST_ACL, WORLD_READ]).int(1);
    let mut path = W::default();
    path.str("/a/b");
    let mut check = W::default();
    check.str("/a").int(3);
    let mut err = W::default();
    err.int(-101);
    let mut session = W::default();
    session.int(30000);
    let mut close = W::default();
    close.int(2).str("/e1").str("/e2");
    let mut multi = W::default();
    let inner = [
        (op::CREATE, create_body("/m", b"x", true, 2).0),
        (op::SET_DATA, set.0.clone()),
        (op::DELETE, path.0.clone()),
        (op::CHECK, check.0.clone()),
    ];
    multi.int(inner.len() as i32);
    for (t, b) in &inner {
        multi.int(*t).buf(Some(b));
    }
    let mut failed = W::default();
    failed
        .int(2)
        .int(op::CREATE)
        .buf(Some(b"garbage"))
        .int(op::ERROR);
    failed.buf(Some(&(-110i32).to_be_bytes()));
    let mut old_create = W::default();
    old_create
        .str("/old")
        .buf(Some(b""))
        .acls(&[WORLD_ALL])
        .byte(0);
    let payloads = vec![
        payload(s, 1, op::CREATE_SESSION, &session, Some(11)),
        payload(s, 2, op::CREATE2, &create_body("/e1", b"e", true, 5), None),
        payload(s, 3, op::CREATE_TTL, &ttl, None),
        payload(s, 4, op::CREATE_CONTAINER, &container, None),
        payload(s, 5, op::SET_DATA, &set, None),
        payload(s, 6, op::SET_ACL, &acl, None),
        payload(s, 7, op::DELETE, &path, None),
        payload(s, 8, op::CHECK, &check, None),
        payload(s, 9, op::ERROR, &err, None),
        payload(s, 10, op::MULTI, &multi, Some(12)),
        payload(s, 11, op::MULTI, &failed, None),
        payload(s, 12, op::CLOSE_SESSION, &close, Some(13)),
        payload(s, 13, op::CLOSE_SESSION, &W::default(), Some(14)),
        payload(s, 14, op::RECONFIG, &set, None),
        payload(s, 15, op::CREATE, &old_create, None),
    ];
    let (recs, end) = read_all(&log_file(&payloads, 4096)).unwrap();
    assert_eq!(
        end,
        LogEnd::Clean {
            offset: (16 + payloads.iter().map(|p| p.len() + 13).sum::<usize>()) as u64
        }
    );
    let txns: Vec<&Txn> = recs.iter().map(|r| &r.txn).collect();
    assert_eq!(recs[0].header.zxid, 1);
    assert_eq!(recs[0].header.time_ms, 1001);
    assert_eq!(
        recs[0].digest.map(|d| (d.version, d.tree_digest)),
        Some((2, 11))
    );
    assert_eq!(*txns[0], Txn::CreateSession { timeout_ms: 30000 });
    assert!(matches!(
        txns[1],
        Txn::Create {
            owner: 0x77,
            parent_cversion: 5,
            kind: op::CREATE2,
            ..
        }
    ));
    assert!(
        matches!(txns[2], Txn::Create { owner, parent_cversion: 7, .. } if *owner == TTL_MASK | 60_000)
    );
    assert!(matches!(
        txns[3],
        Txn::Create {
            owner: CONTAINER_OWNER,
            data: None,
            ..
        }
    ));
    assert!(matches!(txns[4], Txn::SetData { version: 4, .. }));
    assert!(matches!(txns[5], Txn::SetAcl { acl, version: 1, .. } if acl.len() == 2));
    assert!(matches!(txns[6], Txn::Delete { path } if path == "/a/b"));
    assert!(matches!(txns[7], Txn::Check { version: 3, .. }));
    assert_eq!(*txns[8], Txn::Error { err: -101 });
    match txns[9] {
        Txn::Multi(ops) => {
            assert_eq!(ops.len(), 4);
            assert!(matches!(&ops[0], Txn::Create { owner: 0x77, .. }));
            assert!(matches!(&ops[2], Txn::Delete { .. }));
        }
        other => panic!("{other:?}"),
    }
    // A failed multi: ops before the error read as OK errors, the record itself is not read.
    assert_eq!(
        *txns[10],
        Txn::Multi(vec![Txn::Error { err: 0 }, Txn::Error { err: -110 }])
    );
    assert_eq!(
        *txns[11],
        Txn::CloseSession {
            paths: Some(vec!["/e1".into(), "/e2".into()])
        }
    );
    assert_eq!(recs[11].digest.map(|d| d.tree_digest), Some(13));
    assert_eq!(*txns[12], Txn::CloseSession { paths: None });
    assert_eq!(recs[12].digest.map(|d| d.tree_digest), Some(14));
    assert!(matches!(txns[13], Txn::SetData { path, .. } if path == "/a"));
    assert!(matches!(
        txns[14],
        Txn::Create {
            parent_cversion: -1,
            ..
        }
    ));
}

#[test]
fn log_damage_is_refused_and_a_torn_tail_ends_the_log() {
    let mut session = W::default();
    session.int(30000);
    let p1 = payload(1, 1, op::CREATE_SESSION, &session, None);
    let p2 = payload(
        1,
        2,
        op::CREATE,
        &create_body("/x", b"hello", false, 1),
        None,
    );
    let p3 = payload(
        1,
        3,
        op::CREATE,
        &create_body("/y", b"world", false, 2),
        None,
    );
    let good = log_file(&[p1.clone(), p2.clone(), p3.clone()], 1000);
    let second = 16 + p1.len() + 13;
    assert_eq!(read_all(&good).unwrap().0.len(), 3);

    // A flipped byte inside a record's payload: checksum mismatch at that record.
    let mut bad = good.clone();
    let at = bad.windows(5).position(|w| w == b"hello").unwrap();
    bad[at] ^= 1;
    let e = read_all(&bad).unwrap_err();
    assert_eq!(e.offset, second as u64);
    assert!(e.what.contains("checksum mismatch"), "{e:?}");

    // The last record cut short, zeros after it: a torn tail, the log ends before it.
    let mut torn = log_file(&[p1.clone(), p2.clone(), p3.clone()], 0);
    let cut = torn.len() - 4;
    torn.truncate(cut);
    torn.extend(std::iter::repeat_n(0, 100));
    let (recs, end) = read_all(&torn).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(matches!(end, LogEnd::Torn { .. }), "{end:?}");
    // Cut at the very end of the file (no padding at all).
    let (recs, end) = read_all(&torn[..cut - 10]).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(matches!(end, LogEnd::Torn { .. }));

    // A record in the middle that lacks its end byte, with records after it: refused.
    let mut mid = good.clone();
    mid[second + 12 + p2.len()] = 0;
    let e = read_all(&mid).unwrap_err();
    assert!(e.what.contains("non-zero bytes after"), "{e:?}");

    // A length field out of range.
    let mut len = good.clone();
    len[second + 8] = 0x7f;
    let e = read_all(&len).unwrap_err();
    assert_eq!(e.offset, second as u64 + 8);
    assert!(e.what.contains("record length"), "{e:?}");

    // Garbage after the zero padding.
    let mut tail = good.clone();
    let n = tail.len();
    tail[n - 3] = 9;
    assert!(read_all(&tail).unwrap_err().what.contains("non-zero"));

    // Bad magic, truncated header.
    let mut magic = good.clone();
    magic[1] = b'Q';
    assert!(read_all(&magic).unwrap_err().what.contains("ZKLG"));
    assert!(read_all(&good[..10]).is_err());

    // A payload that does not decode (valid checksum, unknown type).
    let junk = payload(1, 4, 99, &W::default(), None);
    let e = read_all(&log_file(&[p1, junk], 10)).unwrap_err();
    assert!(e.what.contains("unknown txn type 99"), "{e:?}");
}

/// The digest of a whole tree, computed from scratch.
fn full_digest(t: &keel::import::replay::Replayed) -> i64 {
    t.nodes
        .iter()
        .fold(0i64, |acc, (p, n)| acc.wrapping_add(node_digest(p, n)))
}

fn record(zxid: i64, session: i64, kind: i32, body: &W) -> txnlog::TxnRecord {
    let p = payload(session, zxid, kind, body, None);
    let (header, txn, digest) = txnlog::parse_payload(&p, 0).unwrap();
    txnlog::TxnRecord {
        offset: 0,
        header,
        txn,
        digest,
    }
}

#[test]
fn replay_follows_zookeepers_rules_over_a_fuzzy_snapshot() {
    let snap = parse_snapshot(&sample_snapshot(None)).unwrap();
    let mut t = ZkTree::from_snapshot(snap);
    t.check_loaded_digest().unwrap();
    // zxid 5 created /a/e and is already in the (fuzzy) snapshot; zxid 6 re-creates
    // /a/b: NODEEXISTS, and a plain create catches the parent's cversion up to 4.
    t.apply(&record(
        6,
        0x77,
        op::CREATE,
        &create_body("/a/b", b"", false, 4),
    ))
    .unwrap();
    // A create whose parentCVersion is not above the stored one leaves cversion/pzxid.
    t.apply(&record(
        7,
        0x77,
        op::CREATE2,
        &create_body("/a/z", b"z", false, 2),
    ))
    .unwrap();
    let mut del = W::default();
    del.str("/a/gone");
    // Deleting a missing child still moves the parent's pzxid.
    t.apply(&record(8, 0, op::DELETE, &del)).unwrap();
    let mut set = W::default();
    set.str("/a/z").buf(Some(b"zz")).int(1);
    t.apply(&record(9, 0x78, op::SET_DATA, &set)).unwrap();
    let mut close = W::default();
    close.int(0);
    t.apply(&record(10, 0x77, op::CLOSE_SESSION, &close))
        .unwrap();
    let r = t.finish();
    let a = &r.nodes["/a"];
    assert_eq!(a.child_creates, 4);
    assert_eq!(a.pzxid, 10, "closeSession deleted /a/e at zxid 10");
    assert!(!r.nodes.contains_key("/a/e"));
    let z = &r.nodes["/a/z"];
    assert_eq!((z.czxid, z.mzxid, z.mtime, z.version), (7, 9, 1009, 1));
    assert_eq!(z.data.as_deref(), Some(&b"zz"[..]));
    assert_eq!(r.sessions.keys().copied().collect::<Vec<_>>(), vec![0x78]);
    assert_eq!(r.last_zxid, 10);
    assert_eq!(r.stats.txns, 5);
    assert!(r.stats.skipped_ops >= 2, "{:?}", r.stats);
}

#[test]
fn digests_are_kept_incrementally() {
    let snap = parse_snapshot(&sample_snapshot(None)).unwrap();
    let mut t = ZkTree::from_snapshot(snap);
    t.apply(&record(
        6,
        0x77,
        op::CREATE,
        &create_body("/n", b"n", false, 3),
    ))
    .unwrap();
    let mut set = W::default();
    set.str("/").buf(Some(b"root")).int(1);
    t.apply(&record(7, 0, op::SET_DATA, &set)).unwrap();
    let incremental = t.digest();
    let r = t.finish();
    assert_eq!(incremental, full_digest(&r));
    // A log digest that disagrees is reported with both values.
    let snap = parse_snapshot(&sample_snapshot(None)).unwrap();
    let mut t = ZkTree::from_snapshot(snap);
    let p = payload(
        0,
        6,
        op::CREATE,
        &create_body("/n", b"n", false, 3),
        Some(42),
    );
    let (header, txn, digest) = txnlog::parse_payload(&p, 0).unwrap();
    let e = t
        .apply(&txnlog::TxnRecord {
            offset: 0,
            header,
            txn,
            digest,
        })
        .unwrap_err();
    assert_eq!((e.zxid, e.expected, e.source), (6, 42, "log"));
}

/// A ZooKeeper dataDir: `version-2` with the given snapshots and logs.
fn zk_dir(
    root: &Path,
    snapshots: &[(i64, Vec<u8>)],
    logs: &[(i64, Vec<u8>)],
) -> std::path::PathBuf {
    let v2 = root.join("zk").join("version-2");
    std::fs::create_dir_all(&v2).unwrap();
    for (z, b) in snapshots {
        std::fs::write(v2.join(format!("snapshot.{z:x}")), b).unwrap();
    }
    for (z, b) in logs {
        std::fs::write(v2.join(format!("log.{z:x}")), b).unwrap();
    }
    root.join("zk")
}

fn options(zk: &Path, keel: &Path) -> Options {
    Options {
        zk_data_dir: zk.to_path_buf(),
        zk_log_dir: None,
        keel_data_dir: keel.to_path_buf(),
        keel_log_dir: None,
        jute_maxbuffer: 0xfffff,
        check_digests: true,
    }
}

/// The txns after the sample snapshot (zxid 5): a sequential-style create under /a,
/// a new session with an ephemeral, a setACL, a multi.
fn sample_log() -> Vec<u8> {
    let mut session = W::default();
    session.int(20000);
    let mut acl = W::default();
    acl.str("/c").acls(&[WORLD_READ]).int(3);
    let mut multi = W::default();
    let mut set = W::default();
    set.str("/a/b").buf(Some(b"multi")).int(1);
    multi.int(2);
    multi
        .int(op::CREATE)
        .buf(Some(&create_body("/m", b"", false, 3).0));
    multi.int(op::SET_DATA).buf(Some(&set.0));
    log_file(
        &[
            payload(0x77, 4, op::CREATE_SESSION, &session, None),
            payload(
                0x77,
                5,
                op::CREATE,
                &create_body("/a/e", b"", true, 3),
                None,
            ),
            payload(
                0x77,
                6,
                op::CREATE2,
                &create_body("/a/s0000000003", b"s", false, 4),
                None,
            ),
            payload(0x79, 7, op::CREATE_SESSION, &session, None),
            payload(
                0x79,
                8,
                op::CREATE,
                &create_body("/e79", b"eph", true, 3),
                None,
            ),
            payload(0x77, 9, op::SET_ACL, &acl, None),
            payload(0x77, 10, op::MULTI, &multi, None),
        ],
        512,
    )
}

fn recover(keel: &Path) -> Server {
    let settings = keel::server_settings(&keel::config::Config::default());
    let ro = RocksStorage::open_read_only(keel, keel).unwrap().unwrap();
    Server::recover(settings, &ro, &keel.join("keel-db"), 0, 0)
        .unwrap()
        .0
}

#[test]
fn whole_import_reads_back_in_keel() {
    let dir = tempfile::tempdir().unwrap();
    // An older snapshot at 0 (empty tree) and the sample at 5.
    let mut empty = snapshot_body(&[], &system_nodes());
    empty.seal();
    let zk = zk_dir(
        dir.path(),
        &[(0, empty.0), (5, sample_snapshot(None))],
        &[(4, sample_log())],
    );
    let keel = dir.path().join("keel");
    let s = keel::import::run(&options(&zk, &keel), &mut |_| {}).unwrap();
    assert_eq!((s.snapshot_zxid, s.last_zxid, s.replay.txns), (5, 10, 5));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let server = recover(&keel);
    assert_eq!(server.last_zxid, 10, "keel's next zxid follows ZooKeeper's");
    let a = server.tree.get("/a").unwrap();
    let st = a.stat();
    assert_eq!((st.czxid, st.mzxid, st.ctime, st.mtime), (1, 2, 100, 200));
    assert_eq!((a.child_creates(), st.num_children, st.pzxid), (4, 3, 6));
    let s3 = server.tree.get("/a/s0000000003").unwrap().stat();
    assert_eq!((s3.czxid, s3.ctime), (6, 1006));
    assert_eq!(server.tree.get("/c").unwrap().stat().aversion, 3);
    assert_eq!(server.tree.acl(server.tree.get("/c").unwrap())[0].perms, 1);
    assert_eq!(server.tree.get("/a/b").unwrap().data(), Some(&b"multi"[..]));
    assert_eq!(
        server.tree.get("/e79").unwrap().stat().ephemeral_owner,
        0x79
    );
    assert_eq!(
        server.tree.ephemerals(0x77).collect::<Vec<_>>(),
        vec!["/a/e"]
    );
    let sess = server.sessions.get(0x79).unwrap();
    assert_eq!(sess.timeout_ms, 20000);
    assert_eq!(sess.passwd, keel::import::passwd::session_passwd(0x79));
    assert_eq!(server.sessions.len(), 3);
    assert_eq!(
        server
            .tree
            .get("/zookeeper/config")
            .unwrap()
            .stat()
            .aversion,
        -1
    );

    // A second import into the same directory is refused and changes nothing.
    let e = keel::import::run(&options(&zk, &keel), &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, ImportError::Refused(ref m) if m.contains("already holds a keel store")),
        "{e}"
    );
    assert_eq!(recover(&keel).last_zxid, 10);
}

#[test]
fn a_damaged_newest_snapshot_falls_back_to_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = sample_snapshot(None);
    let at = bad.windows(3).position(|w| w == b"bee").unwrap();
    bad[at] = b'X';
    // The older snapshot plus the whole log rebuild the same tree.
    let mut s0 = snapshot_body(&[(0x77, 30000), (0x78, 10000)], &sample_nodes());
    s0.seal();
    let zk = zk_dir(dir.path(), &[(3, s0.0), (5, bad)], &[(1, sample_log())]);
    let keel = dir.path().join("keel");
    let s = keel::import::run(&options(&zk, &keel), &mut |_| {}).unwrap();
    assert_eq!(s.snapshot_zxid, 3);
    assert!(
        s.warnings[0].contains("snapshot.5") && s.warnings[0].contains("Adler-32"),
        "{:?}",
        s.warnings
    );
    assert_eq!(recover(&keel).last_zxid, 10);
}

fn refused(snapshots: &[(i64, Vec<u8>)], logs: &[(i64, Vec<u8>)], want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let zk = zk_dir(dir.path(), snapshots, logs);
    let keel = dir.path().join("keel");
    let e = keel::import::run(&options(&zk, &keel), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains(want), "wanted {want:?} in: {e}");
    assert!(
        !keel.exists(),
        "a refused import must not create KEEL_DATADIR"
    );
}

#[test]
fn damaged_or_incomplete_input_is_refused_before_anything_is_written() {
    let snap = sample_snapshot(None);
    let mut bad_snap = snap.clone();
    let n = bad_snap.len();
    bad_snap[n - 30] ^= 0xff;
    refused(&[(5, bad_snap)], &[], "no valid snapshot");
    refused(&[], &[(1, sample_log())], "no snapshot");
    let mut bad_log = sample_log();
    let at = bad_log.windows(3).position(|w| w == b"eph").unwrap();
    bad_log[at] ^= 1;
    refused(&[(5, snap.clone())], &[(4, bad_log)], "checksum mismatch");
    // A log that starts after the snapshot's next zxid: txns are missing.
    let mut later = W::default();
    later.int(1);
    let gap = log_file(&[payload(1, 8, op::CREATE_SESSION, &later, None)], 0);
    refused(&[(5, snap.clone())], &[(8, gap)], "0x6..=0x7 are missing");
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("version-2");
    std::fs::create_dir_all(&v2).unwrap();
    std::fs::write(v2.join("snapshot.5.gz"), b"\x1f\x8b").unwrap();
    let e =
        keel::import::run(&options(dir.path(), &dir.path().join("k")), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("compressed"), "{e}");
}

#[test]
fn digest_mismatch_is_refused_unless_ignored() {
    let dir = tempfile::tempdir().unwrap();
    // The snapshot claims a digest for its own zxid that its znodes do not have.
    let zk = zk_dir(dir.path(), &[(5, sample_snapshot(Some((5, 77))))], &[]);
    let keel = dir.path().join("keel");
    let e = keel::import::run(&options(&zk, &keel), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("digest"), "{e}");
    assert!(!keel.exists());
    let mut o = options(&zk, &keel);
    o.check_digests = false;
    let s = keel::import::run(&o, &mut |_| {}).unwrap();
    assert_eq!(s.warnings.len(), 1);
    // And the right digest is accepted and counted.
    let snap = parse_snapshot(&sample_snapshot(None)).unwrap();
    let d = ZkTree::from_snapshot(snap).digest();
    let dir = tempfile::tempdir().unwrap();
    let zk = zk_dir(dir.path(), &[(5, sample_snapshot(Some((5, d))))], &[]);
    let s = keel::import::run(&options(&zk, &dir.path().join("k")), &mut |_| {}).unwrap();
    assert_eq!(s.replay.digests_matched, 1);
}

#[test]
fn a_snapshot_digest_mismatch_is_settled_by_a_later_matching_txn_digest() {
    // ZooKeeper writes snapshots while it applies txns: the digest it records for the
    // snapshot's zxid can disagree with the znodes written (77 here). The txn after it,
    // whose digest matches the replayed tree, shows the import is ZooKeeper's data.
    let body = create_body("/z", b"z", false, 3);
    let mut t = ZkTree::from_snapshot(parse_snapshot(&sample_snapshot(None)).unwrap());
    t.apply(&record(6, 0x77, op::CREATE, &body)).unwrap();
    let good = log_file(&[payload(0x77, 6, op::CREATE, &body, Some(t.digest()))], 0);
    let dir = tempfile::tempdir().unwrap();
    let zk = zk_dir(
        dir.path(),
        &[(5, sample_snapshot(Some((5, 77))))],
        &[(6, good)],
    );
    let s = keel::import::run(&options(&zk, &dir.path().join("k")), &mut |_| {}).unwrap();
    assert_eq!(s.replay.digests_matched, 1);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("later txn digests matched")),
        "{:?}",
        s.warnings
    );
    // Without a txn digest after it, nothing settles it: refused.
    let bare = log_file(&[payload(0x77, 6, op::CREATE, &body, None)], 0);
    refused(
        &[(5, sample_snapshot(Some((5, 77))))],
        &[(6, bare)],
        "no later txn digest in the logs matched",
    );
}

/// The names and contents of the files in a directory.
fn files_of(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn a_zookeeper_members_datadir_converts_in_place_to_a_member_store() {
    use keel::storage::zab::ZabStore;
    let dir = tempfile::tempdir().unwrap();
    let zk = zk_dir(
        dir.path(),
        &[(5, sample_snapshot(None))],
        &[(4, sample_log())],
    );
    let v2 = zk.join("version-2");
    std::fs::write(v2.join("acceptedEpoch"), "3").unwrap();
    std::fs::write(v2.join("currentEpoch"), "2").unwrap();
    assert!(keel::import::ensemble::needs_conversion(&zk));
    let before = files_of(&v2);
    let c = keel::import::ensemble::convert(&options(&zk, &zk), &mut |_| {}).unwrap();
    // The log starts at 4 below the snapshot at 5 (fuzzy): 6..=10 are logged after it.
    assert_eq!((c.snapshot_zxid, c.last_zxid, c.logged_txns), (5, 10, 5));
    assert_eq!(files_of(&v2), before, "ZooKeeper's files are only read");
    assert!(!keel::import::ensemble::needs_conversion(&zk));
    let store = ZabStore::open(&zk, &zk, true).unwrap();
    let r = store.try_recover().unwrap();
    assert_eq!(r.snapshot_zxid, 5);
    assert_eq!(
        (r.accepted_epoch, r.current_epoch),
        (3, 2),
        "ZooKeeper's epochs kept"
    );
    let zxids: Vec<u64> = r.log.iter().map(|t| t.zxid).collect();
    assert_eq!(zxids, vec![6, 7, 8, 9, 10]);
    let (h, _, _) = keel::zab::wire::txn::parse_payload(&r.log[0].data, 0).unwrap();
    assert_eq!(h.zxid, 6);
    drop(store);
    // A second conversion is refused.
    let e = keel::import::ensemble::convert(&options(&zk, &zk), &mut |_| {}).unwrap_err();
    assert!(matches!(e, ImportError::Refused(_)), "{e}");

    // A log with a gap (6 missing after the snapshot at 5) is refused, no store left.
    let dir2 = tempfile::tempdir().unwrap();
    let mut session = W::default();
    session.int(20000);
    let gap = log_file(&[payload(0x79, 7, op::CREATE_SESSION, &session, None)], 512);
    let zk2 = zk_dir(dir2.path(), &[(5, sample_snapshot(None))], &[(7, gap)]);
    let e = keel::import::ensemble::convert(&options(&zk2, &zk2), &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, ImportError::Refused(ref m) if m.contains("does not follow")),
        "{e}"
    );
    assert!(!zk2.join("keel-db").exists());

    // So is a later epoch that starts past its first txn (0x100000001 after the
    // snapshot at 5): a member's start would refuse the store (a hole), so the
    // conversion refuses it first.
    let dir3 = tempfile::tempdir().unwrap();
    let epoch_gap = log_file(
        &[payload(
            0x79,
            0x1_0000_0002,
            op::CREATE_SESSION,
            &session,
            None,
        )],
        512,
    );
    let zk3 = zk_dir(
        dir3.path(),
        &[(5, sample_snapshot(None))],
        &[(0x1_0000_0002, epoch_gap)],
    );
    let e = keel::import::ensemble::convert(&options(&zk3, &zk3), &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, ImportError::Refused(ref m) if m.contains("does not follow 0x5")),
        "{e}"
    );
    assert!(!zk3.join("keel-db").exists());
}

#[test]
fn an_empty_log_file_is_skipped_only_when_it_is_the_last() {
    // ZooKeeper deletes an empty last log (created just before a crash) and refuses
    // any other file without a header: the import and the member conversion alike.
    let mut session = W::default();
    session.int(20000);
    let next = log_file(&[payload(0x7a, 11, op::CREATE_SESSION, &session, None)], 64);
    let dir = tempfile::tempdir().unwrap();
    let last = zk_dir(
        dir.path(),
        &[(5, sample_snapshot(None))],
        &[(4, sample_log()), (0xb, Vec::new())],
    );
    let s = keel::import::run(&options(&last, &dir.path().join("k")), &mut |_| {}).unwrap();
    assert_eq!((s.last_zxid, s.log_files), (10, 2));
    let c = keel::import::ensemble::convert(&options(&last, &last), &mut |_| {}).unwrap();
    assert_eq!((c.last_zxid, c.logged_txns, c.log_files), (10, 5, 2));

    let dir = tempfile::tempdir().unwrap();
    let inner = zk_dir(
        dir.path(),
        &[(5, sample_snapshot(None))],
        &[(4, sample_log()), (0xb, Vec::new()), (0xc, next)],
    );
    let empty_named = |e: &ImportError| matches!(e, ImportError::Corrupt { path, offset: 0, .. } if path.ends_with("log.b"));
    let e = keel::import::run(&options(&inner, &dir.path().join("k")), &mut |_| {}).unwrap_err();
    assert!(empty_named(&e), "{e}");
    let e = keel::import::ensemble::convert(&options(&inner, &inner), &mut |_| {}).unwrap_err();
    assert!(empty_named(&e), "{e}");
    assert!(!inner.join("keel-db").exists());
}
