//! The conformance suite every [`Storage`] backend must pass: the rules in
//! `storage/mod.rs` (from shared/DESIGN.md, "One write, end to end"), checked the same
//! way against each backend so the server may rely on them whichever it runs on.
//!
//! Plain functions that panic with a message naming the broken rule, so each backend's
//! tests (tests/storage.rs) call [`run_all`]. The sections run in order over one store
//! and build on each other's state; each uses zxids of its own epoch, above the ones
//! before it, so appends stay in order. What a backend cannot show through the trait
//! (crashes, torn writes, damaged bytes) its own tests check.

use super::{LogEntry, Snapshot, Storage, StorageError};

/// Runs every section against the backend `open` returns. Each call of `open` must open
/// the SAME durable state (a restart of the server over the same disk); the first call
/// must find it empty. The previous store is dropped before `open` is called again.
///
/// Panics: when the backend breaks a rule, with a message naming it.
pub fn run_all<S: Storage>(mut open: impl FnMut() -> S) {
    empty_store(&mut open);
    append_and_read(&mut open);
    out_of_order_refused(&mut open);
    durable_across_reopen(&mut open);
    snapshots(&mut open);
    purge(&mut open);
    meta_round_trip(&mut open);
}

/// A ZooKeeper zxid: epoch in the high 32 bits, counter in the low 32.
fn zxid(epoch: i64, counter: i64) -> i64 {
    (epoch << 32) | counter
}

/// An entry whose data depends on its zxid and whose sizes vary (empty, one byte, every
/// byte value, 100 KiB), so a backend that mixes up, cuts or pads data is caught.
fn entry(zxid: i64) -> LogEntry {
    let data = match zxid % 5 {
        0 => Vec::new(),
        1 => vec![zxid as u8],
        2 => (0..=255u8).chain(zxid.to_be_bytes()).collect(),
        3 => (0..100 * 1024).map(|i| (i as i64 ^ zxid) as u8).collect(),
        _ => format!("txn 0x{zxid:x}").into_bytes(),
    };
    LogEntry { zxid, data }
}

fn entries(epoch: i64, counters: &[i64]) -> Vec<LogEntry> {
    counters.iter().map(|&c| entry(zxid(epoch, c))).collect()
}

fn ok<T>(result: Result<T, StorageError>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: unexpected error: {e}"))
}

fn read_all<S: Storage>(store: &S, after: i64) -> Vec<LogEntry> {
    let mut read = Vec::new();
    ok(
        store.read_log(after, &mut |e| {
            read.push(e);
            Ok(())
        }),
        &format!("read_log(after = 0x{after:x})"),
    );
    read
}

fn zxids(entries: &[LogEntry]) -> Vec<String> {
    entries.iter().map(|e| format!("0x{:x}", e.zxid)).collect()
}

/// Asserts `read` equals `expected`, naming zxids rather than dumping 100 KiB payloads.
fn assert_entries(read: &[LogEntry], expected: &[LogEntry], what: &str) {
    assert_eq!(zxids(read), zxids(expected), "{what}: wrong zxids");
    for (r, e) in read.iter().zip(expected) {
        assert!(
            r.data == e.data,
            "{what}: data of zxid 0x{:x} differs ({} bytes read, {} written)",
            e.zxid,
            r.data.len(),
            e.data.len()
        );
    }
}

fn assert_snapshot<S: Storage>(store: &S, expected: Option<&Snapshot>, what: &str) {
    let latest = ok(store.latest_snapshot(), &format!("{what}: latest_snapshot"));
    let shape = |s: Option<&Snapshot>| {
        s.map(|s| {
            let sizes: Vec<usize> = s.chunks.iter().map(Vec::len).collect();
            format!("zxid 0x{:x}, chunk sizes {sizes:?}", s.zxid)
        })
    };
    assert_eq!(
        shape(latest.as_ref()),
        shape(expected),
        "{what}: wrong latest snapshot"
    );
    assert!(
        latest.as_ref() == expected,
        "{what}: latest snapshot's chunk bytes differ from those written"
    );
}

fn assert_out_of_order<S: Storage>(store: &mut S, batch: &[LogEntry], zxid: i64, last: i64) {
    match store.append(batch, true) {
        Err(StorageError::OutOfOrder { zxid: z, last: l }) => assert_eq!(
            (z, l),
            (zxid, last),
            "OutOfOrder for append of {:?} names the wrong zxids",
            zxids(batch)
        ),
        other => panic!(
            "append of {:?} after 0x{last:x} must fail with OutOfOrder, got {other:?}",
            zxids(batch)
        ),
    }
}

/// A fresh store holds nothing, and the calls that change nothing succeed on it.
fn empty_store<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    for round in ["fresh store", "fresh store after no-op calls and a reopen"] {
        assert_eq!(ok(store.last_zxid(), round), None, "{round}: last_zxid");
        assert!(read_all(&store, -1).is_empty(), "{round}: log not empty");
        assert_snapshot(&store, None, round);
        assert!(
            ok(store.snapshots(), round).is_empty(),
            "{round}: snapshots not empty"
        );
        assert_eq!(
            ok(store.get_meta("current_epoch"), round),
            None,
            "{round}: meta not empty"
        );
        ok(store.append(&[], true), "empty synced append");
        ok(store.append(&[], false), "empty unsynced append");
        ok(store.purge(1), "purge of an empty store");
        drop(store);
        store = open();
    }
}

/// Appended entries read back in zxid order, exactly, from any `after`.
fn append_and_read<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    let first = entries(1, &[1, 2, 3]);
    let second = entries(1, &[5, 8, 13, 21]);
    ok(store.append(&first, true), "synced append");
    ok(store.append(&second, false), "unsynced append");
    let all: Vec<LogEntry> = first.iter().chain(&second).cloned().collect();

    assert_entries(&read_all(&store, -1), &all, "read_log(after = -1)");
    assert_entries(
        &read_all(&store, i64::MIN),
        &all,
        "read_log(after = i64::MIN)",
    );
    assert_entries(&read_all(&store, 0), &all, "read_log(after = 0)");
    assert_entries(
        &read_all(&store, zxid(1, 3)),
        &all[3..],
        "read_log(after = a stored zxid) starts above it",
    );
    assert_entries(
        &read_all(&store, zxid(1, 4)),
        &all[3..],
        "read_log(after = a zxid between stored ones)",
    );
    assert!(
        read_all(&store, zxid(1, 21)).is_empty(),
        "read_log(after = the last zxid) must read nothing"
    );
    assert!(
        read_all(&store, i64::MAX).is_empty(),
        "read_log(after = i64::MAX) must read nothing"
    );
    assert_eq!(
        ok(store.last_zxid(), "last_zxid"),
        Some(zxid(1, 21)),
        "last_zxid after appends"
    );

    // The callback's error stops the read and comes back unchanged.
    let mut calls = 0;
    let result = store.read_log(-1, &mut |_| {
        calls += 1;
        if calls == 2 {
            return Err(StorageError::Backend("stop here".to_owned()));
        }
        Ok(())
    });
    assert!(
        matches!(&result, Err(StorageError::Backend(m)) if m == "stop here"),
        "read_log must return the callback's error, got {result:?}"
    );
    assert_eq!(calls, 2, "read_log must stop at the callback's first error");
}

/// Zxids only increase: a refused append stores nothing and the store stays usable.
fn out_of_order_refused<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    let last = zxid(1, 21);
    assert_out_of_order(&mut store, &[entry(last)], last, last);
    assert_out_of_order(&mut store, &[entry(zxid(1, 2))], zxid(1, 2), last);
    assert_out_of_order(&mut store, &[entry(-1)], -1, last);
    assert_out_of_order(&mut store, &entries(2, &[2, 1]), zxid(2, 1), zxid(2, 2));
    assert_out_of_order(&mut store, &entries(2, &[1, 3, 3]), zxid(2, 3), zxid(2, 3));
    assert_eq!(
        ok(store.last_zxid(), "last_zxid"),
        Some(last),
        "a refused append must store nothing (last_zxid moved)"
    );
    assert!(
        read_all(&store, last).is_empty(),
        "a refused append must store nothing, not even its valid prefix"
    );
    let next = entries(2, &[1]);
    ok(store.append(&next, true), "append after refused ones");
    assert_entries(&read_all(&store, last), &next, "append after refused ones");
}

/// Appends survive closing and reopening, and the reopened store still knows the last
/// zxid for its order check.
fn durable_across_reopen<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    let before = read_all(&store, -1);
    let synced = entries(3, &[1, 2, 3]);
    let unsynced = entries(3, &[4, 5]);
    ok(store.append(&synced, true), "synced append");
    ok(store.append(&unsynced, false), "unsynced append");
    drop(store);

    let mut store = open();
    let expected: Vec<LogEntry> = before
        .iter()
        .chain(&synced)
        .chain(&unsynced)
        .cloned()
        .collect();
    assert_entries(
        &read_all(&store, -1),
        &expected,
        "log after a clean reopen (synced and unsynced appends survive it)",
    );
    assert_eq!(
        ok(store.last_zxid(), "last_zxid after reopen"),
        Some(zxid(3, 5)),
        "last_zxid after reopen"
    );
    assert_out_of_order(&mut store, &[entry(zxid(3, 1))], zxid(3, 1), zxid(3, 5));
}

/// Snapshots: chunks written in any order become visible only when finished, come back
/// intact, survive a reopen; the newest complete one is the latest.
fn snapshots<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    let a = Snapshot {
        zxid: zxid(4, 10),
        chunks: vec![
            Vec::new(),
            (0..300 * 1024).map(|i| (i * 7) as u8).collect(),
            b"tail".to_vec(),
        ],
    };
    for index in [1, 0, 2] {
        ok(
            store.put_snapshot_chunk(a.zxid, index, &a.chunks[index as usize]),
            "put_snapshot_chunk",
        );
    }
    assert_snapshot(
        &store,
        None,
        "snapshot with chunks written but not finished",
    );
    assert!(
        ok(store.snapshots(), "snapshots").is_empty(),
        "an unfinished snapshot must not be listed"
    );
    ok(store.finish_snapshot(a.zxid, 3), "finish_snapshot");
    assert_snapshot(&store, Some(&a), "finished snapshot");
    assert_eq!(ok(store.snapshots(), "snapshots"), vec![a.zxid]);
    drop(store);

    let mut store = open();
    assert_snapshot(&store, Some(&a), "finished snapshot after reopen");
    let b = Snapshot {
        zxid: zxid(4, 20),
        chunks: vec![b"first".to_vec(), b"second".to_vec()],
    };
    for (index, chunk) in b.chunks.iter().enumerate() {
        ok(
            store.put_snapshot_chunk(b.zxid, index as u32, chunk),
            "put_snapshot_chunk",
        );
    }
    ok(store.finish_snapshot(b.zxid, 2), "finish_snapshot");
    assert_snapshot(&store, Some(&b), "the newer of two snapshots is the latest");
    ok(
        store.put_snapshot_chunk(zxid(4, 30), 0, b"never finished"),
        "put_snapshot_chunk",
    );
    assert_snapshot(
        &store,
        Some(&b),
        "an unfinished newer snapshot must not replace the latest",
    );
    assert_eq!(
        ok(store.snapshots(), "snapshots"),
        vec![a.zxid, b.zxid],
        "snapshots lists the complete ones, oldest first"
    );
    drop(store);

    let store = open();
    assert_snapshot(&store, Some(&b), "latest snapshot after reopen");
    assert_eq!(
        ok(store.snapshots(), "snapshots after reopen"),
        vec![a.zxid, b.zxid]
    );
    assert_eq!(
        ok(store.last_zxid(), "last_zxid"),
        Some(zxid(3, 5)),
        "snapshots must not change the log"
    );
}

fn write_snapshot<S: Storage>(store: &mut S, snapshot: &Snapshot, finish: bool) {
    for (index, chunk) in snapshot.chunks.iter().enumerate() {
        ok(
            store.put_snapshot_chunk(snapshot.zxid, index as u32, chunk),
            "put_snapshot_chunk",
        );
    }
    if finish {
        ok(
            store.finish_snapshot(snapshot.zxid, snapshot.chunks.len() as u32),
            "finish_snapshot",
        );
    }
}

fn small_snapshot(zxid: i64) -> Snapshot {
    Snapshot {
        zxid,
        chunks: vec![
            format!("state at 0x{zxid:x}").into_bytes(),
            vec![zxid as u8; 3],
        ],
    }
}

/// Purge keeps the `retain` newest complete snapshots (at least one) and only the log
/// entries above the oldest kept one; unfinished snapshots newer than the newest
/// complete one survive it.
fn purge<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    // Complete so far: 0x400000000a and 0x4000000014 (from `snapshots`).
    let b = zxid(4, 20);
    let log = entries(5, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    ok(store.append(&log, true), "append");
    let s1 = small_snapshot(zxid(5, 3));
    let s2 = small_snapshot(zxid(5, 6));
    let unfinished = small_snapshot(zxid(5, 8));
    write_snapshot(&mut store, &s1, true);
    write_snapshot(&mut store, &s2, true);
    write_snapshot(&mut store, &unfinished, false);

    ok(store.purge(3), "purge(3)");
    assert_eq!(
        ok(store.snapshots(), "snapshots"),
        vec![b, s1.zxid, s2.zxid],
        "purge(3) keeps the 3 newest complete snapshots"
    );
    assert_entries(
        &read_all(&store, -1),
        &log,
        "purge(3) deletes the log up to the oldest kept snapshot's zxid",
    );
    assert_snapshot(&store, Some(&s2), "latest after purge(3)");

    ok(store.purge(10), "purge(10)");
    assert_eq!(
        ok(store.snapshots(), "snapshots"),
        vec![b, s1.zxid, s2.zxid],
        "purge with more to retain than exist deletes no snapshot"
    );
    assert_entries(&read_all(&store, -1), &log, "log after purge(10)");

    ok(store.purge(1), "purge(1)");
    assert_eq!(
        ok(store.snapshots(), "snapshots"),
        vec![s2.zxid],
        "purge(1) keeps only the newest complete snapshot"
    );
    assert_entries(
        &read_all(&store, -1),
        &log[6..],
        "purge(1) keeps only entries above the kept snapshot's zxid",
    );
    assert_eq!(ok(store.last_zxid(), "last_zxid"), Some(zxid(5, 9)));
    ok(
        store.finish_snapshot(unfinished.zxid, unfinished.chunks.len() as u32),
        "finish_snapshot",
    );
    assert_snapshot(
        &store,
        Some(&unfinished),
        "an unfinished snapshot newer than the newest complete one survives purge",
    );
    drop(store);

    let mut store = open();
    assert_eq!(
        ok(store.snapshots(), "snapshots after reopen"),
        vec![s2.zxid, unfinished.zxid],
        "purge is durable"
    );
    assert_entries(
        &read_all(&store, -1),
        &log[6..],
        "log after purge and reopen",
    );

    ok(store.purge(0), "purge(0)");
    assert_eq!(
        ok(store.snapshots(), "snapshots"),
        vec![unfinished.zxid],
        "purge(0) keeps one snapshot, as purge(1)"
    );
    assert_entries(&read_all(&store, -1), &log[8..], "log after purge(0)");

    // A snapshot at the last zxid leaves no log entry needed: last_zxid then reports
    // an empty log, and the server takes its zxid from the snapshot.
    let last = small_snapshot(zxid(5, 9));
    write_snapshot(&mut store, &last, true);
    ok(store.purge(1), "purge(1)");
    assert!(
        read_all(&store, -1).is_empty(),
        "purge must delete entries up to and including the kept snapshot's zxid"
    );
    assert_eq!(
        ok(store.last_zxid(), "last_zxid"),
        None,
        "last_zxid of a log purged empty"
    );
    assert_snapshot(&store, Some(&last), "latest after purging the whole log");
    drop(store);

    let mut store = open();
    assert_eq!(ok(store.last_zxid(), "last_zxid after reopen"), None);
    let next = entries(6, &[1]);
    ok(
        store.append(&next, true),
        "append after the log was purged empty",
    );
    assert_entries(
        &read_all(&store, -1),
        &next,
        "append after the log was purged",
    );
}

/// Metadata round-trips, overwrites, and survives a reopen.
fn meta_round_trip<S: Storage>(open: &mut impl FnMut() -> S) {
    let mut store = open();
    let binary: Vec<u8> = (0..=255).collect();
    ok(
        store.put_meta("current_epoch", &3u32.to_be_bytes()),
        "put_meta",
    );
    ok(store.put_meta("accepted_epoch", b"first"), "put_meta");
    ok(
        store.put_meta("accepted_epoch", &binary),
        "put_meta overwrite",
    );
    ok(store.put_meta("empty", b""), "put_meta of an empty value");
    for round in ["meta", "meta after reopen"] {
        assert_eq!(
            ok(store.get_meta("current_epoch"), round),
            Some(3u32.to_be_bytes().to_vec()),
            "{round}: current_epoch"
        );
        assert_eq!(
            ok(store.get_meta("accepted_epoch"), round),
            Some(binary.clone()),
            "{round}: an overwritten key holds the last value"
        );
        assert_eq!(
            ok(store.get_meta("empty"), round),
            Some(Vec::new()),
            "{round}: an empty value is stored, not absent"
        );
        assert_eq!(
            ok(store.get_meta("never_written"), round),
            None,
            "{round}: absent key"
        );
        drop(store);
        store = open();
    }
}
