//! Heap cost of the DataTree per znode, for issue 5's memory target.
//!
//! Builds a tree the way the server's apply path does (the txn's data `Bytes` cloned into
//! the tree, then the txn dropped) with N children of one parent (`/zkload/k%08d`, as
//! `zkload -p create` names them), each with 100 bytes of data, and reports per znode:
//! the bytes asked of the allocator, the bytes glibc's malloc really hands out for them
//! (its chunks: 16-byte steps, 8 bytes of header, 32 bytes at least), the process's RSS
//! growth, and the live allocations by requested size, which names the parts.
//!
//!     cargo run --release --example tree_memory [-- N]      (N defaults to 1,000,000)

use bytes::Bytes;
use keel::tree::{acl, DataTree};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Arc;

/// Requested sizes up to this are counted one by one in the histogram; larger ones
/// (a leaf of packed znodes is at most 4 KiB unless it holds one larger znode, so leaves
/// fit) share the last slot.
const HIST_SLOTS: usize = 4098;

/// The system allocator with live counters: requested bytes, glibc chunk bytes, and the
/// number of live allocations per requested size.
struct Counting;

static REQUESTED: AtomicIsize = AtomicIsize::new(0);
static CHUNKS: AtomicIsize = AtomicIsize::new(0);
static BY_SIZE: [AtomicIsize; HIST_SLOTS] = [const { AtomicIsize::new(0) }; HIST_SLOTS];

/// The chunk glibc's malloc uses for a request of `size` bytes on 64-bit Linux: size plus
/// an 8-byte header, rounded up to 16, at least 32.
fn chunk_of(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

fn note(size: usize, sign: isize) {
    REQUESTED.fetch_add(sign * size as isize, Relaxed);
    CHUNKS.fetch_add(sign * chunk_of(size) as isize, Relaxed);
    BY_SIZE[size.min(HIST_SLOTS - 1)].fetch_add(sign, Relaxed);
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only
// observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(layout.size(), -1);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(layout.size(), -1);
        note(new_size, 1);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// VmRSS of this process, KiB (0 if /proc is unreadable).
fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn histogram() -> Vec<isize> {
    BY_SIZE.iter().map(|c| c.load(Relaxed)).collect()
}

fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let open = Arc::new(acl::open_acl());
    let payload = vec![b'x'; 100];
    let mut tree = DataTree::new();
    tree.create("/zkload", None, &open, 0, 1, 1, 0)
        .expect("parent");

    let (req0, chunk0, rss0, hist0) = (
        REQUESTED.load(Relaxed),
        CHUNKS.load(Relaxed),
        rss_kib(),
        histogram(),
    );
    let mut path = String::new();
    for i in 0..n {
        use std::fmt::Write;
        path.clear();
        let _ = write!(path, "/zkload/k{i:08}");
        // As the server: the request decoder copies the data into its own Bytes, the txn
        // holds it and its own copy of the ACL, apply hands both to the tree, and the
        // txn goes away.
        let txn_data = Bytes::copy_from_slice(&payload);
        tree.create(
            &path,
            Some(&txn_data),
            &Arc::new(acl::open_acl()),
            0,
            (i + 1) as i32,
            i + 2,
            0,
        )
        .expect("create");
        drop(txn_data);
    }
    let (req1, chunk1, rss1, hist1) = (
        REQUESTED.load(Relaxed),
        CHUNKS.load(Relaxed),
        rss_kib(),
        histogram(),
    );
    let per = |a: isize, b: isize| (a - b) as f64 / n as f64;
    println!("znodes: {n} children of /zkload, 100 bytes of data each");
    println!("requested bytes/znode: {:.1}", per(req1, req0));
    println!("malloc chunk bytes/znode: {:.1}", per(chunk1, chunk0));
    println!(
        "RSS growth bytes/znode: {:.1}",
        (rss1 - rss0) as f64 * 1024.0 / n as f64
    );
    println!("live allocations per znode by requested size (>= 0.01 per znode):");
    for (size, (a, b)) in hist1.iter().zip(&hist0).enumerate() {
        let count = (a - b) as f64 / n as f64;
        if count.abs() >= 0.01 {
            println!(
                "  {size:>5} B (chunk {:>5} B): {count:.3} per znode = {:.1} B/znode",
                chunk_of(size),
                count * chunk_of(size) as f64
            );
        }
    }
    // Keep the tree alive until after the measurement, and check it is what was built.
    assert_eq!(tree.node_count() as i64, n + 5);
}
