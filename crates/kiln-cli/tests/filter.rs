//! `kiln filter2d` / `kiln filter3d` end to end: the binary on small PNG, TIFF, NPY and NIfTI
//! files made here, the outputs read back and checked against a naive float64 correlation
//! written in this file (its own boundary-index rules, its own preset weights), and every
//! kind of bad input checked for its exit code, its message and the absence of any output.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln_io::{HostImage, NiftiHeader, SampleType, Volume};
use ndarray::{Array3, ArrayD, IxDyn};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

/// A scratch directory the binary runs in.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }

    fn p(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Runs `kiln <line>` (split at whitespace) here; the default device is auto, so the
    /// CPU where there is no GPU.
    fn kiln(&self, line: &str) -> Output {
        let dir = self.0.path();
        Command::new(bin())
            .args(line.split_whitespace())
            .current_dir(dir)
            .env("KILN_CACHE_DIR", cache_dir(dir))
            .env_remove("KILN_DEVICES")
            .env_remove("KILN_CONFIG")
            .output()
            .expect("run kiln")
    }

    /// Runs and asserts success; returns stdout parsed as JSON with `--json`, else null.
    fn ok(&self, line: &str) -> Value {
        let o = self.kiln(line);
        assert_eq!(o.status.code(), Some(0), "kiln {line}: {}", stderr(&o));
        if !line.split_whitespace().any(|a| a == "--json") {
            return Value::Null;
        }
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", o.stdout))
    }

    /// The names here, sorted, without the kernel cache (auto may create it).
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "cache")
            .collect();
        v.sort();
        v
    }

    /// Runs `kiln <line>`, which must fail with exit 4 saying `needle` and leave the
    /// directory as it was: no output, no temporary file, an existing output untouched.
    fn fails(&self, line: &str, needle: &str) {
        let before = self.names();
        let o = self.kiln(line);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(4), "kiln {line}: {err}");
        assert!(err.contains(needle), "kiln {line}: wanted `{needle}` in: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(self.names(), before, "kiln {line} left files");
    }
}

/// The kernel cache: `KILN_CACHE_DIR` when the environment sets one (the GPU machine's
/// scripts warm one for every test), else one in the test's directory.
fn cache_dir(dir: &Path) -> PathBuf {
    std::env::var_os("KILN_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("cache"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Deterministic values in `lo..hi` (xorshift64*), independent of kiln's generators.
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

/// Random integers in `0..=max` as f32.
fn ints(n: usize, seed: u64, max: u32) -> Vec<f32> {
    values(n, seed, 0.0, f64::from(max) + 1.0)
        .into_iter()
        .map(|v| v.floor().min(f64::from(max)) as f32)
        .collect()
}

fn f32s(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f32> {
    values(n, seed, lo, hi).into_iter().map(|v| v as f32).collect()
}

// ---- the reference ---------------------------------------------------------------------

/// Where position `i` of an axis of length `n` reads under `mode` (scipy.ndimage's
/// extensions, by unfolding until inside), `None` for the constant.
fn source(mode: &str, i: i64, n: i64) -> Option<usize> {
    if (0..n).contains(&i) {
        return Some(i as usize);
    }
    let mut i = i;
    match mode {
        "constant" => return None,
        "nearest" => i = i.clamp(0, n - 1),
        "wrap" => i = i.rem_euclid(n),
        "reflect" => {
            while !(0..n).contains(&i) {
                i = if i < 0 { -i - 1 } else { 2 * n - 1 - i };
            }
        }
        "mirror" if n == 1 => i = 0,
        "mirror" => {
            while !(0..n).contains(&i) {
                i = if i < 0 { -i } else { 2 * n - 2 - i };
            }
        }
        m => panic!("mode {m}"),
    }
    Some(i as usize)
}

/// `scipy.ndimage.correlate(x, k, mode, cval)` in float64 for any rank: `x` row-major of
/// `shape`, `k` row-major with side `ks` along every axis.
fn correlate(x: &[f64], shape: &[usize], k: &[f64], ks: usize, mode: &str, cval: f64) -> Vec<f64> {
    let nd = shape.len();
    let r = (ks / 2) as i64;
    let n: usize = shape.iter().product();
    let unravel = |mut f: usize, dims: &[usize]| {
        let mut idx = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = f % dims[d];
            f /= dims[d];
        }
        idx
    };
    let kdims = vec![ks; nd];
    (0..n)
        .map(|o| {
            let at = unravel(o, shape);
            let mut s = 0.0;
            for (t, &w) in k.iter().enumerate() {
                let off = unravel(t, &kdims);
                let mut flat = Some(0usize);
                for d in 0..nd {
                    let p = at[d] as i64 + off[d] as i64 - r;
                    flat = match (flat, source(mode, p, shape[d] as i64)) {
                        (Some(f), Some(q)) => Some(f * shape[d] + q),
                        _ => None,
                    };
                }
                s += w * flat.map_or(cval, |f| x[f]);
            }
            s
        })
        .collect()
}

/// `scipy.ndimage.correlate1d(x, f, axis, mode, cval)` in float64.
fn correlate1d(x: &[f64], shape: &[usize], f: &[f64], axis: usize, mode: &str, cval: f64) -> Vec<f64> {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let r = (f.len() / 2) as i64;
    (0..x.len())
        .map(|o| {
            let i = (o / stride % n) as i64;
            let base = o - (i as usize) * stride;
            f.iter()
                .enumerate()
                .map(|(t, &w)| {
                    w * source(mode, i + t as i64 - r, n as i64).map_or(cval, |q| x[base + q * stride])
                })
                .sum()
        })
        .collect()
}

/// A preset as scipy computes it: the stencils (cross4, laplacian, sharpen) by `correlate`,
/// the others as their scipy function's `correlate1d` passes (`gaussian_filter`,
/// `uniform_filter`: axis 0, 1(, 2); `sobel(axis=a)`: the derivative along `a` first), each
/// pass padding with `cval` on its own (which differs from one n-D correlation only under
/// `constant` with a non-zero cval).
fn scipy_preset(name: &str, x: &[f64], shape: &[usize], mode: &str, cval: f64) -> Vec<f64> {
    let (d, sm) = ([-1.0, 0.0, 1.0], [1.0, 2.0, 1.0]);
    let passes: Vec<(usize, Vec<f64>)> = if let Some(k) = name.strip_prefix("box:") {
        let k: usize = k.parse().unwrap();
        (0..shape.len()).map(|a| (a, vec![1.0 / k as f64; k])).collect()
    } else if let Some(s) = name.strip_prefix("gaussian:") {
        let g = gauss1d(s.parse().unwrap());
        (0..shape.len()).map(|a| (a, g.clone())).collect()
    } else if name == "sobel-x" {
        vec![(1, d.to_vec()), (0, sm.to_vec())]
    } else if name == "sobel-y" {
        vec![(0, d.to_vec()), (1, sm.to_vec())]
    } else {
        let (k, ks) = preset(name, shape.len());
        return correlate(x, shape, &k, ks, mode, cval);
    };
    passes.iter().fold(x.to_vec(), |acc, (a, f)| {
        correlate1d(&acc, shape, f, *a, mode, cval)
    })
}

fn outer(f: &[&[f64]]) -> Vec<f64> {
    f.iter().fold(vec![1.0], |acc, v| {
        acc.iter().flat_map(|&a| v.iter().map(move |&b| a * b)).collect()
    })
}

fn gauss1d(sigma: f64) -> Vec<f64> {
    let r = (4.0 * sigma + 0.5) as i64;
    let phi: Vec<f64> = (-r..=r)
        .map(|x| (-(x * x) as f64 / (2.0 * sigma * sigma)).exp())
        .collect();
    let s: f64 = phi.iter().sum();
    phi.iter().map(|p| p / s).collect()
}

/// The weights and side of a preset, written out from their definitions.
fn preset(name: &str, rank: usize) -> (Vec<f64>, usize) {
    let stencil = |w: [f64; 9]| (w.to_vec(), 3);
    let (d, sm) = ([-1.0, 0.0, 1.0], [1.0, 2.0, 1.0]);
    if rank == 3 && name == "laplacian" {
        let mut w = vec![0.0; 27];
        for (a, b, c) in [(0, 1, 1), (2, 1, 1), (1, 0, 1), (1, 2, 1), (1, 1, 0), (1, 1, 2)] {
            w[(a * 3 + b) * 3 + c] = 1.0;
        }
        w[13] = -6.0;
        return (w, 3);
    }
    if let Some(k) = name.strip_prefix("box:") {
        let k: usize = k.parse().unwrap();
        return (vec![1.0 / (k.pow(rank as u32) as f64); k.pow(rank as u32)], k);
    }
    if let Some(s) = name.strip_prefix("gaussian:") {
        let g = gauss1d(s.parse().unwrap());
        let f: Vec<&[f64]> = vec![&g; rank];
        return (outer(&f), g.len());
    }
    match name {
        "cross4" => stencil([0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0]),
        "laplacian" => stencil([0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0]),
        "sharpen" => stencil([0.0, -1.0, 0.0, -1.0, 5.0, -1.0, 0.0, -1.0, 0.0]),
        "sobel-x" => (outer(&[&sm, &d]), 3),
        "sobel-y" => (outer(&[&d, &sm]), 3),
        n => panic!("preset {n}"),
    }
}

/// The reference on f32 data, per channel of an interleaved `(h, w, c)` image.
fn reference_hwc(x: &[f32], [h, w, c]: [usize; 3], k: &[f64], ks: usize, mode: &str) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for ch in 0..c {
        let plane: Vec<f64> = x.iter().skip(ch).step_by(c).map(|&v| f64::from(v)).collect();
        for (i, v) in correlate(&plane, &[h, w], k, ks, mode, 0.0)
            .into_iter()
            .enumerate()
        {
            out[i * c + ch] = v;
        }
    }
    out
}

/// Max |got - want| within `rel` of the result scale Σ|w|·max|x| (f32 rounding of the
/// passes, the GPU's fma order): a wrong boundary, kernel or axis is off by O(scale).
fn assert_close(got: &[f32], want: &[f64], k: &[f64], max_in: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = k.iter().map(|w| w.abs()).sum::<f64>() * max_in.max(1.0);
    let tol = 4e-6 * scale;
    let (i, err) = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_finite() {
                (f64::from(g) - w).abs()
            } else {
                f64::INFINITY
            }
        })
        .enumerate()
        .fold((0, 0.0), |a, (i, e)| if e > a.1 { (i, e) } else { a });
    assert!(
        err <= tol,
        "{what}: element {i}: got {}, want {}, err {err:e} > tol {tol:e}",
        got[i],
        want[i]
    );
}

/// Rounded and clamped as kiln-io documents, compared exactly except where the reference
/// sits near a rounding tie: within the f32 path's error, which grows with the values
/// (1e-5 of the type's maximum, at least 1e-3: on the H200 a 16-bit gaussian gave 38432.5
/// in f32 for an exact 38432.498).
fn assert_quantised(got: &[f32], want: &[f64], max: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let q = w.round().clamp(0.0, max);
        let window = (1e-5 * max).max(1e-3);
        let near_tie = ((w - w.floor()) - 0.5).abs() < window && (0.0..=max).contains(&w);
        let ok = f64::from(g) == q || (near_tie && (f64::from(g) - q).abs() <= 1.0);
        assert!(ok, "{what}: element {i}: got {g}, want round/clamp({w}) = {q}");
    }
}

// ---- files ------------------------------------------------------------------------------

fn write_npy(path: &Path, shape: &[usize], v: Vec<f32>) {
    kiln_io::write_npy(path, &ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()).unwrap();
}

/// An NPY v1.0 float64 file, written by hand (kiln-io writes float32 only).
fn write_npy_f64(path: &Path, shape: &[usize], v: &[f64]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for x in v {
        bytes.extend(x.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>, kiln_io::NpyDtype) {
    let a = kiln_io::read_npy(path).unwrap();
    (a.data.shape().to_vec(), a.data.iter().copied().collect(), a.dtype)
}

fn write_img(path: &Path, h: usize, w: usize, c: usize, v: Vec<f32>, st: SampleType) {
    let img = HostImage::new(Array3::from_shape_vec((h, w, c), v).unwrap(), st);
    kiln_io::write_image(path, &img, st).unwrap();
}

fn read_img(path: &Path) -> HostImage {
    kiln_io::read_image(path).unwrap()
}

/// An image's samples, row-major and channel-interleaved.
fn pixels(img: &HostImage) -> Vec<f32> {
    img.data.iter().copied().collect()
}

fn flat(a: &ArrayD<f32>) -> Vec<f32> {
    a.iter().copied().collect()
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().map(|x| f64::from(x.abs())).fold(0.0, f64::max)
}

fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// An oblique header with both transforms, units, a description and calibration.
fn oblique_header() -> NiftiHeader {
    let mut h = NiftiHeader {
        pixdim: [-1.0, 0.8, 0.9, 2.5, 1.7, 1.0, 1.0, 1.0],
        qform_code: 1,
        sform_code: 2,
        quatern_b: 0.1,
        quatern_c: -0.2,
        quatern_d: 0.3,
        quatern_x: 10.5,
        quatern_y: -20.25,
        quatern_z: 33.0,
        srow_x: [0.8, 0.05, 0.0, -90.0],
        srow_y: [-0.04, 0.9, 0.1, 126.0],
        srow_z: [0.0, -0.1, 2.5, -72.0],
        xyzt_units: 2 | 8,
        cal_min: -50.0,
        cal_max: 50.0,
        ..NiftiHeader::default()
    };
    h.set_description_str("kiln filter3d test").unwrap();
    h
}

fn write_nifti(path: &Path, shape: &[usize], v: Vec<f32>) {
    let mut vol = Volume::new(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap());
    vol.header = oblique_header();
    kiln_io::write_volume(path, &vol).unwrap();
}

// ---- 2-D values --------------------------------------------------------------------------

#[test]
fn cross4_on_a_17x33_npy_equals_the_reference_in_every_mode() {
    let d = Dir::new();
    let (h, w) = (17, 33);
    let x = f32s(h * w, 1, -10.0, 10.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    let (k, ks) = preset("cross4", 2);
    for (mode, extra, name, cval) in [
        ("reflect", None, "reflect", 0.0),
        ("mirror", None, "mirror", 0.0),
        ("nearest", None, "nearest", 0.0),
        ("wrap", None, "wrap", 0.0),
        ("constant", None, "constant", 0.0),
        ("constant", Some("2.5"), "constant", 2.5),
        ("constant:-3", None, "constant", -3.0),
    ] {
        let cv = extra.map_or(String::new(), |c| format!("--cval {c}"));
        let args = format!("--input in.npy --kernel cross4 --mode {mode} --output out.npy {cv}");
        d.ok(&format!("filter2d {args}"));
        let (shape, got, dtype) = read_npy(&d.p("out.npy"));
        assert_eq!((shape, dtype), (vec![h, w], kiln_io::NpyDtype::F32));
        let want = correlate(&as_f64(&x), &[h, w], &k, ks, name, cval);
        assert_close(
            &got,
            &want,
            &k,
            10.0_f64.max(cval.abs()),
            &format!("cross4 {mode} {extra:?}"),
        );
    }
    // The default mode is reflect: the same bits as asking for it.
    d.ok("filter2d --input in.npy --kernel cross4 --output dflt.npy");
    d.ok("filter2d --input in.npy --kernel cross4 --mode reflect --output refl.npy");
    assert_eq!(read_npy(&d.p("dflt.npy")).1, read_npy(&d.p("refl.npy")).1);
}

#[test]
fn every_2d_preset_on_npy_equals_the_reference() {
    let d = Dir::new();
    let (h, w) = (13, 19);
    let x = f32s(h * w, 2, -5.0, 20.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    for name in [
        "cross4",
        "box:3",
        "box:5",
        "gaussian:1",
        "gaussian:2.5",
        "sobel-x",
        "sobel-y",
        "laplacian",
        "sharpen",
    ] {
        let json = d.ok(&format!(
            "filter2d --input in.npy --kernel {name} --mode mirror --output out.npy --json"
        ));
        let (k, ks) = preset(name, 2);
        assert_eq!(json["kernel"], name);
        assert_eq!(json["kernel_size"], ks);
        let got = read_npy(&d.p("out.npy")).1;
        let want = correlate(&as_f64(&x), &[h, w], &k, ks, "mirror", 0.0);
        assert_close(&got, &want, &k, 20.0, name);
    }
}

#[test]
fn user_kernel_npy_in_f64_and_f32() {
    let d = Dir::new();
    let (h, w) = (11, 8);
    let x = f32s(h * w, 3, -1.0, 1.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    // Not rank 1, so it runs as the direct 5x5 sum; sobel-x's axis is checked by asymmetry.
    let k = values(25, 4, -1.0, 1.0);
    write_npy_f64(&d.p("k.npy"), &[5, 5], &k);
    let json = d.ok("filter2d --input in.npy --kernel k.npy --mode wrap --output out.npy --json");
    assert_eq!(
        (json["kernel"].as_str(), json["path"].as_str()),
        (Some("user 5×5"), Some("direct"))
    );
    let got = read_npy(&d.p("out.npy")).1;
    assert_close(
        &got,
        &correlate(&as_f64(&x), &[h, w], &k, 5, "wrap", 0.0),
        &k,
        1.0,
        "user 5x5 f64",
    );
    // A float32 kernel file, 1x1 and larger than the image (a 31x31 on 11x8).
    write_npy(&d.p("k1.npy"), &[1, 1], vec![-2.0]);
    d.ok("filter2d --input in.npy --kernel k1.npy --output o1.npy");
    let got = read_npy(&d.p("o1.npy")).1;
    assert_eq!(got, x.iter().map(|v| -2.0 * v).collect::<Vec<f32>>());
    let k31 = f32s(31 * 31, 5, 0.0, 1.0);
    write_npy(&d.p("k31.npy"), &[31, 31], k31.clone());
    d.ok("filter2d --input in.npy --kernel k31.npy --mode reflect --output o31.npy");
    let k31 = as_f64(&k31);
    let want = correlate(&as_f64(&x), &[h, w], &k31, 31, "reflect", 0.0);
    assert_close(&read_npy(&d.p("o31.npy")).1, &want, &k31, 1.0, "31x31 on 11x8");
}

#[test]
fn u8_png_is_rounded_and_clamped() {
    let d = Dir::new();
    let (h, w) = (12, 15);
    let x = ints(h * w, 6, 255);
    write_img(&d.p("in.png"), h, w, 1, x.clone(), SampleType::U8);
    // box:3: fractions k/9, never a tie; the result must be rounded, not truncated.
    d.ok("filter2d --input in.png --kernel box:3 --output box.png");
    let out = read_img(&d.p("box.png"));
    assert_eq!((out.sample_type, out.data.dim()), (SampleType::U8, (h, w, 1)));
    let (k, ks) = preset("box:3", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "reflect", 0.0);
    assert!(want.iter().any(|v| v - v.floor() > 0.5), "some values round up");
    let got = pixels(&out);
    assert_quantised(&got, &want, 255.0, "box:3 u8");
    // sharpen overshoots both ends: clamped to 0 and 255.
    d.ok("filter2d --input in.png --kernel sharpen --output sharp.png");
    let (k, ks) = preset("sharpen", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "reflect", 0.0);
    assert!(want.iter().any(|&v| v < 0.0) && want.iter().any(|&v| v > 255.0));
    let got = pixels(&read_img(&d.p("sharp.png")));
    assert_quantised(&got, &want, 255.0, "sharpen u8");
    // The same input to .npy: float32, neither rounded nor clamped.
    d.ok("filter2d --input in.png --kernel sharpen --output sharp.npy");
    let (shape, got, dtype) = read_npy(&d.p("sharp.npy"));
    assert_eq!((shape, dtype), (vec![h, w], kiln_io::NpyDtype::F32));
    assert_close(&got, &want, &k, 255.0, "sharpen u8 -> f32");
}

#[test]
fn u16_images_gray_png_and_rgb_tiff() {
    let d = Dir::new();
    let (h, w) = (9, 14);
    let x = ints(h * w, 7, 65535);
    write_img(&d.p("g.png"), h, w, 1, x.clone(), SampleType::U16);
    d.ok("filter2d --input g.png --kernel laplacian --mode nearest --output g_out.png");
    let out = read_img(&d.p("g_out.png"));
    assert_eq!(out.sample_type, SampleType::U16);
    let (k, ks) = preset("laplacian", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "nearest", 0.0);
    assert!(want.iter().any(|&v| v < 0.0) && want.iter().any(|&v| v > 65535.0));
    assert_quantised(&pixels(&out), &want, 65535.0, "laplacian u16");

    let rgb = ints(h * w * 3, 8, 65535);
    write_img(&d.p("c.tif"), h, w, 3, rgb.clone(), SampleType::U16);
    let json = d.ok("filter2d --input c.tif --kernel gaussian:1 --output c_out.tiff --json");
    assert_eq!(json["layout"], "channels");
    assert_eq!(json["input_shape"], serde_json::json!([h, w, 3]));
    assert_eq!(
        (json["input_type"].as_str(), json["output_type"].as_str()),
        (Some("u16"), Some("u16"))
    );
    let out = read_img(&d.p("c_out.tiff"));
    assert_eq!((out.sample_type, out.data.dim()), (SampleType::U16, (h, w, 3)));
    let (k, ks) = preset("gaussian:1", 2);
    let want = reference_hwc(&rgb, [h, w, 3], &k, ks, "reflect");
    assert_quantised(&pixels(&out), &want, 65535.0, "gaussian:1 rgb16");
}

#[test]
fn rgba_alpha_is_kept_and_f32_tiff_stays_f32() {
    let d = Dir::new();
    let (h, w) = (7, 10);
    let px = ints(h * w * 4, 9, 255);
    write_img(&d.p("a.png"), h, w, 4, px.clone(), SampleType::U8);
    let json = d.ok("filter2d --input a.png --kernel sobel-x --output a_out.png --json");
    assert_eq!(json["layout"], "channels+alpha");
    let out = pixels(&read_img(&d.p("a_out.png")));
    let (k, ks) = preset("sobel-x", 2);
    let colour: Vec<f32> = px.chunks(4).flat_map(|p| p[..3].to_vec()).collect();
    let want = reference_hwc(&colour, [h, w, 3], &k, ks, "reflect");
    let got_colour: Vec<f32> = out.chunks(4).flat_map(|p| p[..3].to_vec()).collect();
    assert_quantised(&got_colour, &want, 255.0, "sobel-x rgb of rgba");
    let alpha_in: Vec<f32> = px.chunks(4).map(|p| p[3]).collect();
    let alpha_out: Vec<f32> = out.chunks(4).map(|p| p[3]).collect();
    assert_eq!(alpha_out, alpha_in, "alpha copied unchanged");

    let x = f32s(h * w, 10, -100.0, 100.0);
    write_img(&d.p("f.tif"), h, w, 1, x.clone(), SampleType::F32);
    d.ok("filter2d --input f.tif --kernel sobel-y --mode constant --cval -7 --output f_out.tif");
    let out = read_img(&d.p("f_out.tif"));
    assert_eq!(out.sample_type, SampleType::F32);
    let (k, ks) = preset("sobel-y", 2);
    // scipy's sobel pads each pass with cval: not one 2-D correlation (off by 7 at the edge).
    let want = scipy_preset("sobel-y", &as_f64(&x), &[h, w], "constant", -7.0);
    assert_close(&pixels(&out), &want, &k, 100.0, "sobel-y f32 tiff");
    let direct = correlate(&as_f64(&x), &[h, w], &k, ks, "constant", -7.0);
    assert!(
        want.iter().zip(&direct).any(|(a, b)| (a - b).abs() > 1.0),
        "the case tells them apart"
    );
}

#[test]
fn three_d_npy_is_channels_or_with_batch_a_batch() {
    let d = Dir::new();
    let (a, b, c) = (5, 9, 11);
    let x = f32s(a * b * c, 11, -1.0, 1.0);
    write_npy(&d.p("in.npy"), &[a, b, c], x.clone());
    let (k, ks) = preset("cross4", 2);
    // --batch: a images of b x c.
    let json = d.ok("filter2d --input in.npy --batch --kernel cross4 --mode wrap --output b.npy --json");
    assert_eq!(
        (json["layout"].as_str(), json["items"].as_u64()),
        (Some("batch"), Some(a as u64))
    );
    let (shape, got, _) = read_npy(&d.p("b.npy"));
    assert_eq!(shape, vec![a, b, c]);
    for i in 0..a {
        let plane = as_f64(&x[i * b * c..(i + 1) * b * c]);
        let want = correlate(&plane, &[b, c], &k, ks, "wrap", 0.0);
        assert_close(
            &got[i * b * c..(i + 1) * b * c],
            &want,
            &k,
            1.0,
            &format!("batch image {i}"),
        );
    }
    // Without: one a x b image of c channels.
    d.ok("filter2d --input in.npy --kernel cross4 --mode wrap --output c.npy");
    let (shape, got, _) = read_npy(&d.p("c.npy"));
    assert_eq!(shape, vec![a, b, c]);
    assert_close(
        &got,
        &reference_hwc(&x, [a, b, c], &k, ks, "wrap"),
        &k,
        1.0,
        "11 channels",
    );
}

// ---- 3-D values --------------------------------------------------------------------------

#[test]
fn box3_on_a_9x7x5_nifti_keeps_the_header_and_affine() {
    let d = Dir::new();
    let shape = [9, 7, 5];
    let x = f32s(9 * 7 * 5, 12, -50.0, 50.0);
    write_nifti(&d.p("in.nii.gz"), &shape, x.clone());
    let json = d.ok("filter3d --input in.nii.gz --kernel box:3 --output out.nii.gz --json");
    assert_eq!(json["input_shape"], serde_json::json!([9, 7, 5]));
    assert_eq!(
        (json["mode"].as_str(), json["path"].as_str()),
        (Some("reflect"), Some("separable"))
    );
    assert!(json["device"].is_string() && json["seconds"].as_f64().is_some());
    let input = kiln_io::read_volume(d.p("in.nii.gz")).unwrap();
    let out = kiln_io::read_volume(d.p("out.nii.gz")).unwrap();
    assert_eq!(out.data.shape(), &shape);
    let (k, ks) = preset("box:3", 3);
    let want = correlate(&as_f64(&x), &shape, &k, ks, "reflect", 0.0);
    assert_close(&flat(&out.data), &want, &k, 50.0, "box:3 9x7x5");
    let (a, b) = (&input.header, &out.header);
    assert_eq!(out.affine(), input.affine());
    assert_eq!(
        (a.pixdim, a.qform_code, a.sform_code),
        (b.pixdim, b.qform_code, b.sform_code)
    );
    assert_eq!((a.srow_x, a.srow_y, a.srow_z), (b.srow_x, b.srow_y, b.srow_z));
    assert_eq!(
        [
            a.quatern_b,
            a.quatern_c,
            a.quatern_d,
            a.quatern_x,
            a.quatern_y,
            a.quatern_z
        ],
        [
            b.quatern_b,
            b.quatern_c,
            b.quatern_d,
            b.quatern_x,
            b.quatern_y,
            b.quatern_z
        ]
    );
    assert_eq!(
        (a.descrip.clone(), a.xyzt_units),
        (b.descrip.clone(), b.xyzt_units)
    );
    assert_eq!(out.stored_dtype(), Some(kiln_io::NiftiType::Float32));
}

#[test]
fn every_3d_preset_and_a_user_kernel_equal_the_reference() {
    let d = Dir::new();
    let shape = [6, 8, 7];
    let x = f32s(6 * 8 * 7, 13, -3.0, 3.0);
    write_npy(&d.p("v.npy"), &shape, x.clone());
    for name in [
        "box:3",
        "box:5",
        "box:7",
        "gaussian:0.5",
        "gaussian:0.8",
        "laplacian",
    ] {
        d.ok(&format!(
            "filter3d --input v.npy --kernel {name} --mode nearest --output o.npy"
        ));
        let (s, got, _) = read_npy(&d.p("o.npy"));
        assert_eq!(s, shape.to_vec());
        let (k, ks) = preset(name, 3);
        assert_close(
            &got,
            &correlate(&as_f64(&x), &shape, &k, ks, "nearest", 0.0),
            &k,
            3.0,
            name,
        );
    }
    let k = values(27, 14, -1.0, 1.0);
    write_npy_f64(&d.p("k.npy"), &[3, 3, 3], &k);
    // An .npy volume written as NIfTI gets a default header.
    d.ok("filter3d --input v.npy --kernel k.npy --mode constant --cval 1.5 --output o.nii");
    let out = kiln_io::read_volume(d.p("o.nii")).unwrap();
    assert_eq!(out.data.shape(), &shape);
    let want = correlate(&as_f64(&x), &shape, &k, 3, "constant", 1.5);
    assert_close(&flat(&out.data), &want, &k, 3.0, "user 3x3x3 constant 1.5");
}

#[test]
fn a_4d_nifti_is_filtered_volume_by_volume() {
    let d = Dir::new();
    let (s3, t) = ([6, 5, 4], 3);
    let x = f32s(6 * 5 * 4 * t, 15, -10.0, 10.0);
    write_nifti(&d.p("in.nii"), &[6, 5, 4, t], x.clone());
    let json = d.ok("filter3d --input in.nii --kernel gaussian:0.6 --mode wrap --output out.nii --json");
    assert_eq!(
        (json["items"].as_u64(), json["layout"].as_str()),
        (Some(t as u64), Some("volumes"))
    );
    let out = kiln_io::read_volume(d.p("out.nii")).unwrap();
    assert_eq!(out.data.shape(), &[6, 5, 4, t]);
    let input = kiln_io::read_volume(d.p("in.nii")).unwrap();
    assert_eq!(out.affine(), input.affine());
    let (k, ks) = preset("gaussian:0.6", 3);
    for ti in 0..t {
        let vin: Vec<f64> = input
            .data
            .index_axis(ndarray::Axis(3), ti)
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let vout: Vec<f32> = out
            .data
            .index_axis(ndarray::Axis(3), ti)
            .iter()
            .copied()
            .collect();
        assert_close(
            &vout,
            &correlate(&vin, &s3, &k, ks, "wrap", 0.0),
            &k,
            10.0,
            &format!("t={ti}"),
        );
    }
    // The volumes differ, so mixing them up would fail.
    assert!(max_abs(&x) > 0.0);
}

// ---- bad input ---------------------------------------------------------------------------

#[test]
fn bad_2d_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    write_npy(&d.p("in.npy"), &[8, 9], f32s(8 * 9, 16, 0.0, 1.0));
    write_img(&d.p("in.png"), 8, 9, 1, ints(72, 17, 255), SampleType::U8);
    write_npy(&d.p("k4.npy"), &[4, 4], vec![0.1; 16]);
    write_npy(&d.p("k33.npy"), &[33, 33], vec![0.001; 33 * 33]);
    write_npy(&d.p("k3d.npy"), &[3, 3, 3], vec![0.1; 27]);
    write_npy(&d.p("k1d.npy"), &[3], vec![0.1; 3]);
    write_npy(&d.p("k35.npy"), &[3, 5], vec![0.1; 15]);
    let mut nan = vec![0.1f32; 9];
    nan[5] = f32::NAN;
    write_npy(&d.p("knan.npy"), &[3, 3], nan);
    let mut inf = vec![0.1f64; 9];
    inf[0] = f64::NEG_INFINITY;
    write_npy_f64(&d.p("kinf.npy"), &[3, 3], &inf);
    write_npy(&d.p("empty.npy"), &[0, 5], vec![]);
    write_npy(&d.p("four.npy"), &[2, 2, 2, 2], vec![1.0; 16]);
    let bytes = std::fs::read(d.p("in.npy")).unwrap();
    std::fs::write(d.p("trunc.npy"), &bytes[..bytes.len() - 7]).unwrap();
    let png = std::fs::read(d.p("in.png")).unwrap();
    std::fs::write(d.p("trunc.png"), &png[..png.len() / 2]).unwrap();
    let bad: Vec<u8> = png
        .iter()
        .enumerate()
        .map(|(i, &b)| if i < 40 { b } else { b ^ 0x5a })
        .collect();
    std::fs::write(d.p("corrupt.png"), bad).unwrap();
    std::fs::write(d.p("notes.txt"), "not a kernel").unwrap();
    std::fs::write(d.p("in.jpg"), [0xff, 0xd8, 0xff]).unwrap();
    write_nifti(&d.p("vol.nii"), &[3, 3, 3], vec![1.0; 27]);
    std::fs::write(d.p("keep.npy"), b"old").unwrap();
    // Each case: the arguments => what stderr must say.
    for case in [
        "--input in.jpg --kernel cross4 --output o.png => unknown file extension",
        "--input in.npy --kernel cross4 --output o.bmp => image files must end in one of: .png .tif .tiff .npy",
        "--input vol.nii --kernel cross4 --output o.npy => use kiln filter3d",
        "--input missing.png --kernel cross4 --output o.png => file not found",
        "--input trunc.npy --kernel cross4 --output o.npy => truncated",
        "--input trunc.png --kernel cross4 --output o.png => not a valid PNG file",
        "--input corrupt.png --kernel cross4 --output o.png => not a valid PNG file",
        "--input empty.npy --kernel cross4 --output o.npy => empty image",
        "--input four.npy --kernel cross4 --output o.npy => use kiln filter3d",
        "--input in.npy --kernel k4.npy --output o.npy => kernel size 4 is even",
        "--input in.npy --kernel box:4 --output o.npy => even",
        "--input in.npy --kernel k33.npy --output o.npy => exceeds the maximum 31",
        "--input in.npy --kernel box:33 --output o.npy => maximum 31",
        "--input in.npy --kernel gaussian:4 --output o.npy => sigma < 3.875",
        "--input in.npy --kernel k35.npy --output o.npy => equal sides",
        "--input in.npy --kernel knan.npy --output o.npy => weight [1, 2] is NaN",
        "--input in.npy --kernel kinf.npy --output o.npy => weight [0, 0] is -inf",
        "--input in.npy --kernel k3d.npy --output o.npy => rank 3",
        "--input in.npy --kernel k1d.npy --output o.npy => rank 1",
        "--input in.npy --kernel blur --output o.npy => unknown kernel `blur`; presets: cross4",
        "--input in.npy --kernel notes.txt --output o.npy => not .npy",
        "--input in.npy --kernel missing.npy --output o.npy => file not found",
        "--input in.npy --kernel cross4 --mode edge --output o.npy => unknown mode `edge`",
        "--input in.npy --kernel cross4 --cval 1 --output o.npy => --mode constant only",
        "--input in.npy --kernel cross4 --batch --output o.npy => --batch needs a 3-D",
        "--input in.npy --kernel cross4 --output o.png => PNG has no float samples",
        "--input in.npy --kernel cross4 --output no/such/dir/o.npy => does not exist",
        "--input in.npy --kernel cross4 --output in.npy => is the input file",
        "--input in.npy --kernel cross4 --output ./in.npy => is the input file",
        // An existing output stays as it was.
        "--input in.npy --kernel k4.npy --output keep.npy => even",
        "--input trunc.npy --kernel cross4 --output keep.npy => truncated",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(&format!("filter2d {args}"), needle);
    }
    assert_eq!(std::fs::read(d.p("keep.npy")).unwrap(), b"old");
    // Usage errors stay clap's (exit 2).
    let o = d.kiln("filter2d --input in.npy --output o.npy");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn bad_3d_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    write_nifti(&d.p("v.nii"), &[5, 4, 3], f32s(60, 18, 0.0, 1.0));
    write_nifti(&d.p("v.nii.gz"), &[5, 4, 3], f32s(60, 19, 0.0, 1.0));
    let nii = std::fs::read(d.p("v.nii")).unwrap();
    std::fs::write(d.p("trunc.nii"), &nii[..nii.len() - 40]).unwrap();
    let gz = std::fs::read(d.p("v.nii.gz")).unwrap();
    std::fs::write(d.p("trunc.nii.gz"), &gz[..gz.len() / 2]).unwrap();
    std::fs::write(d.p("junk.nii"), vec![7u8; 400]).unwrap();
    write_npy(&d.p("img.npy"), &[4, 4], vec![1.0; 16]);
    write_npy(&d.p("empty.npy"), &[3, 0, 2], vec![]);
    write_npy(&d.p("k2d.npy"), &[3, 3], vec![0.1; 9]);
    write_npy(&d.p("k9.npy"), &[9, 9, 9], vec![0.001; 729]);
    write_npy(&d.p("k4.npy"), &[4, 4, 4], vec![0.01; 64]);
    let mut inf = vec![0.1f32; 27];
    inf[26] = f32::INFINITY;
    write_npy(&d.p("kinf.npy"), &[3, 3, 3], inf);
    write_img(&d.p("i.png"), 3, 3, 1, vec![1.0; 9], SampleType::U8);
    // Each case: the arguments => what stderr must say.
    for case in [
        "--input i.png --kernel box:3 --output o.nii => use kiln filter2d",
        "--input v.nii --kernel box:3 --output o.tif => volume files must end in one of: .nii .nii.gz .npy",
        "--input trunc.nii --kernel box:3 --output o.nii => truncated",
        "--input trunc.nii.gz --kernel box:3 --output o.nii => not a valid NIfTI file",
        "--input junk.nii --kernel box:3 --output o.nii => not a valid NIfTI file",
        "--input img.npy --kernel box:3 --output o.npy => use kiln filter2d",
        "--input empty.npy --kernel box:3 --output o.npy => empty",
        "--input v.nii --kernel k2d.npy --output o.nii => rank 2",
        "--input v.nii --kernel k9.npy --output o.nii => 3×3×3, 5×5×5 or 7×7×7",
        "--input v.nii --kernel k4.npy --output o.nii => kernel size 4 is even",
        "--input v.nii --kernel box:9 --output o.nii => not supported",
        "--input v.nii --kernel kinf.npy --output o.nii => weight [2, 2, 2] is inf",
        "--input v.nii --kernel sobel-x --output o.nii => unknown kernel `sobel-x`",
        "--input v.nii --kernel box:3 --mode clamp --output o.nii => unknown mode `clamp`",
        "--input v.nii --kernel box:3 --mode constant:2 --cval 3 --output o.nii => disagree",
        "--input v.nii --kernel box:3 --output v.nii => is the input file",
        "--input v.nii.gz --kernel box:3 --output v.nii.gz => is the input file",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(&format!("filter3d {args}"), needle);
    }
}
