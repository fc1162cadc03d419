//! What keeping ZooKeeper's tree digest costs a change: times a million creates under
//! one parent and a million setData on a tree (digest kept, as always), then the digest
//! work alone for the same changes (per create: the child's digest, the parent's old
//! digest and its Stat-only change; per setData: the old and new digests).
//!
//! `cargo run --release --example digest_cost`
use keel::tree::digest::{after_meta_change, node_digest};
use keel::tree::{acl::open_acl, DataTree, ZnodeMeta};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n = 1_000_000i64;
    let open = Arc::new(open_acl());
    let data = vec![7u8; 100];
    for round in 0..3 {
        let mut t = DataTree::new();
        t.create("/bench", None, &open, 0, 1, 1, 1).unwrap();
        let start = Instant::now();
        for i in 0..n {
            t.create(
                &format!("/bench/n{i:07}"),
                Some(&data),
                &open,
                0,
                i as i32 + 1,
                i + 2,
                i,
            )
            .unwrap();
        }
        let creates = start.elapsed();
        let start = Instant::now();
        for i in 0..n {
            t.set_data(&format!("/bench/n{i:07}"), Some(&data[..50]), 1, n + i, i)
                .unwrap();
        }
        let sets = start.elapsed();
        // The digest work alone for the same changes: per create the child's digest, the
        // parent's old digest and its Stat-only change; per set the old and new digests.
        let paths: Vec<String> = (0..n).map(|i| format!("/bench/n{i:07}")).collect();
        let start = Instant::now();
        let mut sum = 0i64;
        let parent = ZnodeMeta::default();
        for i in 0..n {
            let p = &paths[i as usize];
            let m = ZnodeMeta::created(0, i + 2, i);
            let mut pm = parent;
            pm.child_creates = i as i32;
            let before = node_digest(b"/bench", &[], &parent);
            sum = sum
                .wrapping_add(node_digest(p.as_bytes(), &data, &m))
                .wrapping_add(after_meta_change(before, &parent, &pm));
        }
        let create_digest = start.elapsed();
        let start = Instant::now();
        for i in 0..n {
            let p = &paths[i as usize];
            let m = ZnodeMeta::created(0, i + 2, i);
            sum = sum
                .wrapping_add(node_digest(p.as_bytes(), &data, &m))
                .wrapping_add(node_digest(p.as_bytes(), &data[..50], &m));
        }
        let set_digest = start.elapsed();
        let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
        println!(
            "round {round}: create {:.0} ns (digest work {:.0} ns), setData {:.0} ns (digest work {:.0} ns); digest {} {sum}",
            per(creates), per(create_digest), per(sets), per(set_digest), t.digest()
        );
    }
    // The path formatting alone, to subtract.
    let start = Instant::now();
    let mut l = 0;
    for i in 0..n {
        l += format!("/bench/n{i:07}").len();
    }
    println!(
        "path format alone {:.0} ns ({l})",
        start.elapsed().as_nanos() as f64 / n as f64
    );
}
