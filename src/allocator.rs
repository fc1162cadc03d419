//! [`Allocator`]: mimalloc as Rust's global allocator, by its plain entry points.
//!
//! The `mimalloc` crate's `MiMalloc` hands every allocation to `mi_malloc_aligned`
//! (and `mi_realloc_aligned`), whatever its alignment. In mimalloc v3 that path costs
//! more than `mi_malloc`'s, and falls to `mi_theap_malloc_zero_aligned_at_generic` on a
//! page change: under callgrind, allocation was 8 % of an ensemble write's instructions
//! (`examples/broadcast_cost`, issue 16). Almost every Rust allocation asks for an
//! alignment of 8 or less, which every mimalloc block has (block sizes are multiples of
//! the word size), so those take `mi_malloc` / `mi_realloc` / `mi_zalloc`; larger
//! alignments keep the aligned entry points. Frees are `mi_free` either way.

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment, bytes, that every block `mi_malloc` returns has (`MI_INTPTR_SIZE`
/// on 64-bit targets: mimalloc's size classes are multiples of the word size, and a
/// page's first block starts aligned; mimalloc's own aligned realloc sends alignments
/// up to this to the plain one). Not so in a debug build of mimalloc with guarded
/// pages sampled (`MIMALLOC_GUARDED_*`), which places a block against its guard page
/// at any byte: keel builds mimalloc without its `debug` feature.
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc, with plain calls for alignments of at most [`PLAIN_ALIGN`] (see the
/// module documentation). Use as `#[global_allocator] static A: Allocator = Allocator;`.
pub struct Allocator;

// SAFETY: every pointer returned comes from mimalloc with at least the layout's size and
// alignment (plain calls only when the alignment is at most the word size, which every
// mimalloc block has), and `mi_free` / `mi_realloc*` accept any pointer mimalloc
// returned, aligned or not.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_malloc(layout.size()).cast()
        } else {
            mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_zalloc(layout.size()).cast()
        } else {
            mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_layouts_alignment_and_keep_their_bytes_through_realloc() {
        let a = Allocator;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            // Up to past 512 KiB, where mimalloc gives a block a page of its own.
            for size in [1, 7, 8, 9, 24, 100, 1000, 5000, 70_000, 600_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero-sized layout; every block is freed once, by the
                // allocator that made it, with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    std::ptr::write_bytes(p, 0xa5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc: size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xa5), "bytes kept");
                    let grown = Layout::from_size_align(size * 3, align).unwrap();
                    let shrunk = size.div_ceil(2);
                    let r = a.realloc(q, grown, shrunk);
                    assert_eq!(r as usize % align, 0, "shrink: size {size} align {align}");
                    assert!((0..shrunk).all(|i| *r.add(i) == 0xa5), "bytes kept");
                    a.dealloc(r, Layout::from_size_align(shrunk, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
