//! Shared pieces of the parsers' fuzz tests (`fuzz_*` tests beside each parser): the case count
//! and structured mutations of valid encodings.
//!
//! Every fuzz test runs a small fixed number of cases by default, so that the whole set stays
//! quick in CI; `PROPTEST_CASES=100000 cargo test -p hudi-keeper-core fuzz_` runs them longer
//! (see `docs/reliability.md`, "Fuzzing"). Failing cases proptest finds are kept in
//! `crates/core/proptest-regressions/` and replayed first on every run.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// The proptest configuration of a fuzz test: `default_cases` cases unless `PROPTEST_CASES` is
/// set, then that many.
pub(crate) fn config(default_cases: u32) -> Config {
    let from_env = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    Config {
        cases: from_env.unwrap_or(default_cases),
        ..Config::default()
    }
}

/// Length-field values a hostile or damaged file may carry.
pub(crate) const HUGE: [u64; 9] = [
    u64::MAX,
    i64::MAX as u64,
    1 << 62,
    u32::MAX as u64,
    i32::MAX as u64,
    (i32::MAX as u64) + 1,
    1 << 30,
    0xfff_ffff,
    0xffff,
];

/// How a length is encoded where a mutation writes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Width {
    /// Big-endian 2, 4 or 8 bytes (HFile, log blocks, ZooKeeper's jute).
    Be2,
    Be4,
    Be8,
    /// An Avro zig-zag varint (`long`).
    AvroLong,
    /// A protobuf / unsigned base-128 varint.
    Varint,
}

fn encode(value: u64, width: Width) -> Vec<u8> {
    match width {
        Width::Be2 => (value as u16).to_be_bytes().to_vec(),
        Width::Be4 => (value as u32).to_be_bytes().to_vec(),
        Width::Be8 => value.to_be_bytes().to_vec(),
        Width::AvroLong => {
            let v = value as i64;
            varint(((v << 1) ^ (v >> 63)) as u64)
        }
        Width::Varint => varint(value),
    }
}

fn varint(mut z: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
    out
}

/// One change to a valid encoding.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// Flip one bit.
    Flip(Index, u8),
    /// Cut the bytes at a point.
    Truncate(Index),
    /// Remove a run of bytes.
    Remove(Index, usize),
    /// Insert bytes at a point.
    Insert(Index, Vec<u8>),
    /// Append bytes.
    Extend(Vec<u8>),
    /// Overwrite bytes at a point (the rest shifts nothing).
    Overwrite(Index, Vec<u8>),
    /// Write a huge length (or its negation) at a point, in one of the encodings.
    HugeLength(Index, usize, bool, Width),
}

impl Mutation {
    fn apply(&self, b: &mut Vec<u8>) {
        let at = |i: &Index, b: &Vec<u8>| if b.is_empty() { 0 } else { i.index(b.len()) };
        match self {
            Mutation::Flip(i, bit) => {
                if !b.is_empty() {
                    let p = at(i, b);
                    b[p] ^= 1 << (bit % 8);
                }
            }
            Mutation::Truncate(i) => {
                let p = at(i, b);
                b.truncate(p);
            }
            Mutation::Remove(i, n) => {
                let p = at(i, b);
                let end = (p + n).min(b.len());
                b.drain(p..end);
            }
            Mutation::Insert(i, bytes) => {
                let p = at(i, b);
                b.splice(p..p, bytes.iter().copied());
            }
            Mutation::Extend(bytes) => b.extend_from_slice(bytes),
            Mutation::Overwrite(i, bytes) => overwrite(b, at(i, b), bytes),
            Mutation::HugeLength(i, which, negative, width) => {
                let v = HUGE[which % HUGE.len()];
                let v = if *negative { v.wrapping_neg() } else { v };
                let p = at(i, b);
                overwrite(b, p, &encode(v, *width));
            }
        }
    }
}

fn overwrite(b: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    let end = (at + bytes.len()).min(b.len());
    b.splice(at..end, bytes.iter().copied());
}

fn width() -> impl Strategy<Value = Width> {
    prop_oneof![
        Just(Width::Be2),
        Just(Width::Be4),
        Just(Width::Be8),
        Just(Width::AvroLong),
        Just(Width::Varint),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let bytes = prop::collection::vec(any::<u8>(), 1..16);
    prop_oneof![
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        2 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Remove(i, n)),
        1 => (any::<Index>(), bytes.clone()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => bytes.clone().prop_map(Mutation::Extend),
        1 => (any::<Index>(), bytes).prop_map(|(i, b)| Mutation::Overwrite(i, b)),
        3 => (any::<Index>(), 0..HUGE.len(), any::<bool>(), width())
            .prop_map(|(i, w, n, e)| Mutation::HugeLength(i, w, n, e)),
    ]
}

/// `valid` changed by one to four [`Mutation`]s.
pub(crate) fn mutated(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(mutation(), 1..=4).prop_map(move |ms| {
        let mut b = valid.clone();
        for m in &ms {
            m.apply(&mut b);
        }
        b
    })
}

/// One of `valid` (picked by the strategy) changed by one to four [`Mutation`]s.
pub(crate) fn mutated_one_of(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(valid),
        prop::collection::vec(mutation(), 1..=4),
    )
        .prop_map(|(mut b, ms)| {
            for m in &ms {
                m.apply(&mut b);
            }
            b
        })
}

/// Arbitrary bytes, up to `max` long.
pub(crate) fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Text that is mostly `alphabet` characters with some arbitrary ones mixed in.
pub(crate) fn text_from(alphabet: &'static str, max: usize) -> impl Strategy<Value = String> {
    let chars: Vec<char> = alphabet.chars().collect();
    prop::collection::vec(
        prop_oneof![
            6 => proptest::sample::select(chars),
            1 => any::<char>(),
        ],
        0..max,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

/// The largest single allocation a closure makes on this thread: every allocation of the test
/// binary goes through [`Probe`], which notes the largest size requested per thread. A parser
/// that sized a buffer from a declared length would show it here even when the memory is never
/// touched.
pub(crate) fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|c| {
        if size > c.get() {
            c.set(size);
        }
    });
}

/// The system allocator, noting sizes (see [`largest_allocation`]).
struct Probe;

// SAFETY: every call is passed on to the system allocator unchanged; `note` only touches a
// const-initialised thread-local `Cell` (no allocation, no destructor).
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static PROBE: Probe = Probe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_lengths_are_written_in_each_encoding() {
        assert_eq!(encode(u32::MAX as u64, Width::Be4), [0xff; 4]);
        assert_eq!(encode(1, Width::AvroLong), [2]);
        assert_eq!(encode(u64::MAX, Width::AvroLong), [1]); // -1
        assert_eq!(encode(300, Width::Varint), [0xac, 0x02]);
        let mut b = vec![0u8; 6];
        overwrite(&mut b, 4, &[1, 2, 3]);
        assert_eq!(b, [0, 0, 0, 0, 1, 2, 3]);
    }

    #[test]
    fn the_probe_sees_an_allocation_that_is_never_touched() {
        let (v, largest) = largest_allocation(|| Vec::<u8>::with_capacity(200 << 20));
        assert!(largest >= 200 << 20, "{largest}");
        drop(v);
        let ((), small) = largest_allocation(|| ());
        assert!(small < 1 << 20, "{small}");
    }
}
