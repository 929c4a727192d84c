//! Pipelined host -> device -> host runs equal the one-shot op bit for bit.
#![allow(clippy::unwrap_used)]

use kiln::memory::PipelineOptions;
use kiln::{testing, UnaryOp};
use kiln_core::backend::MapOp;

const OP: MapOp = MapOp::Unary(UnaryOp::Sigmoid);

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn pipelined_equals_one_shot_bitwise() {
    let Some(rt) = testing::cuda_runtime_or_skip("pipelined_equals_one_shot") else {
        return;
    };
    let b = rt.cuda().unwrap();
    for (n, chunk, streams) in [
        (1usize, 4usize, 3usize),
        (10, 1, 2),
        (1000, 999, 3),
        (50_000_007, 4 << 20, 3),
    ] {
        let x = testing::random_f32(n, -9.0, 9.0, n as u64);
        let one_shot = rt.sigmoid(&x).unwrap();
        let opts = PipelineOptions {
            chunk_elems: chunk,
            streams,
        };
        // pageable input, staged
        let mut out = vec![f32::NAN; n];
        let rep = b.map_pipelined(OP, &x, &mut out, opts).unwrap();
        assert!(rep.staged && rep.chunks == n.div_ceil(chunk));
        assert!(
            out.iter().zip(&one_shot).all(|(a, c)| a.to_bits() == c.to_bits()),
            "staged n={n}"
        );
        // pinned input and output
        let mut px = b.pinned_pool().alloc::<f32>(n).unwrap();
        px.copy_from_slice(&x);
        let mut py = b.pinned_pool().alloc::<f32>(n).unwrap();
        py.fill(f32::NAN);
        let rep = b.map_pipelined_pinned(OP, &px, &mut py, opts).unwrap();
        assert!(!rep.staged);
        assert!(
            py.iter().zip(&one_shot).all(|(a, c)| a.to_bits() == c.to_bits()),
            "pinned n={n}"
        );
    }
    let s = b.pinned_pool().stats();
    assert!(s.num_cache_hits > 0, "{s:?}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn bad_pipeline_options_are_errors() {
    let Some(rt) = testing::cuda_runtime_or_skip("bad_pipeline_options") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let x = vec![1.0f32; 10];
    let mut y = vec![0.0f32; 10];
    for opts in [
        PipelineOptions {
            chunk_elems: 0,
            streams: 2,
        },
        PipelineOptions {
            chunk_elems: 4,
            streams: 0,
        },
    ] {
        assert!(matches!(
            b.map_pipelined(OP, &x, &mut y, opts),
            Err(kiln::Error::InvalidArgument { .. })
        ));
    }
    let mut short = vec![0.0f32; 9];
    assert!(b
        .map_pipelined(OP, &x, &mut short, PipelineOptions::default())
        .is_err());
}
