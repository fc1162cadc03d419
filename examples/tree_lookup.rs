//! Time of a znode create (`DataTree::create`, in path order), a lookup
//! (`DataTree::get`) and a setData (`DataTree::set_data`) when the tree is not in the
//! CPU's caches, as on a busy ensemble member (issue 16: the first touch of a packed
//! leaf was 6-10 % of a member's CPU per set).
//!
//! Builds T trees of K znodes (`/zkload/k%08d`, 100 bytes each, as `zkload -p create`
//! names them), more than the caches hold together, then does N operations at random
//! znodes of random trees and reports ns per operation; a warm pass (one tree, a few
//! hundred znodes) is printed beside it for the cost without memory stalls.
//!
//!     cargo run --release --example tree_lookup [-- T K N]   (16 10000 2000000)

use keel::tree::{acl, DataTree};
use std::sync::Arc;
use std::time::Instant;

/// xorshift64*: a fixed, cheap sequence of indices, the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn path(i: usize) -> String {
    format!("/zkload/k{i:08}")
}

/// ns per operation of `op` over `n` random (tree, znode) picks among `trees` trees and
/// `keys` znodes; the paths are made before the clock starts.
fn time(n: usize, trees: usize, keys: usize, mut op: impl FnMut(usize, &str)) -> f64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let picks: Vec<(usize, String)> = (0..n)
        .map(|_| {
            let r = rng.next() as usize;
            (r % trees, path((r >> 20) % keys))
        })
        .collect();
    let t0 = Instant::now();
    for (t, p) in &picks {
        op(*t, p);
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let (trees, keys, n) = (arg(1, 16), arg(2, 10_000), arg(3, 2_000_000));
    let open = Arc::new(acl::open_acl());
    let data = vec![b'x'; 100];
    // Creates in path order, as `zkload -p create` makes them; the paths are made
    // before the clock starts.
    let paths: Vec<String> = (0..keys).map(path).collect();
    let t0 = Instant::now();
    let mut all: Vec<DataTree> = (0..trees)
        .map(|_| {
            let mut tree = DataTree::new();
            tree.create("/zkload", None, &open, 0, 1, 1, 0)
                .expect("parent");
            for (i, p) in paths.iter().enumerate() {
                tree.create(p, Some(&data), &open, 0, i as i32 + 1, i as i64 + 2, 0)
                    .expect("create");
            }
            tree
        })
        .collect();
    let create = t0.elapsed().as_nanos() as f64 / (trees * keys) as f64;
    let mut found = 0usize;
    let cold_get = time(n, trees, keys, |t, p| {
        found += usize::from(all[t].get(p).is_some());
    });
    let warm_get = time(n, 1, keys.min(300), |_, p| {
        found += usize::from(all[0].get(p).is_some());
    });
    let mut zxid = 1 << 32;
    let mut set = |t: usize, p: &str, tree: &mut [DataTree]| {
        zxid += 1;
        tree[t]
            .set_data(p, Some(&data), -1, zxid, 0)
            .expect("set_data");
    };
    let cold_set = time(n, trees, keys, |t, p| set(t, p, &mut all));
    let warm_set = time(n, 1, keys.min(300), |t, p| set(t, p, &mut all));
    assert_eq!(found, 2 * n, "every pick is a znode");
    println!(
        "{trees} trees x {keys} znodes, {n} ops each: create {create:.0} ns; get {cold_get:.0} ns cold, \
         {warm_get:.0} ns warm; set_data {cold_set:.0} ns cold, {warm_set:.0} ns warm"
    );
}
