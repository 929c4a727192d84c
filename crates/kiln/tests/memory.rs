//! The device pool on a real GPU: reuse, stats, the limit and the OOM path, threads,
//! cross-stream frees. Skips (printing why) without a GPU; fails under KILN_REQUIRE_GPU=1.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln::{testing, Config, DeviceRequest, Error, Runtime};
use kiln_core::MemoryLimit;

fn gpu(limit: Option<MemoryLimit>, test: &str) -> Option<Runtime> {
    let mut cfg = Config::load(None).unwrap();
    cfg.gpu_memory_limit = limit;
    match Runtime::new(DeviceRequest::Cuda(None), &cfg) {
        Ok(rt) => Some(rt),
        Err(e) if testing::gpu_required() => panic!("KILN_REQUIRE_GPU=1 but {test}: {e}"),
        Err(e) => {
            eprintln!("SKIP {test} [cuda]: {e}");
            None
        }
    }
}

#[test]
fn cached_blocks_are_reused_without_device_allocations() {
    let Some(rt) = gpu(None, "cached_blocks_are_reused") else {
        return;
    };
    let b = rt.cuda().unwrap();
    for _ in 0..1000 {
        let x = b.alloc::<f32>(1 << 18).unwrap();
        assert_eq!(x.len(), 1 << 18);
    }
    let s = b.memory_stats();
    assert_eq!(s.num_allocs, 1000);
    assert_eq!(s.num_frees, 1000);
    assert_eq!(s.num_device_allocs, 1, "{s:?}");
    assert_eq!(s.allocated_bytes, 0);
    assert!(s.reserved_bytes >= 1 << 20);
    assert!(b.empty_cache() >= 1 << 20);
    assert_eq!(b.memory_stats().reserved_bytes, 0);
}

#[test]
fn limit_gives_out_of_memory_with_figures_then_recovers() {
    let Some(rt) = gpu(Some(MemoryLimit::Bytes(64 << 20)), "limit_gives_out_of_memory") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let keep = b.alloc::<u8>(40 << 20).unwrap();
    match b.alloc::<u8>(40 << 20) {
        Err(Error::OutOfMemory {
            requested,
            limit,
            reserved,
            total,
            ..
        }) => {
            assert_eq!(requested, 40 << 20);
            assert_eq!(limit, Some(64 << 20));
            assert!(reserved >= 40 << 20 && total > 0);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    let s = b.memory_stats();
    assert_eq!(s.num_ooms, 1);
    drop(keep);
    // the cached 40 MiB segment is released by the retry path and the request succeeds
    let again = b.alloc::<u8>(50 << 20).unwrap();
    assert!(b.memory_stats().num_alloc_retries >= 1);
    drop(again);
    // and a real op still runs correctly under the limit
    let x = testing::random_f32(1 << 20, -5.0, 5.0, 3);
    let y = rt.sigmoid(&x).unwrap();
    assert!((y[0] as f64 - kiln::UnaryOp::Sigmoid.reference(x[0] as f64)).abs() < 1e-6);
}

#[test]
fn threads_share_the_pool_safely() {
    let Some(rt) = gpu(None, "threads_share_the_pool") else {
        return;
    };
    let b = rt.cuda().unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                for i in 0..500u64 {
                    let n = 1 + ((i * 7919 + t * 104729) % (3 << 20)) as usize;
                    let x = b.alloc::<u8>(n).unwrap();
                    assert_eq!(x.len(), n);
                }
            });
        }
    });
    let s = b.memory_stats();
    assert_eq!(s.num_allocs, 2000);
    assert_eq!(s.num_frees, 2000);
    assert_eq!(s.allocated_bytes, 0);
}

#[test]
fn a_block_used_on_another_stream_is_not_reused_early() {
    let Some(rt) = gpu(None, "cross_stream_free") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let other = b.stream().context().new_stream().unwrap();
    let x = testing::random_f32(1 << 20, -1.0, 1.0, 9);
    let mut buf = b.upload(&x).unwrap();
    let p = buf.device_ptr();
    buf.record_stream(&other);
    drop(buf);
    // while the other stream's event is pending the block stays out of the free list: a
    // same-size allocation gets another block unless that event already completed
    let y = b.alloc::<f32>(1 << 20).unwrap();
    let reused_early = y.device_ptr() == p;
    drop(y);
    other.synchronize().unwrap();
    b.synchronize().unwrap();
    if reused_early {
        // only legal if the (empty) other stream had already passed its event
        eprintln!("note: event completed before the next allocation; reuse was legal");
    }
    // the deferred free is settled by empty_cache (which waits for the recorded event)
    b.empty_cache();
    let s = b.memory_stats();
    assert_eq!(s.num_allocs, s.num_frees, "{s:?}");
    assert_eq!(b.memory_stats().allocated_bytes, 0);
}
