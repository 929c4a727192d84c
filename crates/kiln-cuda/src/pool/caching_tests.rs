//! Property tests and the fragmentation benchmark of the caching allocator, over a simulated
//! address space (the algorithm is the same one the GPU runs).

use super::*;
use proptest::prelude::*;

/// A simulated device: a bump allocator with a capacity, returning freed ranges to a list.
struct FakeDevice {
    next: u64,
    capacity: u64,
    used: u64,
    live: HashMap<u64, u64>,
    allocs: u64,
}

impl FakeDevice {
    fn new(capacity: u64) -> Self {
        FakeDevice {
            next: 1 << 40,
            capacity,
            used: 0,
            live: HashMap::default(),
            allocs: 0,
        }
    }
}

impl SegmentSource for FakeDevice {
    fn alloc_segment(&mut self, bytes: u64) -> Result<u64, SourceError> {
        if self.used + bytes > self.capacity {
            return Err(SourceError::OutOfMemory);
        }
        let base = self.next;
        self.next += bytes + 4096; // gaps catch any block that strays outside its segment
        self.used += bytes;
        self.live.insert(base, bytes);
        self.allocs += 1;
        Ok(base)
    }
    fn free_segment(&mut self, base: u64, bytes: u64) {
        assert_eq!(
            self.live.remove(&base),
            Some(bytes),
            "segment freed twice or with a wrong size"
        );
        self.used -= bytes;
    }
    fn mem_info(&self) -> (u64, u64) {
        (self.capacity - self.used, self.capacity)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        stream: u64,
        bytes: u64,
    },
    Free(usize),
    EmptyCache,
    /// Switch segment growth (off during a graph capture).
    Growth(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u64..3, prop_oneof![1u64..4096, 4096u64..(3 << 20), (3u64 << 20)..(40 << 20)])
            .prop_map(|(stream, bytes)| Op::Alloc { stream, bytes }),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
        1 => any::<bool>().prop_map(Op::Growth),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_sequences_keep_every_invariant(ops in proptest::collection::vec(op(), 1..200), limited in any::<bool>()) {
        let limit = limited.then_some(96u64 << 20);
        let mut a = CachingAllocator::new(FakeDevice::new(256 << 20), limit);
        let mut live: Vec<(Allocation, u64, u64)> = Vec::new();
        let mut grow = true;
        for op in ops {
            match op {
                Op::Alloc { stream, bytes } => match a.alloc(stream, bytes) {
                    Ok(al) => {
                        prop_assert!(al.size >= bytes && al.size % MIN_BLOCK == 0);
                        // no overlap with any live block
                        for (o, _, _) in &live {
                            prop_assert!(al.ptr + al.size <= o.ptr || o.ptr + o.size <= al.ptr, "overlap");
                        }
                        live.push((al, stream, bytes));
                    }
                    Err(AllocError::OutOfMemory { requested, reserved, .. }) => {
                        prop_assert_eq!(requested, bytes);
                        prop_assert!(limit.is_some() || reserved > 0 || bytes > 200 << 20);
                    }
                    Err(AllocError::NoGrowth { requested }) => {
                        prop_assert!(!grow);
                        prop_assert_eq!(requested, bytes);
                    }
                    Err(AllocError::Source(e)) => prop_assert!(false, "{}", e),
                },
                Op::Free(i) if !live.is_empty() => {
                    let (al, _, _) = live.swap_remove(i % live.len());
                    prop_assert!(a.free(al.ptr).is_ok());
                    prop_assert!(a.free(al.ptr).is_err(), "double free accepted");
                }
                Op::Free(_) => {}
                Op::EmptyCache => { a.release_cached(); }
                Op::Growth(g) => { grow = g; a.set_growth(g); }
            }
            if let Err(e) = a.check_invariants() { prop_assert!(false, "{}", e); }
            let s = a.stats();
            prop_assert_eq!(s.allocated_bytes, live.iter().map(|(al, _, _)| al.size).sum::<u64>());
            prop_assert_eq!(s.requested_bytes, live.iter().map(|(_, _, b)| *b).sum::<u64>());
            prop_assert_eq!(s.reserved_bytes, a.source().used);
        }
        for (al, _, _) in live.drain(..) { a.free(al.ptr).unwrap(); }
        a.set_growth(true);
        a.release_cached();
        prop_assert_eq!(a.stats().reserved_bytes, 0);
        prop_assert!(a.source().live.is_empty());
        a.check_invariants().unwrap();
    }
}

#[test]
fn same_stream_reuse_needs_no_new_segment() {
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 30), None);
    let x = a.alloc(7, 1 << 20).unwrap();
    a.free(x.ptr).unwrap();
    let y = a.alloc(7, 1 << 20).unwrap();
    assert_eq!(x.ptr, y.ptr);
    assert_eq!(a.stats().num_device_allocs, 1);
    // another stream never gets a block the first one freed
    a.free(y.ptr).unwrap();
    let z = a.alloc(8, 1 << 20).unwrap();
    assert_ne!(z.ptr, x.ptr);
    assert_eq!(a.stats().num_device_allocs, 2);
}

#[test]
fn small_requests_pack_into_one_2mib_segment() {
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 30), None);
    let v: Vec<_> = (0..4).map(|_| a.alloc(0, 600 << 10).unwrap()).collect();
    // three 600 KiB blocks share the first 2 MiB segment; the fourth opens a second
    assert_eq!(a.stats().num_device_allocs, 2);
    assert_eq!(a.stats().reserved_bytes, 2 * SMALL_SEGMENT);
    for al in v {
        a.free(al.ptr).unwrap();
    }
    a.check_invariants().unwrap();
    assert_eq!(a.release_cached(), 2 * SMALL_SEGMENT);
}

#[test]
fn oom_retries_after_emptying_the_cache_then_reports() {
    let mut a = CachingAllocator::new(FakeDevice::new(64 << 20), None);
    let x = a.alloc(0, 40 << 20).unwrap();
    a.free(x.ptr).unwrap(); // cached: 40 MiB reserved, none allocated
                            // 50 MiB does not fit beside the cached 40 MiB: the cache is emptied and it succeeds
    let y = a.alloc(1, 50 << 20).unwrap();
    assert_eq!(a.stats().num_alloc_retries, 1);
    // now a real OOM, with the figures
    match a.alloc(1, 30 << 20) {
        Err(AllocError::OutOfMemory {
            requested,
            total,
            reserved,
            ..
        }) => {
            assert_eq!(requested, 30 << 20);
            assert_eq!(total, 64 << 20);
            assert_eq!(reserved, 50 << 20);
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    assert_eq!(a.stats().num_ooms, 1);
    a.free(y.ptr).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn the_limit_is_honoured() {
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 30), Some(30 << 20));
    let x = a.alloc(0, 12 << 20).unwrap(); // a 12 MiB segment (>= 10 MiB: rounded to 2 MiB)
    assert!(a.alloc(0, 20 << 20).is_err());
    let y = a.alloc(0, 16 << 20).unwrap();
    assert!(a.stats().reserved_bytes <= 30 << 20);
    a.free(x.ptr).unwrap();
    a.free(y.ptr).unwrap();
    a.check_invariants().unwrap();
}

/// The fragmentation benchmark: a random alloc/free trace of 10k sizes from 512 B to
/// 64 MiB (log-uniform), live set kept near 100 blocks; reserved/peak-allocated must stay
/// <= 1.3. Deterministic: the algorithm is what the GPU runs, over a simulated device.
#[test]
fn fragmentation_on_a_random_trace_stays_below_1_3() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 40), None);
    let mut live: Vec<u64> = Vec::new();
    let (lo, hi) = ((512f64).ln(), ((64u64 << 20) as f64).ln());
    let mut n = 0;
    while n < 10_000 {
        let grow = live.len() < 50 || (live.len() < 150 && rng.random_bool(0.5));
        if grow {
            let bytes = rng.random_range(lo..hi).exp() as u64;
            live.push(a.alloc(0, bytes).unwrap().ptr);
            n += 1;
        } else {
            let i = rng.random_range(0..live.len());
            a.free(live.swap_remove(i)).unwrap();
        }
    }
    let s = a.stats();
    let ratio = s.reserved_bytes_peak as f64 / s.allocated_bytes_peak as f64;
    eprintln!(
        "fragmentation: peak reserved {} MiB / peak allocated {} MiB = {ratio:.3} ({} segments)",
        s.reserved_bytes_peak >> 20,
        s.allocated_bytes_peak >> 20,
        s.num_device_allocs
    );
    assert!(ratio <= 1.3, "reserved/peak-allocated {ratio:.3} > 1.3");
}

#[test]
fn without_growth_only_cached_blocks_are_served() {
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 30), None);
    let x = a.alloc(0, 1 << 20).unwrap();
    a.free(x.ptr).unwrap();
    a.set_growth(false);
    // served from the cache
    let y = a.alloc(0, 1 << 20).unwrap();
    assert_eq!(y.ptr, x.ptr);
    // a size the cache cannot hold is refused, and nothing was released or taken
    let reserved = a.stats().reserved_bytes;
    assert!(matches!(a.alloc(0, 64 << 20), Err(AllocError::NoGrowth { requested }) if requested == 64 << 20));
    assert_eq!(a.stats().reserved_bytes, reserved);
    assert_eq!(a.stats().num_ooms, 0);
    a.set_growth(true);
    let z = a.alloc(0, 64 << 20).unwrap();
    a.free(z.ptr).unwrap();
    a.free(y.ptr).unwrap();
    a.check_invariants().unwrap();
}

/// Host cost of the algorithm alone for the benchmark (1 MiB, cached, one stream).
/// `cargo test -p kiln-cuda --release -- --ignored --nocapture alloc_free_pair_cost`
#[test]
#[ignore]
fn alloc_free_pair_cost() {
    let mut a = CachingAllocator::new(FakeDevice::new(1 << 34), None);
    let p = a.alloc(7, 1 << 20).unwrap();
    a.free(p.ptr).unwrap();
    let n = 2_000_000;
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        let p = a.alloc(7, 1 << 20).unwrap();
        a.free(std::hint::black_box(p.ptr)).unwrap();
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / n as f64;
    println!("algorithm alone: {ns:.1} ns per 1 MiB alloc+free pair");
}
