//! Rank filters and morphology against scipy.ndimage, bit for bit: the committed fixtures
//! (`scripts/rank_fixtures.py`: functions, modes, odd and even sizes, origins, footprints,
//! structures, u8/u16/f32, 2-D and 3-D) on the CPU and on the GPU (skipped without one);
//! then fresh random inputs at odd sizes: the GPU equals the CPU on every algorithm the
//! GPU chooses, and the CPU's fast paths (van Herk, Huang) equal a naive sort-the-window
//! reference written here. GPU outputs come from a poisoned pool (0xFF fill), so a pixel a
//! kernel fails to write shows up unless 0xFF happens to be the answer.
#![allow(clippy::unwrap_used)]

use kiln::morphology::{BinaryFunction, BinaryParams, Footprint};
use kiln::rank::{RankFunction, RankParams};
use kiln::{testing, DType, Runtime, Tensor};
use kiln_core::imaging::BoundaryMode;
use std::path::PathBuf;

/// The fixture directory: `KILN_RANK_FIXTURES` when set (a test executable carried to
/// another machine), else the source tree's.
fn dir() -> PathBuf {
    match std::env::var_os("KILN_RANK_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rank"),
    }
}

/// One line of cases.txt.
struct Case {
    name: String,
    func: String,
    input: String,
    output: String,
    kv: Vec<(String, String)>,
}

impl Case {
    fn get(&self, k: &str) -> Option<&str> {
        self.kv.iter().find(|(a, _)| a == k).map(|(_, b)| b.as_str())
    }
    fn nums<T: std::str::FromStr>(&self, k: &str) -> Option<Vec<T>>
    where
        T::Err: std::fmt::Debug,
    {
        self.get(k)
            .map(|v| v.split(',').map(|x| x.parse().unwrap()).collect())
    }
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("cases.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let mut next = || it.next().unwrap().to_string();
            let (name, func, input, output) = (next(), next(), next(), next());
            let kv = l
                .split_whitespace()
                .skip(4)
                .map(|p| {
                    let (a, b) = p.split_once('=').unwrap();
                    (a.to_string(), b.to_string())
                })
                .collect();
            Case {
                name,
                func,
                input: format!("in_{input}.npy"),
                output,
                kv,
            }
        })
        .collect()
}

/// `AxB:0101..` into a footprint.
fn footprint(s: &str) -> Footprint {
    let (shape, bits) = s.split_once(':').unwrap();
    let shape: Vec<usize> = shape.split('x').map(|d| d.parse().unwrap()).collect();
    Footprint::new(&shape, bits.chars().map(|c| c == '1').collect()).unwrap()
}

/// An npy file as a tensor of its own dtype on `rt`.
fn load(rt: &Runtime, file: &str) -> Tensor {
    let a = kiln_io::read_npy(dir().join(file)).unwrap();
    let shape = a.data.shape().to_vec();
    let v: Vec<f32> = a.data.iter().copied().collect();
    match a.dtype {
        kiln_io::NpyDtype::U8 => rt.tensor(&v.iter().map(|&x| x as u8).collect::<Vec<_>>(), &shape),
        kiln_io::NpyDtype::U16 => rt.tensor(&v.iter().map(|&x| x as u16).collect::<Vec<_>>(), &shape),
        _ => rt.tensor(&v, &shape),
    }
    .unwrap()
}

/// The raw bits of a tensor (u8/u16/f32) as u32s.
fn bits(t: &Tensor) -> Vec<u32> {
    match t.dtype() {
        DType::U8 => t.to_vec::<u8>().unwrap().into_iter().map(u32::from).collect(),
        DType::U16 => t.to_vec::<u16>().unwrap().into_iter().map(u32::from).collect(),
        DType::F32 => t.to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect(),
        d => panic!("unexpected dtype {d}"),
    }
}

fn rank_params(c: &Case) -> RankParams {
    let mode = match c.get("mode").unwrap_or("reflect") {
        "constant" => BoundaryMode::Constant(c.nums::<f64>("cval").map_or(0.0, |v| v[0])),
        m => m.parse().unwrap(),
    };
    let mut p = RankParams {
        size: c.nums("size"),
        footprint: c.get("fp").map(footprint),
        mode,
        origin: c.nums("origin").unwrap_or_default(),
        ..Default::default()
    };
    if let Some(st) = c.get("st") {
        let (shape, vals) = st.split_once(':').unwrap();
        let shape: Vec<usize> = shape.split('x').map(|d| d.parse().unwrap()).collect();
        p = p.with_structure(&shape, vals.split(',').map(|v| v.parse().unwrap()).collect());
    }
    p
}

fn run(rt: &Runtime, c: &Case, x: &Tensor) -> Tensor {
    let rf = match c.func.as_str() {
        "median_filter" => Some(RankFunction::Median),
        "rank_filter" => Some(RankFunction::Rank(c.nums::<isize>("rank").unwrap()[0])),
        "percentile_filter" => Some(RankFunction::Percentile(c.nums::<f64>("percentile").unwrap()[0])),
        "minimum_filter" => Some(RankFunction::Minimum),
        "maximum_filter" => Some(RankFunction::Maximum),
        "grey_erosion" => Some(RankFunction::GreyErosion),
        "grey_dilation" => Some(RankFunction::GreyDilation),
        "grey_opening" => Some(RankFunction::GreyOpening),
        "grey_closing" => Some(RankFunction::GreyClosing),
        _ => None,
    };
    let _ = rt;
    if let Some(f) = rf {
        return x.rank_apply(f, &rank_params(c)).unwrap();
    }
    let bf = match c.func.as_str() {
        "binary_erosion" => BinaryFunction::Erosion,
        "binary_dilation" => BinaryFunction::Dilation,
        "binary_opening" => BinaryFunction::Opening,
        "binary_closing" => BinaryFunction::Closing,
        "binary_fill_holes" => BinaryFunction::FillHoles,
        f => panic!("unknown function {f}"),
    };
    let p = BinaryParams {
        structure: c.get("bst").map(footprint),
        iterations: c.nums::<i64>("iterations").map_or(1, |v| v[0]),
        border_value: c.nums::<i64>("border_value").is_some_and(|v| v[0] != 0),
        origin: c.nums("origin").unwrap_or_default(),
    };
    x.binary_apply(bf, &p).unwrap()
}

fn poison(rt: &Runtime) {
    if let Some(c) = rt.cuda() {
        c.pool().set_poison(true);
    }
}

kiln::test_device!(fixtures_equal_scipy_bitwise, |rt: &Runtime| {
    poison(rt);
    let all = cases();
    assert!(all.len() > 200, "fixture set is incomplete: {} cases", all.len());
    let mut failed = Vec::new();
    for c in &all {
        let x = load(rt, &c.input);
        let want = load(&Runtime::cpu(), &c.output);
        let got = run(rt, c, &x);
        assert_eq!(got.shape(), want.shape(), "{}", c.name);
        assert_eq!(got.dtype(), want.dtype(), "{} {}", c.name, c.func);
        let (g, w) = (bits(&got), bits(&want));
        if g != w {
            let bad = g.iter().zip(&w).filter(|(a, b)| a != b).count();
            failed.push(format!(
                "{} {} {:?}: {bad} of {} differ",
                c.name,
                c.func,
                c.kv,
                w.len()
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} cases differ from scipy:\n{}",
        failed.len(),
        failed.join("\n")
    );
});

/// A random u8/u16/f32 tensor (with ties for the integer types).
fn random(rt: &Runtime, dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let v = testing::random_f32(n, 0.0, 1.0, seed);
    match dtype {
        DType::U8 => rt.tensor(&v.iter().map(|&x| (x * 256.0) as u8).collect::<Vec<_>>(), shape),
        DType::U16 => rt.tensor(
            &v.iter().map(|&x| (x * 300.0) as u16 * 200).collect::<Vec<_>>(),
            shape,
        ),
        _ => rt.tensor(&v.iter().map(|&x| (x - 0.5) * 1e3).collect::<Vec<_>>(), shape),
    }
    .unwrap()
}

fn modes() -> [BoundaryMode; 6] {
    use BoundaryMode::*;
    [Reflect, Constant(0.0), Constant(37.0), Nearest, Mirror, Wrap]
}

/// The windows that reach every GPU algorithm: networks (3x3 median, 5x5 median, <= 49
/// elements any rank), the u8 histogram (boxes over 49), bisection, fused box min/max
/// (and its z pass), footprint min/max and structures.
fn windows(dims: usize, seed: u64) -> Vec<(RankFunction, RankParams)> {
    let fp = |shape: &[usize], s: u64| {
        let n = shape.iter().product();
        let mut m: Vec<bool> = testing::random_f32(n, 0.0, 1.0, s)
            .iter()
            .map(|&x| x < 0.6)
            .collect();
        m[n / 2] = true;
        Footprint::new(shape, m).unwrap()
    };
    let sz = |v: &[usize]| RankParams::size(&v[v.len() - dims..]);
    vec![
        (RankFunction::Median, sz(&[1, 3, 3])),
        (RankFunction::Median, sz(&[1, 5, 5])),
        (RankFunction::Rank(3), sz(&[1, 3, 3])),
        (
            RankFunction::Percentile(30.0),
            sz(&[1, 4, 6]).with_origin(&[0, 1, -2][3 - dims..]),
        ),
        (RankFunction::Median, sz(&[1, 7, 7])),
        (
            RankFunction::Rank(-5),
            RankParams::footprint(fp(&[3, 3, 5][3 - dims..], seed)),
        ),
        (RankFunction::Median, sz(&[1, 11, 9])),
        (RankFunction::Rank(30), sz(&[2, 6, 9])),
        (RankFunction::Minimum, sz(&[1, 5, 7])),
        (
            RankFunction::Maximum,
            sz(&[3, 4, 5]).with_origin(&[-1, 1, 0][3 - dims..]),
        ),
        (
            RankFunction::Maximum,
            RankParams::footprint(fp(&[3, 5, 3][3 - dims..], seed + 1)),
        ),
        (RankFunction::Minimum, sz(&[1, 40, 3])),
        (
            RankFunction::GreyDilation,
            sz(&[2, 3, 2]).with_structure(
                &[2, 3, 2][3 - dims..],
                (0..12)
                    .map(|i| (i % 5) as f64 * 0.5)
                    .take(if dims == 3 { 12 } else { 6 })
                    .collect(),
            ),
        ),
    ]
}

/// GPU == CPU on fresh inputs at odd sizes, every algorithm, every mode, every dtype.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_equals_cpu_on_random_inputs() {
    let Some(gpu) = testing::cuda_runtime_or_skip("rank::gpu_equals_cpu_on_random_inputs") else {
        return;
    };
    poison(gpu);
    let cpu = Runtime::cpu();
    let mut seed = 1000;
    // widths of whole 4-byte words (52, 12, 4, 44) run the u8 medians four outputs a
    // thread (`rank_med*_u8x4`, the default; KILN_MED_U8X4=0 picks the one-output
    // kernels): 12 has one interior word, 4 none, 2 and 3 rows are all border
    for shape in [
        vec![37, 53],
        vec![1, 129],
        vec![67, 5],
        vec![5, 13, 21],
        vec![3, 70, 41],
        vec![37, 52],
        vec![9, 12],
        vec![3, 4],
        vec![2, 20, 44],
    ] {
        let dims = shape.len();
        for dtype in [DType::U8, DType::U16, DType::F32] {
            for (f, p) in windows(dims, seed) {
                for mode in modes() {
                    seed += 1;
                    let x = random(&cpu, dtype, &shape, seed);
                    let p = p.clone().with_mode(mode);
                    let want = x.rank_apply(f, &p).unwrap();
                    let got = x.to_device(gpu).unwrap().rank_apply(f, &p).unwrap();
                    assert_eq!(bits(&got), bits(&want), "{f:?} {p:?} {dtype} {shape:?}");
                }
            }
            for (f, its, bv) in [
                (BinaryFunction::Erosion, 2, false),
                (BinaryFunction::Dilation, -1, true),
                (BinaryFunction::Opening, 1, true),
                (BinaryFunction::Closing, 3, false),
                (BinaryFunction::FillHoles, 1, false),
            ] {
                seed += 1;
                let x = random(&cpu, dtype, &shape, seed).binary_spec_threshold();
                let p = BinaryParams {
                    iterations: its,
                    border_value: bv,
                    ..Default::default()
                };
                let want = x.binary_apply(f, &p).unwrap();
                let got = x.to_device(gpu).unwrap().binary_apply(f, &p).unwrap();
                assert_eq!(bits(&got), bits(&want), "{f:?} {p:?} {dtype} {shape:?}");
            }
        }
    }
}

trait Threshold {
    fn binary_spec_threshold(&self) -> Tensor;
}

impl Threshold for Tensor {
    /// Keeps the dtype; about 40% of the elements become zero, so that the masks have
    /// structure (holes, borders) rather than being all true.
    fn binary_spec_threshold(&self) -> Tensor {
        let rt = Runtime::cpu();
        let shape = self.shape().to_vec();
        match self.dtype() {
            DType::U8 => rt.tensor(
                &self
                    .to_vec::<u8>()
                    .unwrap()
                    .iter()
                    .map(|&v| if v < 100 { 0 } else { v })
                    .collect::<Vec<_>>(),
                &shape,
            ),
            DType::U16 => rt.tensor(
                &self
                    .to_vec::<u16>()
                    .unwrap()
                    .iter()
                    .map(|&v| if v < 24000 { 0 } else { v })
                    .collect::<Vec<_>>(),
                &shape,
            ),
            _ => rt.tensor(
                &self
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&v| if v < -100.0 { 0.0 } else { v })
                    .collect::<Vec<_>>(),
                &shape,
            ),
        }
        .unwrap()
    }
}

/// The CPU's fast paths (separable van Herk min/max, Huang's u8 histogram) equal sorting
/// each window, written here from scipy's definition, on random inputs.
#[test]
fn cpu_fast_paths_equal_a_naive_reference() {
    let rt = Runtime::cpu();
    let mut seed = 7;
    for (shape, size, origin) in [
        (
            vec![23usize, 31usize],
            vec![5usize, 4usize],
            vec![1isize, -2isize],
        ),
        (vec![9, 40], vec![9, 13], vec![0, 3]),
        (vec![3, 11, 14], vec![1, 8, 9], vec![0, 0, -1]),
    ] {
        for mode in modes() {
            seed += 1;
            let x = random(&rt, DType::U8, &shape, seed);
            let p = RankParams::size(&size).with_mode(mode).with_origin(&origin);
            let n: usize = size.iter().product();
            for (f, r) in [
                (RankFunction::Minimum, 0),
                (RankFunction::Maximum, n - 1),
                (RankFunction::Rank(17), 17),
                (RankFunction::Median, n / 2),
            ] {
                let got = x.rank_apply(f, &p).unwrap().to_vec::<u8>().unwrap();
                let want = naive(&x.to_vec::<u8>().unwrap(), &shape, &size, &origin, mode, r);
                assert_eq!(got, want, "{f:?} {shape:?} {size:?} {mode}");
            }
        }
    }
}

/// Sort every window (a box of `size` at `origin`) and take rank `r`.
fn naive(
    x: &[u8],
    shape: &[usize],
    size: &[usize],
    origin: &[isize],
    mode: BoundaryMode,
    r: usize,
) -> Vec<u8> {
    let d = shape.len();
    let strides: Vec<usize> = (0..d).map(|a| shape[a + 1..].iter().product()).collect();
    let cval = mode.cval().map_or(0, |c| c as u8);
    let total: usize = shape.iter().product();
    let wn: usize = size.iter().product();
    (0..total)
        .map(|i| {
            let mut vals: Vec<u8> = (0..wn)
                .map(|j| {
                    let mut idx = 0;
                    for a in 0..d {
                        let p = (i / strides[a]) % shape[a];
                        let q = (j / size[a + 1..].iter().product::<usize>()) % size[a];
                        let c = (size[a] / 2) as isize + origin[a];
                        match mode.map_index(p as isize + q as isize - c, shape[a]) {
                            Some(m) => idx += m * strides[a],
                            None => return cval,
                        }
                    }
                    x[idx]
                })
                .collect();
            vals.sort_unstable();
            vals[r]
        })
        .collect()
}

#[test]
fn bad_parameters_are_clear_errors() {
    let rt = Runtime::cpu();
    let x = rt.tensor(&[1u8; 12], &[3, 4]).unwrap();
    let e = x
        .median_filter(&RankParams::size(&[3]).with_origin(&[2]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid origin"), "{e}");
    let e = x.rank_filter(9, &RankParams::size(&[3])).unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    let e = x.median_filter(&RankParams::default()).unwrap_err().to_string();
    assert!(e.contains("size, a footprint"), "{e}");
    // f64 runs on the CPU (scipy's every-dtype path); a constant plane stays constant
    let h = rt.tensor(&[1.0f64; 12], &[3, 4]).unwrap();
    let m = h.median_filter(&RankParams::size(&[3])).unwrap();
    assert_eq!(m.to_vec::<f64>().unwrap(), vec![1.0; 12]);
    let fp = Footprint::new(&[3], vec![true; 3]).unwrap();
    let e = x
        .median_filter(&RankParams::footprint(fp))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 1"), "{e}");
    // a cval outside the integer type's range is refused, naming it; in range it truncates
    for (c, ok) in [
        (-3.0, false),
        (256.0, false),
        (-0.5, true),
        (255.9, true),
        (7.0, true),
    ] {
        let p = RankParams::size(&[3]).with_mode(BoundaryMode::Constant(c));
        match (x.minimum_filter(&p), ok) {
            (Ok(_), true) => {}
            (Err(e), false) => assert!(e.to_string().contains("outside u8's range"), "{e}"),
            (r, _) => panic!("cval {c}: {r:?}"),
        }
        assert_eq!(x.grey_erosion(&p).is_ok(), ok, "grey_erosion cval {c}");
    }
    let w = rt.tensor(&[1u16; 12], &[3, 4]).unwrap();
    let p = RankParams::size(&[3]).with_mode(BoundaryMode::Constant(65536.0));
    assert!(w.median_filter(&p).unwrap_err().to_string().contains("u16"));
    let f = rt.tensor(&[1f32; 12], &[3, 4]).unwrap();
    assert!(f.median_filter(&p).is_ok(), "floats take any finite cval");
}
