//! Shared by the `kiln filter2d` / `kiln filter3d` end-to-end tests (filter.rs, filter3d.rs):
//! running the binary, the naive float64 correlation with its own boundary-index rules and
//! preset weights, and file helpers. Each test crate uses a part of it.
#![allow(dead_code, clippy::unwrap_used)]

pub use kiln_io::{HostImage, NiftiHeader, SampleType, Volume};
pub use ndarray::{Array3, ArrayD, IxDyn};
pub use serde_json::Value;
pub use std::path::{Path, PathBuf};
pub use std::process::{Command, Output};

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
pub fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

/// A scratch directory the binary runs in.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }

    pub fn p(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Runs `kiln <line>` (split at whitespace) here; the default device is auto, so the
    /// CPU where there is no GPU.
    pub fn kiln(&self, line: &str) -> Output {
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
    pub fn ok(&self, line: &str) -> Value {
        let o = self.kiln(line);
        assert_eq!(o.status.code(), Some(0), "kiln {line}: {}", stderr(&o));
        if !line.split_whitespace().any(|a| a == "--json") {
            return Value::Null;
        }
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", o.stdout))
    }

    /// The names here, sorted, without the kernel cache (auto may create it).
    pub fn names(&self) -> Vec<String> {
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
    pub fn fails(&self, line: &str, needle: &str) {
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
pub fn cache_dir(dir: &Path) -> PathBuf {
    std::env::var_os("KILN_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("cache"))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Deterministic values in `lo..hi` (xorshift64*), independent of kiln's generators.
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
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
pub fn ints(n: usize, seed: u64, max: u32) -> Vec<f32> {
    values(n, seed, 0.0, f64::from(max) + 1.0)
        .into_iter()
        .map(|v| v.floor().min(f64::from(max)) as f32)
        .collect()
}

pub fn f32s(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f32> {
    values(n, seed, lo, hi).into_iter().map(|v| v as f32).collect()
}

// ---- the reference ---------------------------------------------------------------------

/// Where position `i` of an axis of length `n` reads under `mode` (scipy.ndimage's
/// extensions, by unfolding until inside), `None` for the constant.
pub fn source(mode: &str, i: i64, n: i64) -> Option<usize> {
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
pub fn correlate(x: &[f64], shape: &[usize], k: &[f64], ks: usize, mode: &str, cval: f64) -> Vec<f64> {
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
pub fn correlate1d(x: &[f64], shape: &[usize], f: &[f64], axis: usize, mode: &str, cval: f64) -> Vec<f64> {
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
pub fn scipy_preset(name: &str, x: &[f64], shape: &[usize], mode: &str, cval: f64) -> Vec<f64> {
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

pub fn outer(f: &[&[f64]]) -> Vec<f64> {
    f.iter().fold(vec![1.0], |acc, v| {
        acc.iter().flat_map(|&a| v.iter().map(move |&b| a * b)).collect()
    })
}

pub fn gauss1d(sigma: f64) -> Vec<f64> {
    let r = (4.0 * sigma + 0.5) as i64;
    let phi: Vec<f64> = (-r..=r)
        .map(|x| (-(x * x) as f64 / (2.0 * sigma * sigma)).exp())
        .collect();
    let s: f64 = phi.iter().sum();
    phi.iter().map(|p| p / s).collect()
}

/// The weights and side of a preset, written out from their definitions.
pub fn preset(name: &str, rank: usize) -> (Vec<f64>, usize) {
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
pub fn reference_hwc(x: &[f32], [h, w, c]: [usize; 3], k: &[f64], ks: usize, mode: &str) -> Vec<f64> {
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
pub fn assert_close(got: &[f32], want: &[f64], k: &[f64], max_in: f64, what: &str) {
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
pub fn assert_quantised(got: &[f32], want: &[f64], max: f64, what: &str) {
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

pub fn write_npy(path: &Path, shape: &[usize], v: Vec<f32>) {
    kiln_io::write_npy(path, &ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()).unwrap();
}

/// An NPY v1.0 float64 file, written by hand (kiln-io writes float32 only).
pub fn write_npy_f64(path: &Path, shape: &[usize], v: &[f64]) {
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

pub fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>, kiln_io::NpyDtype) {
    let a = kiln_io::read_npy(path).unwrap();
    (a.data.shape().to_vec(), a.data.iter().copied().collect(), a.dtype)
}

pub fn write_img(path: &Path, h: usize, w: usize, c: usize, v: Vec<f32>, st: SampleType) {
    let img = HostImage::new(Array3::from_shape_vec((h, w, c), v).unwrap(), st);
    kiln_io::write_image(path, &img, st).unwrap();
}

pub fn read_img(path: &Path) -> HostImage {
    kiln_io::read_image(path).unwrap()
}

/// An image's samples, row-major and channel-interleaved.
pub fn pixels(img: &HostImage) -> Vec<f32> {
    img.data.iter().copied().collect()
}

pub fn flat(a: &ArrayD<f32>) -> Vec<f32> {
    a.iter().copied().collect()
}

pub fn max_abs(v: &[f32]) -> f64 {
    v.iter().map(|x| f64::from(x.abs())).fold(0.0, f64::max)
}

pub fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// An oblique header with both transforms, units, a description and calibration.
pub fn oblique_header() -> NiftiHeader {
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

pub fn write_nifti(path: &Path, shape: &[usize], v: Vec<f32>) {
    let mut vol = Volume::new(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap());
    vol.header = oblique_header();
    kiln_io::write_volume(path, &vol).unwrap();
}

// ---- 2-D values --------------------------------------------------------------------------
