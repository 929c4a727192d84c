//! The imaging suite: the cross4 stencil (the seed's 4-neighbour filter), a separable
//! gaussian (sigma 2, reflect) and a 3x3x3 random-weight volume correlation (constant 0),
//! at the sizes the peers run. Each path is the one the facade would take
//! (`kiln::imaging::path_2d` / `path_3d`), launched on device-resident buffers.
//!
//! Verification: on a GPU every output element against the CPU backend within
//! [`kiln::imaging::filter_tolerance`]; on the CPU, sampled points (corners, edges,
//! interior) against a plain f64 correlation loop.

use crate::harness::{params, Case, CaseMeta, Ctx, Floor, Measured};
use crate::verify::{self, Verdict};
use kiln::bench_support::cpu::{filter2d_into, filter3d_into};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use kiln::device::ops::{Filter2d, Filter3d, SeparableFilter};
use kiln::imaging::{filter_tolerance, path_2d, path_3d, FilterPath};
use kiln::kernels::Kernel;
use kiln::memory::DeviceBuffer;
use kiln::testing;
use kiln::Result;

/// Plan the imaging cases.
pub fn plan(ctx: &Ctx) -> Vec<Case> {
    let (cross, gauss, vol): (&[(usize, usize)], usize, usize) = match (ctx.gpu(), ctx.full) {
        (true, true) => (&[(1080, 1920), (16384, 16384)], 8192, 512),
        (true, false) => (&[(1080, 1920), (8192, 8192)], 2048, 256),
        (false, true) => (&[(1080, 1920), (4096, 4096)], 4096, 256),
        (false, false) => (&[(96, 128)], 128, 24),
    };
    let mut v: Vec<Case> = cross
        .iter()
        .map(|&(h, w)| filter2d_case(ctx, "cross4", "cross4_f32", h, w, format!("stencil5_{h}x{w}")))
        .collect();
    v.push(filter2d_case(
        ctx,
        "gaussian:2",
        "gaussian2_f32",
        gauss,
        gauss,
        format!("gaussian2_{gauss}x{gauss}"),
    ));
    v.push(filter3d_case(vol));
    v
}

/// The 2-D kernel and, when the facade would take the separable path under reflect, its
/// factors.
fn kernel2d(preset: &str) -> Result<(Kernel2D, Option<Separable>)> {
    let k = Kernel2D::preset(preset)?;
    let mode = BoundaryMode::Reflect;
    let sep = match path_2d(&k, mode, FilterPath::Auto)? {
        FilterPath::Separable => k.separable_for(mode),
        _ => None,
    };
    Ok((k, sep))
}

/// The kernels `Filter2d` runs for a `k × k` kernel on an `h × w` image: for
/// k = 3 the register kernel the device's occupancy picks (both names without a device).
fn direct_2d_ids(ctx: &Ctx, k: usize, h: usize, w: usize) -> Vec<&'static str> {
    let id = match k {
        3 => {
            let pick = ctx.cuda.and_then(|b| Filter2d::k3_choice(b, 1, h, w).ok());
            return match pick {
                Some((id, _)) => vec![id.symbol()],
                None => vec![
                    Kernel::FILTER2D_K3R8_F32.symbol(),
                    Kernel::FILTER2D_K3R4_F32.symbol(),
                ],
            };
        }
        5 => Kernel::FILTER2D_K5_F32,
        7 => Kernel::FILTER2D_K7_F32,
        _ => Kernel::FILTER2D_KN_F32,
    };
    vec![id.symbol()]
}

/// The kernels `SeparableFilter` runs for `sep` on (1, h, w): a consecutive pair of passes
/// along H and W with one odd length 3..=17 is the fused `sep2d_{vh,hv}_r{R}_f32`, any other
/// pass `filter1d_x_f32` (along W) or `filter1d_s_f32` (along H).
fn separable_2d_ids(sep: &Separable) -> Vec<&'static str> {
    let passes: Vec<(usize, usize)> = sep
        .pass_order
        .iter()
        .map(|&a| (a, sep.factors[a].len()))
        .collect();
    let mut ids = Vec::new();
    let mut i = 0;
    while i < passes.len() {
        let (a, len) = passes[i];
        if let Some(&(b, len2)) = passes.get(i + 1) {
            if a != b && len == len2 && len % 2 == 1 && (3..=17).contains(&len) {
                let sym = format!("sep2d_{}_r{}_f32", if a == 0 { "vh" } else { "hv" }, len / 2);
                if let Some(k) = Kernel::ALL.iter().find(|k| k.symbol() == sym) {
                    ids.push(k.symbol());
                    i += 2;
                    continue;
                }
            }
        }
        ids.push(if a == 1 {
            Kernel::FILTER1D_X_F32.symbol()
        } else {
            Kernel::FILTER1D_S_F32.symbol()
        });
        i += 1;
    }
    ids.dedup();
    ids
}

fn filter2d_case(ctx: &Ctx, preset: &'static str, name: &str, h: usize, w: usize, peer: String) -> Case {
    // Flops and kernels depend on the path; a preset that fails to build is reported by the
    // run (the planner cannot fail).
    let (flops_per, kernels) = match kernel2d(preset) {
        Ok((_, Some(sep))) => (
            2.0 * sep.factors.iter().map(|f| f.len()).sum::<usize>() as f64,
            separable_2d_ids(&sep),
        ),
        Ok((k2, None)) => (
            2.0 * k2.weights().iter().filter(|w| **w != 0.0).count() as f64,
            direct_2d_ids(ctx, k2.size(), h, w),
        ),
        Err(_) => (0.0, Vec::new()),
    };
    Case {
        meta: CaseMeta {
            suite: "imaging",
            workload: name.into(),
            size: format!("{h}x{w}"),
            params: params(&[("h", h as u64), ("w", w as u64)]),
            bytes: (2 * 4 * h * w) as f64,
            flops: flops_per * (h * w) as f64,
            floor: Floor::Memory,
            kernels,
            peer_workload: Some(peer),
        },
        run: Box::new(move |ctx| run_filter2d(ctx, preset, h, w)),
    }
}

fn run_filter2d(ctx: &Ctx, preset: &str, h: usize, w: usize) -> Result<Measured> {
    let mode = BoundaryMode::Reflect;
    let (k, sep) = kernel2d(preset)?;
    let n = h * w;
    let x = testing::random_f32(n, -1.0, 1.0, 1);
    let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
    let tol = filter_tolerance(k.size() * k.size(), sw, 1.0);
    let path = if sep.is_some() {
        FilterPath::Separable
    } else {
        FilterPath::Direct
    };
    let (v, against, times) = match ctx.cuda {
        Some(b) => {
            let mut want = vec![f32::NAN; n];
            filter2d_into(&x, [1, h, w], &k, mode, path, &mut want)?;
            let copies = ctx.rotation((4 * n) as u64);
            let dx = (0..copies).map(|_| b.upload(&x)).collect::<Result<Vec<_>>>()?;
            let mut dy = b.alloc_poisoned(n)?;
            let launch = |i: usize, dy: &mut DeviceBuffer<f32>| match &sep {
                Some(s) => b.run(SeparableFilter {
                    src: &dx[i % copies],
                    dst: dy,
                    shape: [1, h, w],
                    sep: s,
                    axis_offset: 1,
                    mode,
                }),
                None => b.run(Filter2d {
                    src: &dx[i % copies],
                    dst: dy,
                    shape: [1, h, w],
                    kernel: &k,
                    mode,
                }),
            };
            launch(0, &mut dy)?;
            let mut got = vec![0.0f32; n];
            b.download(&dy, &mut got)?;
            let v = verify::close_abs(&got, &want, tol);
            let t = ctx.time(|i| launch(i, &mut dy))?;
            (v, "every element vs the CPU backend", t)
        }
        None => {
            let mut got = vec![f32::NAN; n];
            filter2d_into(&x, [1, h, w], &k, mode, path, &mut got)?;
            let v = verify::filter_samples(&x, &got, &[h, w], k.weights(), k.size(), mode, tol);
            let t = ctx.time(|_| {
                filter2d_into(&x, [1, h, w], &k, mode, path, &mut got)?;
                std::hint::black_box(&got);
                Ok(())
            })?;
            (v, "sampled points vs an f64 correlation loop", t)
        }
    };
    Ok(measured(
        ctx,
        v,
        against,
        tol,
        times,
        format!("{preset} {mode}, {path:?} path"),
    ))
}

fn measured(ctx: &Ctx, v: Verdict, against: &str, tol: f64, times: Vec<f64>, note: String) -> Measured {
    Measured {
        warmup: ctx.warmup,
        times_ms: times,
        verified: v.ok,
        check: format!("{against}: max |err|/tol = {:.3} (tol {tol:.2e})", v.worst),
        rate: None,
        note,
    }
}

fn kernel3d() -> Result<Kernel3D> {
    Kernel3D::new(
        [3, 3, 3],
        testing::random_f32(27, 0.0, 1.0, 3)
            .iter()
            .map(|&v| v as f64)
            .collect(),
    )
}

fn filter3d_case(d: usize) -> Case {
    Case {
        meta: CaseMeta {
            suite: "imaging",
            workload: "filter3d_k3_f32".into(),
            size: format!("{d}^3"),
            params: params(&[("d", d as u64)]),
            bytes: (2 * 4 * d * d * d) as f64,
            flops: (2 * 27 * d * d * d) as f64,
            floor: Floor::Memory,
            kernels: vec![Kernel::FILTER3D_K3_F32.symbol()],
            peer_workload: Some(format!("conv3d_{d}")),
        },
        run: Box::new(move |ctx| run_filter3d(ctx, d)),
    }
}

fn run_filter3d(ctx: &Ctx, d: usize) -> Result<Measured> {
    let mode = BoundaryMode::Constant(0.0);
    let k = kernel3d()?;
    let n = d * d * d;
    let x = testing::random_f32(n, 0.0, 1.0, 4);
    let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
    let tol = filter_tolerance(27, sw, 1.0);
    let path = path_3d(&k, mode, FilterPath::Auto)?;
    let sep = match path {
        FilterPath::Separable => k.separable_for(mode),
        _ => None,
    };
    let shape = [d, d, d];
    let (v, against, times) = match ctx.cuda {
        Some(b) => {
            let mut want = vec![f32::NAN; n];
            filter3d_into(&x, shape, &k, mode, path, &mut want)?;
            let copies = ctx.rotation((4 * n) as u64);
            let dx = (0..copies).map(|_| b.upload(&x)).collect::<Result<Vec<_>>>()?;
            let mut dy = b.alloc_poisoned(n)?;
            let launch = |i: usize, dy: &mut DeviceBuffer<f32>| match &sep {
                Some(s) => b.run(SeparableFilter {
                    src: &dx[i % copies],
                    dst: dy,
                    shape,
                    sep: s,
                    axis_offset: 0,
                    mode,
                }),
                None => b.run(Filter3d {
                    src: &dx[i % copies],
                    dst: dy,
                    shape,
                    kernel: &k,
                    mode,
                    planes: None,
                }),
            };
            launch(0, &mut dy)?;
            let mut got = vec![0.0f32; n];
            b.download(&dy, &mut got)?;
            let v = verify::close_abs(&got, &want, tol);
            let t = ctx.time(|i| launch(i, &mut dy))?;
            (v, "every element vs the CPU backend", t)
        }
        None => {
            let mut got = vec![f32::NAN; n];
            filter3d_into(&x, shape, &k, mode, path, &mut got)?;
            let v = verify::filter_samples(&x, &got, &shape, k.weights(), 3, mode, tol);
            let t = ctx.time(|_| {
                filter3d_into(&x, shape, &k, mode, path, &mut got)?;
                std::hint::black_box(&got);
                Ok(())
            })?;
            (v, "sampled points vs an f64 correlation loop", t)
        }
    };
    Ok(measured(
        ctx,
        v,
        against,
        tol,
        times,
        format!("random 3x3x3 weights, {mode}, {path:?} path"),
    ))
}
