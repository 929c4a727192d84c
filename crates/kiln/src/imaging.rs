//! Imaging ops on the runtime: `filter2d` (single, batched `(N, H, W)`, channels
//! `(H, W, C)`), `filter3d`, and the 2-D transpose, each on the CPU or CUDA.
//!
//! Both backends take the same path: it is resolved by kiln-core ([`resolve_2d`] /
//! [`resolve_3d`], which the CPU backend calls too) and the CUDA launchers are handed the
//! same 1-D factors the CPU uses. The CPU accumulates in
//! f64 (scipy's arithmetic); the GPU in f32 with fma, so results agree within f32
//! rounding (see [`filter_tolerance`]).

use crate::verify::{time_host, Covers, Timing};
use crate::{Engine, Runtime};
/// The path (direct or separable) a 2-D filter takes for a kernel and boundary mode, on
/// either device (for a command's path report).
pub use kiln_core::imaging::path_2d;
/// The path a 3-D filter takes for a kernel and boundary mode, on either device.
pub use kiln_core::imaging::path_3d;
pub use kiln_core::imaging::FilterPath;
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln_core::{Error, Result};
use kiln_cpu::imaging::{filter2d_into, filter3d_into};

/// An absolute error bound between GPU (f32 fma) and CPU (f64, rounded once per pass)
/// results of a filter with `taps` taps per output (k·k or k·k·k, or the sum over passes),
/// `abs_weights` the sum of |weights| (the product of the factors' sums for the separable
/// path) and `max_in` the largest |input| (or |cval|): `8·sqrt(taps)·eps·Σ|w|·max|x|`,
/// plus one ulp of the result scale.
pub fn filter_tolerance(taps: usize, abs_weights: f64, max_in: f64) -> f64 {
    let scale = abs_weights * max_in;
    (8.0 * (taps as f64).sqrt() + 2.0) * f32::EPSILON as f64 * scale + f32::MIN_POSITIVE as f64
}

fn check_len(op: &str, shape: &[usize], src: usize) -> Result<()> {
    let n: usize = shape.iter().product();
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    kiln_core::backend::check_same_len(op, n, src)
}

impl Runtime {
    /// The output of a host-slice op: NaN-poisoned on the CPU (an element the op fails to
    /// write cannot pass), first touched by all cores on CUDA (where the device poisons its
    /// own buffers in tests and the host copy writes every element).
    fn host_output<T: crate::FloatElement>(&self, n: usize) -> Vec<T> {
        match self.engine() {
            Engine::Cpu(_) => vec![T::from_f32(f32::NAN); n],
            Engine::Cuda(_) => kiln_cuda::transfer::host_vec(n),
        }
    }

    /// Correlates a row-major `(h, w)` image with `kernel` under `mode` (scipy.ndimage
    /// semantics; see [`kiln_cpu::imaging::filter2d`]).
    pub fn filter2d(
        &self,
        image: &[f32],
        shape: [usize; 2],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        path: FilterPath,
    ) -> Result<Vec<f32>> {
        self.filter2d_batch(image, [1, shape[0], shape[1]], kernel, mode, path)
    }

    /// Filters a batch `(n, h, w)`: each image on its own.
    pub fn filter2d_batch(
        &self,
        images: &[f32],
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        path: FilterPath,
    ) -> Result<Vec<f32>> {
        check_len("filter2d", &shape, images.len())?;
        let _range = crate::profiler().host_range("filter2d");
        let mut out = self.host_output(images.len());
        match self.engine() {
            Engine::Cpu(_) => filter2d_into(images, shape, kernel, mode, path, &mut out)?,
            Engine::Cuda(_) => self
                .tensor(images, &shape)?
                .filter2d(kernel, mode, path)?
                .to_host_into(&mut out)?,
        }
        Ok(out)
    }

    /// Filters a row-major multi-channel image `(h, w, c)`, each channel on its own. The
    /// channels are split into planes (a transpose of the `(h·w) × c` matrix), filtered as
    /// a batch and interleaved back.
    pub fn filter2d_channels(
        &self,
        image: &[f32],
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        path: FilterPath,
    ) -> Result<Vec<f32>> {
        let [h, w, c] = shape;
        check_len("filter2d", &shape, image.len())?;
        let planes = self.transpose(image, h * w, c)?;
        let filtered = self.filter2d_batch(&planes, [c, h, w], kernel, mode, path)?;
        self.transpose(&filtered, c, h * w)
    }

    /// Correlates a row-major `(d, h, w)` volume with a `k×k×k` kernel under `mode`.
    pub fn filter3d(
        &self,
        volume: &[f32],
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        path: FilterPath,
    ) -> Result<Vec<f32>> {
        check_len("filter3d", &shape, volume.len())?;
        let _range = crate::profiler().host_range("filter3d");
        let mut out = self.host_output(volume.len());
        match self.engine() {
            Engine::Cpu(_) => filter3d_into(volume, shape, kernel, mode, path, &mut out)?,
            Engine::Cuda(_) => self
                .tensor(volume, &shape)?
                .filter3d(kernel, mode, path)?
                .to_host_into(&mut out)?,
        }
        Ok(out)
    }

    /// The `cols × rows` transpose of a row-major `rows × cols` matrix.
    pub fn transpose<T: crate::FloatElement>(&self, x: &[T], rows: usize, cols: usize) -> Result<Vec<T>> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid("transpose", "rows*cols overflows"))?;
        kiln_core::backend::check_same_len("transpose", n, x.len())?;
        let _range = crate::profiler().host_range("transpose");
        let mut out = self.host_output(n);
        match self.engine() {
            Engine::Cpu(_) => kiln_cpu::elementwise::transpose(x, rows, cols, &mut out),
            Engine::Cuda(_) if n == 0 => {}
            Engine::Cuda(_) => self
                .tensor(x, &[rows, cols])?
                .transpose()?
                .to_host_into(&mut out)?,
        }
        Ok(out)
    }
}

/// One row of [`demo_cases`]: an imaging op on the runtime's device, checked against the
/// CPU backend.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoCase {
    /// What ran, e.g. `filter2d cross4 reflect`.
    pub op: String,
    /// The shape, e.g. `1080x1920`.
    pub size: String,
    /// Elements in the output.
    pub elements: usize,
    /// How the host-slice call was timed (host->host through pageable memory on a GPU).
    pub timing: Timing,
    /// Largest |device - CPU| over the tolerance bound (<= 1 passes), of the first call.
    pub err_over_tol: f64,
    /// Whether it passed.
    pub verified: bool,
}

/// The imaging rows `kiln demo` shows: `size` is `quick`, `default` or `full`. Each case
/// runs on `rt` as a host-slice call, timed as [`time_host`] says (the first call alone,
/// then the median of up to `reps` runs), and its first result is compared with the CPU's
/// within [`filter_tolerance`] (transposes must be exact).
pub fn demo_cases(rt: &Runtime, size: &str, reps: usize) -> Result<Vec<DemoCase>> {
    let (h, w, v) = match size {
        "quick" => (270, 480, 32),
        "full" => (2160, 3840, 256),
        _ => (1080, 1920, 128),
    };
    let cpu = Runtime::cpu();
    let covers = Covers::host_call(rt);
    let img = crate::testing::random_f32(h * w, -1.0, 1.0, 7);
    let vol = crate::testing::random_f32(v * v * v, -1.0, 1.0, 8);
    let mut rows = Vec::new();
    let mut push = |op: String, size: String, got: Vec<f32>, want: Vec<f32>, tol: f64, timing: Timing| {
        let err = got
            .iter()
            .zip(&want)
            .map(|(&g, &c)| {
                if g.is_nan() {
                    f64::INFINITY
                } else {
                    (g as f64 - c as f64).abs()
                }
            })
            .fold(0.0, f64::max);
        let r = if tol == 0.0 {
            if err == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            err / tol
        };
        rows.push(DemoCase {
            op,
            size,
            elements: got.len(),
            timing,
            err_over_tol: r,
            verified: r <= 1.0,
        });
    };
    let mode = BoundaryMode::Reflect;
    for name in ["cross4", "gaussian:2", "sobel-x", "box:5"] {
        let k = Kernel2D::preset(name)?;
        let (got, timing) = time_host(reps, covers, || {
            rt.filter2d(&img, [h, w], &k, mode, FilterPath::Auto)
        })?;
        let want = cpu.filter2d(&img, [h, w], &k, mode, FilterPath::Auto)?;
        let sw: f64 = k.weights().iter().map(|x| x.abs()).sum();
        let tol = filter_tolerance(k.size() * k.size(), sw, 1.0);
        push(
            format!("filter2d {name} {mode}"),
            format!("{h}x{w}"),
            got,
            want,
            tol,
            timing,
        );
    }
    for name in ["laplacian", "gaussian:0.5"] {
        let k = Kernel3D::preset(name)?;
        let (got, timing) = time_host(reps, covers, || {
            rt.filter3d(&vol, [v, v, v], &k, mode, FilterPath::Auto)
        })?;
        let want = cpu.filter3d(&vol, [v, v, v], &k, mode, FilterPath::Auto)?;
        let sw: f64 = k.weights().iter().map(|x| x.abs()).sum();
        let tol = filter_tolerance(k.size().pow(3), sw, 1.0);
        push(
            format!("filter3d {name} {mode}"),
            format!("{v}^3"),
            got,
            want,
            tol,
            timing,
        );
    }
    let (got, timing) = time_host(reps, covers, || rt.transpose(&img, h, w))?;
    let want = cpu.transpose(&img, h, w)?;
    push("transpose f32".into(), format!("{h}x{w}"), got, want, 0.0, timing);
    Ok(rows)
}
