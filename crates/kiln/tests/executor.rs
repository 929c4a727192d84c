//! The device-pool executor on CPU workers (CI): 2, 3 and 7 workers with uneven speeds
//! (one worker waits for the others before each chunk) split the work, the fast ones steal from the slow one, and
//! the merged answers are bit for bit the single-worker and single-device answers for Monte
//! Carlo prices, option books, batched 2-D filters and 3-D volumes, strided-batch GEMM and
//! element-wise maps. Also calibration (probe, disk cache, drift refresh), failures, and the
//! host collectives and sharded GEMM on CPU ranks.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::core::finance::{McParams, OptionSpec, OptionType, Rng, Style, BLOCK_SAMPLES};
use kiln::core::imaging::{BoundaryMode, FilterPath, Kernel2D, Kernel3D};
use kiln::executor::{
    sharded_matmul, Calibrations, Collective, Executor, FilterBatch, GemmBatch, MapArray, McPaths,
    OptionBook, RunReport, VolumeBatch, Worker, Workload,
};
use kiln::finance::Method;
use kiln::linalg::{Gemm, GemmPrecision};
use kiln::{Runtime, UnaryOp};

/// Wraps a workload: the worker labelled `slow` is the slowest by construction, not by a
/// sleep that a loaded machine could outlast. Before each of its chunks it waits until the
/// other workers have finished `lead` more chunks than when it last ran, or until every
/// chunk but the one in its hand is done (nothing is left for them), polling against a
/// deadline so that a stuck run fails instead of hanging.
struct Slowed<W> {
    inner: W,
    slow: &'static str,
    lead: usize,
    others_done: AtomicUsize,
    slow_done: AtomicUsize,
    seen: AtomicUsize,
}

impl<W: Workload> Slowed<W> {
    fn new(inner: W, slow: &'static str, lead: usize) -> Self {
        Slowed {
            inner,
            slow,
            lead,
            others_done: AtomicUsize::new(0),
            slow_done: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
        }
    }

    fn wait_for_the_others(&self, slow_done: usize) {
        let total = self.inner.chunks();
        let target = self.seen.load(Ordering::SeqCst) + self.lead;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let done = self.others_done.load(Ordering::SeqCst);
            if done >= target || done + slow_done + 1 >= total {
                self.seen.store(done, Ordering::SeqCst);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the fast workers finished {done} chunks of {total} in 60 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl<W: Workload> Workload for Slowed<W> {
    type Part = W::Part;
    type Output = W::Output;
    fn key(&self) -> String {
        self.inner.key()
    }
    fn chunks(&self) -> usize {
        self.inner.chunks()
    }
    fn units(&self, i: usize) -> f64 {
        self.inner.units(i)
    }
    fn run(&self, worker: &Worker, i: usize) -> kiln::Result<W::Part> {
        if worker.label() == self.slow {
            self.wait_for_the_others(self.slow_done.load(Ordering::SeqCst));
            let part = self.inner.run(worker, i);
            self.slow_done.fetch_add(1, Ordering::SeqCst);
            return part;
        }
        let part = self.inner.run(worker, i);
        self.others_done.fetch_add(1, Ordering::SeqCst);
        part
    }
    fn merge(&self, parts: Vec<W::Part>) -> kiln::Result<W::Output> {
        self.inner.merge(parts)
    }
}

fn cpu_workers(n: usize) -> Vec<Worker> {
    (0..n).map(|i| Worker::cpu_labelled(format!("cpu{i}"))).collect()
}

/// Runs `w` on `n` equally weighted CPU workers, `cpu0` slowed, and checks the split and
/// the stealing; returns the answer.
fn run_uneven<W: Workload>(w: W, n: usize) -> W::Output {
    let chunks = w.chunks();
    let ex = Executor::new(cpu_workers(n))
        .unwrap()
        .with_shares(vec![1.0; n])
        .unwrap();
    // each chunk of the slow worker waits for two chunks of every other worker
    let slowed = Slowed::new(w, "cpu0", 2 * (n - 1));
    let (out, rep) = ex.run(&slowed).unwrap();
    check_split(&rep, chunks, n);
    out
}

fn check_split(rep: &RunReport, chunks: usize, n: usize) {
    assert_eq!(rep.chunks, chunks);
    assert_eq!(rep.workers.len(), n);
    let done: usize = rep.workers.iter().map(|w| w.chunks).sum();
    assert_eq!(done, chunks, "every chunk runs exactly once: {rep:?}");
    let initial: usize = rep.workers.iter().map(|w| w.initial_chunks).sum();
    assert_eq!(initial, chunks);
    for w in &rep.workers {
        assert!((w.share - 1.0 / n as f64).abs() < 1e-12, "{rep:?}");
    }
    let slow = &rep.workers[0];
    let fastest = rep.workers[1..].iter().map(|w| w.chunks).max().unwrap();
    // the slow worker gave chunks away: it ran fewer than it was given and fewer than the
    // fastest, and someone stole them
    assert!(slow.initial_chunks >= 2, "{rep:?}");
    assert!(
        slow.chunks < slow.initial_chunks,
        "the slow worker kept its chunks: {rep:?}"
    );
    assert!(slow.chunks < fastest, "{rep:?}");
    assert!(
        rep.workers[1..].iter().map(|w| w.stolen).sum::<usize>() > 0,
        "{rep:?}"
    );
    // of the chunks it was given, the slow worker ran fewer than all (it may still steal one
    // back when a descheduled neighbour's queue is fuller than its own: on a 2-core CI machine
    // some of 7 threads start late, so `stolen` of the slow worker is not always 0)
    assert!(slow.chunks - slow.stolen < slow.initial_chunks, "{rep:?}");
}

fn single<W: Workload>(w: &W) -> W::Output {
    Executor::new(cpu_workers(1)).unwrap().run(w).unwrap().0
}

fn mc(paths: u64, steps: u32, anti: bool, cv: bool) -> McParams {
    McParams {
        paths,
        steps,
        seed: 0x5eed_2026,
        antithetic: anti,
        control_variate: cv,
        fast_math: false,
        rng: Rng::Philox,
    }
}

fn same_price(a: &kiln::core::finance::PriceResult, b: &kiln::core::finance::PriceResult, what: &str) {
    assert_eq!(
        a.price.to_bits(),
        b.price.to_bits(),
        "{what}: {} vs {}",
        a.price,
        b.price
    );
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits(), "{what}");
    assert_eq!(a.delta.map(f64::to_bits), b.delta.map(f64::to_bits), "{what}");
    assert_eq!(a.vega.map(f64::to_bits), b.vega.map(f64::to_bits), "{what}");
    assert_eq!(a.paths_used, b.paths_used, "{what}");
}

#[test]
fn mc_prices_are_bitwise_the_single_device_price_for_any_workers_and_chunking() {
    let euro = OptionSpec::european(OptionType::Call, 100.0, 105.0, 0.03, 0.01, 0.25, 1.0);
    let cases = [
        (euro, mc(24 * BLOCK_SAMPLES + 37, 12, false, false)),
        (
            euro.with_style(Style::AsianArithmetic, Some(8), None),
            mc(20 * BLOCK_SAMPLES + 5, 8, true, true),
        ),
        (
            euro.with_style(Style::BarrierUpOut, None, Some(140.0)),
            mc(18 * BLOCK_SAMPLES, 16, false, true),
        ),
    ];
    for (spec, run) in cases {
        let option = 3;
        let reference = kiln_cpu::finance::price_mc(&spec, &run, option).unwrap();
        assert!(reference.price > 0.0, "a zero price proves nothing");
        for bpc in [1, 2, 7] {
            let w = McPaths::new(spec, run, option, bpc).unwrap();
            same_price(
                &single(&w),
                &reference,
                &format!("{:?} 1 worker, {bpc} blocks/chunk", spec.style),
            );
            for n in [2, 3, 7] {
                if w.chunks() < 2 * n {
                    continue;
                }
                let got = run_uneven(w.clone(), n);
                same_price(
                    &got,
                    &reference,
                    &format!("{:?} {n} workers, {bpc} blocks/chunk", spec.style),
                );
            }
        }
        // another stream index is another price: the comparison can fail
        let other = McPaths::new(spec, run, option + 1, 2).unwrap();
        assert_ne!(single(&other).price.to_bits(), reference.price.to_bits());
    }
}

#[test]
fn option_books_split_by_rows_match_the_whole_book() {
    let specs: Vec<OptionSpec> = (0..42)
        .map(|i| {
            let s = OptionSpec::european(OptionType::Put, 100.0, 80.0 + i as f64, 0.02, 0.0, 0.3, 0.75);
            match i % 3 {
                0 => s,
                1 => s.with_style(Style::AsianGeometric, Some(6), None),
                _ => s.with_style(Style::BarrierDownOut, None, Some(70.0)),
            }
        })
        .collect();
    let run = mc(2 * BLOCK_SAMPLES + 11, 6, true, false);
    let rt = Runtime::cpu();
    for method in [Method::MonteCarlo, Method::Analytic] {
        let whole = rt.price_batch(&specs, method, &run, 5);
        for n in [2, 3, 7] {
            let w = OptionBook::new(&specs, method, run, 5, 2).unwrap();
            let got = run_uneven(w, n);
            assert_eq!(got.len(), whole.len());
            for (i, (a, b)) in got.iter().zip(&whole).enumerate() {
                same_price(
                    a.as_ref().unwrap(),
                    b.as_ref().unwrap(),
                    &format!("{method:?} option {i}, {n} workers"),
                );
            }
        }
    }
    assert!(OptionBook::new(&specs, Method::MonteCarlo, run, 0, 0).is_err());
    assert!(OptionBook::new(&specs, Method::MonteCarlo, run, u32::MAX - 3, 4).is_err());
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

fn same_bits(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    assert!(a.iter().any(|v| *v != 0.0), "{what}: all zeros prove nothing");
    let bad = a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits());
    assert_eq!(bad, None, "{what}: first differing element");
}

#[test]
fn batched_filters_and_volumes_match_the_whole_batch() {
    let rt = Runtime::cpu();
    let (n, h, w) = (14, 33, 29);
    let images = data(n * h * w, 1);
    let k = Kernel2D::preset("gaussian:1.5").unwrap();
    let whole = rt
        .filter2d_batch(&images, [n, h, w], &k, BoundaryMode::Reflect, FilterPath::Auto)
        .unwrap();
    for (workers, per) in [(2, 1), (3, 2), (7, 1)] {
        let job = FilterBatch::new(
            &images,
            [n, h, w],
            k.clone(),
            BoundaryMode::Reflect,
            FilterPath::Auto,
            per,
        )
        .unwrap();
        same_bits(
            &run_uneven(job, workers),
            &whole,
            &format!("filter2d, {workers} workers"),
        );
    }
    let (nv, d) = (8, 9);
    let vols = data(nv * d * h * w, 2);
    let k3 = Kernel3D::preset("box:3").unwrap();
    let mut whole3 = Vec::new();
    for z in 0..nv {
        let v = &vols[z * d * h * w..(z + 1) * d * h * w];
        whole3.extend(
            rt.filter3d(v, [d, h, w], &k3, BoundaryMode::Nearest, FilterPath::Auto)
                .unwrap(),
        );
    }
    for workers in [2, 3] {
        let job = VolumeBatch::new(
            &vols,
            [nv, d, h, w],
            k3.clone(),
            BoundaryMode::Nearest,
            FilterPath::Auto,
            1,
        )
        .unwrap();
        same_bits(
            &run_uneven(job, workers),
            &whole3,
            &format!("filter3d, {workers} workers"),
        );
    }
    assert!(FilterBatch::new(
        &images[1..],
        [n, h, w],
        k,
        BoundaryMode::Reflect,
        FilterPath::Auto,
        1
    )
    .is_err());
}

#[test]
fn strided_batch_gemm_matches_the_whole_product() {
    let rt = Runtime::cpu();
    let (m, n, k, batch) = (17, 13, 19, 16);
    let g = Gemm::new(m, n, k).batched(batch);
    let a = data(m * k * batch, 3);
    let b = data(k * n * batch, 4);
    let whole = rt.matmul(&a, &b, &g, GemmPrecision::F32).unwrap();
    for workers in [2, 3, 7] {
        let job = GemmBatch::new(&a, &b, g, GemmPrecision::F32, 1).unwrap();
        same_bits(
            &run_uneven(job, workers),
            &whole,
            &format!("gemm, {workers} workers"),
        );
    }
    // B broadcast over the batch (stride 0)
    let gb = g.with_strides(m * k, 0);
    let b1 = &b[..k * n];
    let whole_b = rt.matmul(&a, b1, &gb, GemmPrecision::F32).unwrap();
    let job = GemmBatch::new(&a, b1, gb, GemmPrecision::F32, 3).unwrap();
    same_bits(&run_uneven(job, 2), &whole_b, "gemm with a broadcast B");
    assert!(GemmBatch::new(&a[1..], &b, g, GemmPrecision::F32, 1).is_err());
}

#[test]
fn elementwise_maps_match_the_whole_array() {
    let rt = Runtime::cpu();
    let x = data(200_003, 5);
    let op = kiln::core::backend::MapOp::Unary(UnaryOp::Sigmoid);
    let whole = rt.map(op, &x).unwrap();
    for workers in [2, 3, 7] {
        let job = MapArray::new(op, &x, 4096).unwrap();
        same_bits(
            &run_uneven(job, workers),
            &whole,
            &format!("sigmoid, {workers} workers"),
        );
    }
}

#[test]
fn calibration_probes_once_caches_on_disk_and_refreshes_on_drift() {
    let dir = tempfile::tempdir().unwrap();
    let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    let job = McPaths::new(spec, mc(16 * BLOCK_SAMPLES, 8, false, false), 0, 2).unwrap();
    let ex = Executor::new(vec![Worker::cpu()])
        .unwrap()
        .with_calibrations(Calibrations::in_dir(dir.path()));
    let (first, rep) = ex.run(&job).unwrap();
    assert_eq!(rep.calibrated, vec!["cpu".to_string()]);
    assert_eq!(rep.share_of("cpu"), Some(1.0));
    let stored = Calibrations::in_dir(dir.path()).get("cpu", &job.key()).unwrap();
    assert!(stored > 0.0);
    // a second executor reads the file: no probe
    let ex2 = Executor::new(vec![Worker::cpu()])
        .unwrap()
        .with_calibrations(Calibrations::in_dir(dir.path()));
    let (second, rep2) = ex2.run(&job).unwrap();
    assert!(rep2.calibrated.is_empty(), "{rep2:?}");
    same_price(&first, &second, "calibrated runs");
    // a stored rate far from what the run measures is replaced
    let store = Calibrations::in_dir(dir.path());
    store.set("cpu", &job.key(), stored * 1e6).unwrap();
    let ex3 = Executor::new(vec![Worker::cpu()])
        .unwrap()
        .with_calibrations(store);
    let (_, rep3) = ex3.run(&job).unwrap();
    assert_eq!(rep3.refreshed, vec!["cpu".to_string()], "{rep3:?}");
    let now = ex3.calibrations().unwrap().get("cpu", &job.key()).unwrap();
    assert!(now < stored * 1e5, "the drifted rate was replaced: {now}");
}

/// A workload whose chunk 5 fails.
struct Failing;

impl Workload for Failing {
    type Part = usize;
    type Output = usize;
    fn key(&self) -> String {
        "failing".into()
    }
    fn chunks(&self) -> usize {
        12
    }
    fn units(&self, _: usize) -> f64 {
        1.0
    }
    fn run(&self, _: &Worker, i: usize) -> kiln::Result<usize> {
        if i == 5 {
            Err(kiln::Error::invalid("failing", "chunk 5 fails"))
        } else {
            Ok(i)
        }
    }
    fn merge(&self, parts: Vec<usize>) -> kiln::Result<usize> {
        Ok(parts.into_iter().sum())
    }
}

#[test]
fn a_failing_chunk_fails_the_run_and_bad_setups_are_errors() {
    let ex = Executor::new(cpu_workers(3))
        .unwrap()
        .with_shares(vec![1.0, 2.0, 3.0])
        .unwrap();
    let e = ex.run(&Failing).unwrap_err().to_string();
    assert!(e.contains("chunk 5 fails"), "{e}");
    assert!(Executor::new(Vec::new()).is_err());
    assert!(Executor::new(cpu_workers(2))
        .unwrap()
        .with_shares(vec![1.0])
        .is_err());
    assert!(Executor::new(cpu_workers(2))
        .unwrap()
        .with_shares(vec![1.0, -1.0])
        .is_err());
    assert!(Executor::new(cpu_workers(2))
        .unwrap()
        .with_drift_threshold(f64::NAN)
        .is_err());
    let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    assert!(McPaths::new(spec, mc(4096, 8, false, false), 0, 0).is_err());
    assert!(McPaths::new(spec, mc(0, 8, false, false), 0, 1).is_err());
}

#[test]
fn host_collectives_and_the_sharded_gemm_on_cpu_ranks() {
    let ranks: Vec<Arc<Runtime>> = (0..3).map(|_| Arc::new(Runtime::cpu())).collect();
    let group = Collective::new(ranks.clone()).unwrap();
    assert!(!group.is_nccl());
    let xs: Vec<kiln::Tensor> = (0..3)
        .map(|r| ranks[r].tensor(&data(10, r as u32 + 10), &[2, 5]).unwrap())
        .collect();
    let host: Vec<Vec<f32>> = xs.iter().map(|x| x.to_vec::<f32>().unwrap()).collect();
    let sum = group.all_reduce_sum(&xs).unwrap();
    for s in &sum {
        assert_eq!(s.shape(), &[2, 5]);
        let v = s.to_vec::<f32>().unwrap();
        for i in 0..10 {
            let want = (f64::from(host[0][i]) + f64::from(host[1][i]) + f64::from(host[2][i])) as f32;
            assert_eq!(v[i], want);
        }
    }
    let all = group.all_gather(&xs).unwrap();
    assert_eq!(all[2].shape(), &[3, 2, 5]);
    assert_eq!(all[1].to_vec::<f32>().unwrap(), host.concat());
    let b = group.broadcast(1, &xs).unwrap();
    assert_eq!(b[0].to_vec::<f32>().unwrap(), host[1]);
    assert!(group.broadcast(3, &xs).is_err());
    assert!(group.all_reduce_sum(&xs[..2]).is_err());

    // the sharded GEMM: one rank is the plain product; three ranks (n = 23 not a multiple
    // of 3: a padded last shard) agree within the GEMM's bound
    let (m, k, n) = (9, 31, 23);
    let (x, w) = (data(m * k, 20), data(k * n, 21));
    let g = Gemm::new(m, n, k);
    let plain = ranks[0].matmul(&x, &w, &g, GemmPrecision::F32).unwrap();
    let one = Collective::new(vec![ranks[0].clone()]).unwrap();
    let y1 = sharded_matmul(&one, &x, &w, m, k, n, GemmPrecision::F32).unwrap();
    same_bits(&y1, &plain, "sharded gemm on one rank");
    let y3 = sharded_matmul(&group, &x, &w, m, k, n, GemmPrecision::F32).unwrap();
    let chk = kiln::linalg::check(&x, &w, &y3, &g, GemmPrecision::F32, usize::MAX).unwrap();
    assert!(chk.passed, "{chk:?}");
    assert!(sharded_matmul(&group, &x[1..], &w, m, k, n, GemmPrecision::F32).is_err());
}
