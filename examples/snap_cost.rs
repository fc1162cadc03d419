//! CPU cost of each step of a SNAP sync, for issue 16's catch-up target.
//!
//! Builds a tree of N znodes of 100 bytes (`/zkload/k%08d`, as `zkload -p create` names
//! them) and times, one after another on one thread: the leader writing ZooKeeper's
//! DataTree stream ([`snap::write_stream`]), the learner's walk finding the stream's end
//! ([`SnapScan`], fed in 64 KiB reads as the socket does), its parse into a new tree
//! ([`snap::read_stream`] + [`DataTree::insert_loaded`]), and its encoding of keel's own
//! snapshot form for storage ([`tree_snapshot::encode_nodes`], 1 MiB chunks).
//!
//!     cargo run --release --example snap_cost [-- N]      (N defaults to 1,000,000)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use keel::tree::{acl, snapshot as tree_snapshot, DataTree};
use keel::zab::wire::packet::Limits;
use keel::zab::wire::reader::Input;
use keel::zab::wire::snap;
use keel::zab::wire::snap_frame::SnapScan;

fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let open = Arc::new(acl::open_acl());
    let payload = Bytes::from(vec![b'x'; 100]);
    let mut tree = DataTree::new();
    tree.create("/zkload", None, &open, 0, 1, 1, 0)
        .expect("parent");
    let mut path = String::new();
    for i in 0..n {
        use std::fmt::Write;
        path.clear();
        let _ = write!(path, "/zkload/k{i:08}");
        tree.create(&path, Some(&payload), &open, 0, (i + 1) as i32, i + 2, 0)
            .expect("create");
    }
    println!("znodes: {n} children of /zkload, 100 bytes of data each");

    let t = Instant::now();
    let mut out = BytesMut::new();
    snap::write_stream(&tree, &[], &mut out);
    let stream = out.freeze();
    println!(
        "leader: write_stream {} bytes in {} ms",
        stream.len(),
        t.elapsed().as_millis()
    );

    let t = Instant::now();
    let mut wire = stream.to_vec();
    wire.extend_from_slice(&(10i32).to_be_bytes());
    wire.extend_from_slice(b"BenWasHere");
    let mut scan = SnapScan::new(Limits::default(), 1 << 30);
    let mut end = None;
    for upto in (65536..wire.len() + 65536).step_by(65536) {
        end = scan.scan(&wire[..upto.min(wire.len())]).expect("scan");
        if end.is_some() {
            break;
        }
    }
    let end = end.expect("the stream's end");
    println!(
        "learner: SnapScan to the end ({} bytes) in {} ms",
        end.used,
        t.elapsed().as_millis()
    );

    let t = Instant::now();
    let mut r = Input::new(&stream);
    snap::read_stream(&mut r, &mut HashMap::new(), &mut |_| Ok(())).expect("read_stream");
    println!(
        "learner: read_stream alone (no tree) in {} ms",
        t.elapsed().as_millis()
    );

    // SNAP_COST_PARSE_ONLY=N: the parse into a tree N times more, alone (for a profiler).
    let repeat: usize = std::env::var("SNAP_COST_PARSE_ONLY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for _ in 0..repeat {
        parse_into_tree(&stream);
    }
    if repeat > 0 {
        return;
    }
    let copy = parse_into_tree(&stream);

    let t = Instant::now();
    let mut cursor: Option<String> = None;
    let mut total = 0;
    loop {
        let mut buf = BytesMut::with_capacity(1 << 20);
        let next = tree_snapshot::encode_nodes(&copy, cursor.as_deref(), 1 << 20, &mut buf);
        total += buf.len();
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    println!(
        "learner: keel's snapshot form, {total} bytes, in {} ms",
        t.elapsed().as_millis()
    );
}

/// The learner's parse of `stream` into a new tree, timed and printed.
fn parse_into_tree(stream: &[u8]) -> DataTree {
    let t = Instant::now();
    let mut r = Input::new(stream);
    let mut copy = DataTree::empty();
    snap::read_stream(&mut r, &mut HashMap::new(), &mut |node| {
        copy.insert_loaded(node.path, node.data, node.acl, &node.meta);
        Ok(())
    })
    .expect("read_stream");
    copy.finish_loading();
    println!(
        "learner: read_stream into a tree in {} ms",
        t.elapsed().as_millis()
    );
    copy
}
