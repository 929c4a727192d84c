//! The launchers of `kernels/interp.cu`: scipy.ndimage's resampling (zoom / shift,
//! affine_transform, map_coordinates) and spline prefilter on the device, each output the
//! value kiln-core's `kiln_core::imaging::interp::{zoom_shift_into,
//! geometric_transform_into, spline_filter1d}` computes, to the bit (the kernels run the
//! CPU loops' f64 operations in order, without contraction).
//!
//! Resampling runs one thread per output point, its input coordinates computed from its
//! index (or read from the coordinates, uploaded as f64): nothing is allocated besides the
//! output (the caller's), the coordinates and a 4-byte status word, so zoom, shift and
//! affine_transform resample a volume within its input and output sizes. The output is
//! written in one launch, not in slabs: the whole input and the whole output are resident.
//! The prefilter runs in place on f64 coefficients, one launch per pole.
//!
//! A tap that the mode cannot fold back into the input is an error on the CPU (a coordinate
//! too large for scipy's integer arithmetic). Where the coordinates of every output point are
//! provably below 2^40 in magnitude (the common case: a bound from the output box's corners),
//! no tap can fail and the launch returns without waiting; otherwise the launcher waits for
//! the status word and returns the CPU's error if a tap failed.

use crate::kernels::{Kernel, ScalarType};
use crate::launch::{Arg, KernelStruct};
use crate::op::Op;
use crate::storage::CudaData;
use crate::CudaBackend;
use cudarc::driver::{DeviceRepr, LaunchConfig};
use kiln_core::imaging::interp::{filter_poles, InterpMode};
use kiln_core::{Error, Result};

/// Where each output point samples the input.
#[derive(Clone, Copy, Debug)]
pub enum Resample<'a> {
    /// scipy's `NI_ZoomShift`: output index `k` along axis `a` samples the input at
    /// `(k + shift[a]) * zoom[a]` (`((k + shift[a]) + 0.5) * zoom[a] - 0.5` with
    /// `grid_mode`), either factor left out when `None`; the output has the input's rank.
    ZoomShift {
        /// Per-axis zoom.
        zoom: Option<&'a [f64]>,
        /// Per-axis shift.
        shift: Option<&'a [f64]>,
        /// scipy's `grid_mode`.
        grid_mode: bool,
    },
    /// scipy's affine path: `input_coordinate = matrix · output_index + offset`, `matrix`
    /// row-major of `input rank × output rank`.
    Affine {
        /// The matrix, row-major.
        matrix: &'a [f64],
        /// The offset, one per input axis.
        offset: &'a [f64],
    },
    /// scipy's `map_coordinates`: the input coordinates of every output point, `input
    /// rank` rows of the output's size, row-major (scipy's `coordinates` as f64).
    Coordinates(&'a [f64]),
}

/// One resampling: shapes, spline order, mode, and where the output samples the input.
#[derive(Clone, Copy, Debug)]
pub struct InterpSpec<'a> {
    /// The input's shape (already prepadded by `nprepad` per side where scipy pads).
    pub ishape: &'a [usize],
    /// The output's shape.
    pub oshape: &'a [usize],
    /// The spline order, 0..=5 (the input holds the prefiltered coefficients for order > 1
    /// where scipy prefilters).
    pub order: usize,
    /// The boundary mode.
    pub mode: InterpMode,
    /// The value outside the input for the constant modes.
    pub cval: f64,
    /// Samples of prepadding per side (scipy's `npad` for `nearest` / `grid-constant`).
    pub nprepad: usize,
    /// Where each output point samples the input.
    pub map: Resample<'a>,
}

/// interp.cu's `InterpArgs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct InterpArgs {
    ishape: [i64; 3],
    istride: [i64; 3],
    oshape: [i64; 3],
    mat: [f64; 9],
    off: [f64; 3],
    cval: f64,
    nprepad: f64,
    n: i64,
    irank: i32,
    orank: i32,
    order: i32,
    mode: i32,
    in_f64: i32,
    out_f64: i32,
    has_zoom: i32,
    has_shift: i32,
    grid_mode: i32,
    pad: i32,
}

// SAFETY: a plain `#[repr(C)]` struct of i64, f64 and i32 fields in the order and with the
// layout of interp.cu's `InterpArgs` (its size is checked against the declaration below).
#[allow(unsafe_code)]
unsafe impl DeviceRepr for InterpArgs {}
impl KernelStruct for InterpArgs {
    const C_NAME: &'static str = "InterpArgs";
}
const _: () = assert!(std::mem::size_of::<InterpArgs>() == 232);

/// Threads per block.
const THREADS: u32 = 256;
/// Resident blocks per SM the grid is capped at (the kernel grid-strides).
const BLOCKS_PER_SM: u64 = 32;
/// Coordinates below this magnitude cannot make a tap fail (every quotient and product of
/// the boundary arithmetic is exact there for axes below 2^31).
const SAFE_COORD: f64 = (1u64 << 40) as f64;
/// The longest input axis the launcher accepts (the boundary arithmetic's exactness).
const MAX_AXIS: usize = i32::MAX as usize;

fn mode_code(m: InterpMode) -> i32 {
    match m {
        InterpMode::Nearest => 0,
        InterpMode::Wrap => 1,
        InterpMode::Reflect => 2,
        InterpMode::Mirror => 3,
        InterpMode::Constant => 4,
        InterpMode::GridWrap => 5,
        InterpMode::GridConstant => 6,
    }
}

/// The operation's name, as the CPU's errors give it.
fn op_of(map: &Resample<'_>) -> &'static str {
    match map {
        Resample::ZoomShift { .. } => "zoom_shift",
        Resample::Affine { .. } | Resample::Coordinates(_) => "geometric_transform",
    }
}

/// A float pointer of `d` and whether it holds f64; `None` for another dtype.
fn float_ptr(d: &CudaData) -> Option<(u64, bool, usize)> {
    match d {
        CudaData::F32(b) => Some((b.device_ptr(), false, b.len())),
        CudaData::F64(b) => Some((b.device_ptr(), true, b.len())),
        _ => None,
    }
}

fn numel(op: &str, what: &str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::invalid(op, format!("the {what} shape {shape:?} overflows")))
}

/// The resampling kernels by coordinate kind (zoom / shift, affine, coordinates), spline
/// order and input type (f32, f64).
const RESAMPLE_KERNELS: [[[Kernel; 2]; 6]; 3] = [
    [
        [Kernel::INTERP_ZOOM_SHIFT_O0_F32, Kernel::INTERP_ZOOM_SHIFT_O0_F64],
        [Kernel::INTERP_ZOOM_SHIFT_O1_F32, Kernel::INTERP_ZOOM_SHIFT_O1_F64],
        [Kernel::INTERP_ZOOM_SHIFT_O2_F32, Kernel::INTERP_ZOOM_SHIFT_O2_F64],
        [Kernel::INTERP_ZOOM_SHIFT_O3_F32, Kernel::INTERP_ZOOM_SHIFT_O3_F64],
        [Kernel::INTERP_ZOOM_SHIFT_O4_F32, Kernel::INTERP_ZOOM_SHIFT_O4_F64],
        [Kernel::INTERP_ZOOM_SHIFT_O5_F32, Kernel::INTERP_ZOOM_SHIFT_O5_F64],
    ],
    [
        [Kernel::INTERP_AFFINE_O0_F32, Kernel::INTERP_AFFINE_O0_F64],
        [Kernel::INTERP_AFFINE_O1_F32, Kernel::INTERP_AFFINE_O1_F64],
        [Kernel::INTERP_AFFINE_O2_F32, Kernel::INTERP_AFFINE_O2_F64],
        [Kernel::INTERP_AFFINE_O3_F32, Kernel::INTERP_AFFINE_O3_F64],
        [Kernel::INTERP_AFFINE_O4_F32, Kernel::INTERP_AFFINE_O4_F64],
        [Kernel::INTERP_AFFINE_O5_F32, Kernel::INTERP_AFFINE_O5_F64],
    ],
    [
        [Kernel::INTERP_COORDS_O0_F32, Kernel::INTERP_COORDS_O0_F64],
        [Kernel::INTERP_COORDS_O1_F32, Kernel::INTERP_COORDS_O1_F64],
        [Kernel::INTERP_COORDS_O2_F32, Kernel::INTERP_COORDS_O2_F64],
        [Kernel::INTERP_COORDS_O3_F32, Kernel::INTERP_COORDS_O3_F64],
        [Kernel::INTERP_COORDS_O4_F32, Kernel::INTERP_COORDS_O4_F64],
        [Kernel::INTERP_COORDS_O5_F32, Kernel::INTERP_COORDS_O5_F64],
    ],
];

/// The kernel that resamples with `map` at spline `order` (0..=5, checked by `build`) from
/// f64 (else f32) input.
fn resample_kernel(map: &Resample<'_>, order: usize, in_f64: bool) -> Kernel {
    let kind = match map {
        Resample::ZoomShift { .. } => 0,
        Resample::Affine { .. } => 1,
        Resample::Coordinates(_) => 2,
    };
    RESAMPLE_KERNELS[kind][order.min(5)][usize::from(in_f64)]
}

/// Checks `spec` against the buffers and builds the kernel's arguments; also returns
/// whether every coordinate is provably small enough that no tap can fail.
fn build(
    spec: &InterpSpec<'_>,
    in_f64: bool,
    in_len: usize,
    out_f64: bool,
    out_len: usize,
) -> Result<(InterpArgs, bool)> {
    let op = op_of(&spec.map);
    let (irank, orank) = (spec.ishape.len(), spec.oshape.len());
    if spec.order > 5 {
        return Err(Error::invalid(
            op,
            format!("spline order {} not supported (0..=5)", spec.order),
        ));
    }
    if !(1..=3).contains(&irank) || !(1..=3).contains(&orank) {
        return Err(Error::invalid(
            op,
            format!(
                "the GPU resamples inputs and outputs of rank 1 to 3 (input rank {irank}, output rank {orank}); run higher ranks on the CPU"
            ),
        ));
    }
    let n_in = numel(op, "input", spec.ishape)?;
    let n_out = numel(op, "output", spec.oshape)?;
    for (what, want, got, shape) in [
        ("input", n_in, in_len, spec.ishape),
        ("output", n_out, out_len, spec.oshape),
    ] {
        if want != got {
            return Err(Error::ShapeMismatch {
                op: format!("{op} {what} length"),
                expected: shape.to_vec(),
                got: vec![got],
            });
        }
    }
    if n_out > 0 && n_in == 0 {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {:?})", spec.ishape),
        ));
    }
    if spec.ishape.iter().any(|&d| d > MAX_AXIS) {
        return Err(Error::invalid(
            op,
            format!(
                "input shape {:?}: the GPU resamples axes below 2^31 samples",
                spec.ishape
            ),
        ));
    }
    let mut a = InterpArgs {
        irank: irank as i32,
        orank: orank as i32,
        order: spec.order as i32,
        mode: mode_code(spec.mode),
        in_f64: i32::from(in_f64),
        out_f64: i32::from(out_f64),
        cval: spec.cval,
        nprepad: spec.nprepad as f64,
        n: n_out as i64,
        ..InterpArgs::default()
    };
    let mut stride = 1i64;
    for ax in (0..irank).rev() {
        a.ishape[ax] = spec.ishape[ax] as i64;
        a.istride[ax] = stride;
        stride = stride.saturating_mul(spec.ishape[ax] as i64);
    }
    for (ax, &d) in spec.oshape.iter().enumerate() {
        a.oshape[ax] = d as i64;
    }
    let pad = spec.nprepad as f64;
    let last = |d: usize| d.saturating_sub(1) as f64;
    // every axis's bound below SAFE_COORD (a NaN bound compares false: the checked path)
    let mut safe = true;
    match spec.map {
        Resample::ZoomShift {
            zoom,
            shift,
            grid_mode,
        } => {
            if orank != irank
                || zoom.is_some_and(|z| z.len() != irank)
                || shift.is_some_and(|s| s.len() != irank)
            {
                return Err(Error::invalid(
                    op,
                    format!(
                        "output shape {:?}, zoom and shift must all have the input's rank {irank}",
                        spec.oshape
                    ),
                ));
            }
            a.has_zoom = i32::from(zoom.is_some());
            a.has_shift = i32::from(shift.is_some());
            a.grid_mode = i32::from(grid_mode);
            for ax in 0..irank {
                let s = shift.map_or(0.0, |s| s[ax]);
                let z = zoom.map_or(1.0, |z| z[ax]);
                if let Some(z) = zoom {
                    a.mat[ax] = z[ax];
                }
                if let Some(s) = shift {
                    a.off[ax] = s[ax];
                }
                let b = (last(spec.oshape[ax]) + s.abs() + 1.0) * z.abs() + 1.0 + pad;
                safe &= b < SAFE_COORD;
            }
        }
        Resample::Affine { matrix, offset } => {
            if matrix.len() != irank * orank || offset.len() != irank {
                return Err(Error::invalid(
                    op,
                    format!(
                        "an affine matrix of {} values and an offset of {} for input rank {irank} and output rank {orank}",
                        matrix.len(),
                        offset.len()
                    ),
                ));
            }
            a.mat[..matrix.len()].copy_from_slice(matrix);
            a.off[..irank].copy_from_slice(offset);
            for hh in 0..irank {
                let mut b = offset[hh].abs() + pad + 1.0;
                for ll in 0..orank {
                    b += matrix[hh * orank + ll].abs() * (last(spec.oshape[ll]) + 1.0);
                }
                safe &= b < SAFE_COORD;
            }
        }
        Resample::Coordinates(c) => {
            if c.len() != irank * n_out {
                return Err(Error::ShapeMismatch {
                    op: format!("{op} coordinates length"),
                    expected: std::iter::once(irank)
                        .chain(spec.oshape.iter().copied())
                        .collect(),
                    got: vec![c.len()],
                });
            }
            safe &= c.iter().all(|v| v.abs() + pad + 1.0 < SAFE_COORD);
        }
    }
    Ok((a, safe))
}

impl InterpArgs {
    /// The struct's bytes as the device reads them (little-endian fields in order, no
    /// padding: 232 bytes).
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(std::mem::size_of::<Self>());
        for x in self.ishape.iter().chain(&self.istride).chain(&self.oshape) {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in self
            .mat
            .iter()
            .chain(&self.off)
            .chain([&self.cval, &self.nprepad])
        {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.n.to_le_bytes());
        for x in [
            self.irank,
            self.orank,
            self.order,
            self.mode,
            self.in_f64,
            self.out_f64,
            self.has_zoom,
            self.has_shift,
            self.grid_mode,
            self.pad,
        ] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }
}

/// The bytes of the `InterpArgs` the launcher passes for `spec` with f64 (else f32) input
/// and output, the symbol of the kernel it launches, and whether it returns without
/// reading the status word: for the host-emulation test (`tests/host_emulation.rs`), which
/// runs that kernel of `kernels/interp.cu` on these arguments.
#[doc(hidden)]
pub fn interp_args_bytes(
    spec: &InterpSpec<'_>,
    in_f64: bool,
    out_f64: bool,
) -> Result<(Vec<u8>, &'static str, bool)> {
    let op = op_of(&spec.map);
    let n_in = numel(op, "input", spec.ishape)?;
    let n_out = numel(op, "output", spec.oshape)?;
    let (a, safe) = build(spec, in_f64, n_in, out_f64, n_out)?;
    Ok((
        a.bytes(),
        resample_kernel(&spec.map, spec.order, in_f64).symbol(),
        safe,
    ))
}

/// Resamples `src` (f32 or f64, row-major `spec.ishape`) into `dst` (f32 or f64,
/// row-major `spec.oshape`, a distinct buffer) on the current stream: every output the
/// value kiln-core's `zoom_shift_into` / `geometric_transform_into` with
/// `Mapping::Affine` and `Store::Float` computes, to the bit. Returns without waiting,
/// unless some coordinate may be too large to be mapped into the input (see the module
/// docs); then it waits and returns the CPU's error if one was.
///
/// Launch: the resampling kernel of the coordinate kind, spline order and input type
/// (`interp_{zoom_shift,affine,coords}_o{0..5}_{f32,f64}`), 256-thread blocks, one thread
/// an output point, at most 32 blocks an SM (grid-stride).
pub struct Interp<'a> {
    /// The input, f32 or f64.
    pub src: &'a CudaData,
    /// The output, f32 or f64, distinct from the input.
    pub dst: &'a CudaData,
    /// Shapes, order, mode and where each output point samples the input.
    pub spec: &'a InterpSpec<'a>,
}

impl Op for Interp<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Interp { src, dst, spec } = self;
        let op = op_of(&spec.map);
        let bad = || Error::invalid(op, "the GPU resamples f32 or f64 data into f32 or f64 outputs");
        let (sp, in_f64, in_len) = float_ptr(src).ok_or_else(bad)?;
        let (dp, out_f64, out_len) = float_ptr(dst).ok_or_else(bad)?;
        let (args, safe) = build(spec, in_f64, in_len, out_f64, out_len)?;
        if out_len == 0 {
            return Ok(());
        }
        if sp == dp {
            return Err(Error::invalid(op, "the output must not be the input"));
        }
        let status = cuda.alloc::<i32>(1)?;
        cuda.memset_zero(&status)?;
        let sms = u64::from(cuda.info().desc.multiprocessors.max(1));
        let blocks = (out_len as u64)
            .div_ceil(u64::from(THREADS))
            .min(sms * BLOCKS_PER_SM)
            .clamp(1, i32::MAX as u64) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: `build` checked src against ishape, dst against oshape and the coordinates
        // against input rank × n; the kernel reads input offsets that the taps keep inside
        // ishape (an unmappable tap reads offset 0 and is reported) and writes output indices
        // below n = dst's length once each.
        let elem = |f64: bool| if f64 { ScalarType::F64 } else { ScalarType::F32 };
        let (sa, da, st) = (
            Arg::ptr(sp, elem(in_f64)),
            Arg::ptr(dp, elem(out_f64)),
            Arg::buf(&status),
        );
        let coords = match spec.map {
            Resample::Coordinates(c) => Some(cuda.upload_slice(c)?),
            _ => None,
        };
        let k = resample_kernel(&spec.map, spec.order, in_f64);
        let mut launch_args = vec![sa, da, st];
        if let Some(c) = &coords {
            launch_args.push(Arg::buf(c));
        }
        launch_args.push(Arg::by_value(&args));
        cuda.launch(k, cfg, &launch_args)?;
        if safe {
            return Ok(());
        }
        let mut flag = [0i32];
        cuda.download_into(&status, &mut flag, cuda.stream(), op)?;
        if flag[0] != 0 {
            return Err(Error::invalid(
                op,
                "a coordinate is too large to be mapped into the input",
            ));
        }
        Ok(())
    }
}

/// interp.cu's `SplineArgs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SplineArgs {
    len: i64,
    inner: i64,
    lines: i64,
    z: f64,
    zpow: f64,
    gain: f64,
    init: i32,
    apply_gain: i32,
}

// SAFETY: a plain `#[repr(C)]` struct of i64, f64 and i32 fields in the order and with the
// layout of interp.cu's `SplineArgs` (its size is checked against the declaration below).
#[allow(unsafe_code)]
unsafe impl DeviceRepr for SplineArgs {}
impl KernelStruct for SplineArgs {
    const C_NAME: &'static str = "SplineArgs";
}
const _: () = assert!(std::mem::size_of::<SplineArgs>() == 56);

/// The prefilter's boundary initialisation of `mode` as interp.cu codes it (kiln-core's
/// `spline.rs` `init_of`): 0 mirror, 1 periodic, 2 half-sample.
fn init_code(mode: InterpMode) -> i32 {
    match mode {
        InterpMode::GridConstant | InterpMode::Constant | InterpMode::Mirror | InterpMode::Wrap => 0,
        InterpMode::GridWrap => 1,
        InterpMode::Nearest | InterpMode::Reflect => 2,
    }
}

/// The launches of a prefilter: one `SplineArgs` per pole (the gain on the first), none
/// where kiln-core leaves the data as it is (orders 0 and 1, an axis of one sample, no data).
fn spline_passes(
    shape: &[usize],
    axis: usize,
    order: usize,
    mode: InterpMode,
    len: usize,
) -> Result<Vec<SplineArgs>> {
    let op = "spline_filter1d";
    if order > 5 {
        return Err(Error::invalid(
            op,
            format!("spline order {order} not supported (0..=5)"),
        ));
    }
    if axis >= shape.len() {
        return Err(Error::invalid(
            op,
            format!("axis {axis} of a {}-d array", shape.len()),
        ));
    }
    let size = numel(op, "data", shape)?;
    if size != len {
        return Err(Error::ShapeMismatch {
            op: format!("{op} data length"),
            expected: shape.to_vec(),
            got: vec![len],
        });
    }
    let n = shape[axis];
    let poles = filter_poles(order);
    if n <= 1 || poles.is_empty() || size == 0 {
        return Ok(Vec::new());
    }
    // the CPU's gain, in its order
    let mut gain = 1.0;
    for &z in poles {
        gain *= (1.0 - z) * (1.0 - 1.0 / z);
    }
    let init = init_code(mode);
    let inner: usize = shape[axis + 1..].iter().product();
    Ok(poles
        .iter()
        .enumerate()
        .map(|(i, &z)| SplineArgs {
            len: n as i64,
            inner: inner as i64,
            lines: (size / n) as i64,
            z,
            // Rust's powf, as the CPU computes the powers (the device's pow may differ)
            zpow: match init {
                0 => z.powf((n - 1) as f64),
                2 => z.powf(n as f64),
                _ => 0.0,
            },
            gain,
            init,
            apply_gain: i32::from(i == 0),
        })
        .collect())
}

impl SplineArgs {
    /// The struct's bytes as the device reads them (little-endian fields in order, no
    /// padding: 56 bytes).
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(std::mem::size_of::<Self>());
        for x in [self.len, self.inner, self.lines] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in [self.z, self.zpow, self.gain] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in [self.init, self.apply_gain] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }
}

/// The bytes of each `SplineArgs` the prefilter's launcher passes (one launch each, in
/// order) for f64 data of `shape` along `axis`: for the host-emulation test.
#[doc(hidden)]
pub fn spline_args_bytes(
    shape: &[usize],
    axis: usize,
    order: usize,
    mode: InterpMode,
) -> Result<Vec<Vec<u8>>> {
    let len = numel("spline_filter1d", "data", shape)?;
    Ok(spline_passes(shape, axis, order, mode, len)?
        .iter()
        .map(SplineArgs::bytes)
        .collect())
}

/// scipy's `spline_filter1d` (order 2–5) of `data` (f64, row-major `shape`) along `axis`,
/// in place on the current stream: every value the one kiln-core's `spline_filter1d`
/// computes, to the bit. Orders 0 and 1 and axes of one sample leave the data as it is.
///
/// Launch: `interp_spline_pole_f64` once per pole, 256-thread blocks, one thread a line,
/// at most 32 blocks an SM (grid-stride).
pub struct SplineFilter1d<'a> {
    /// The data, f64, filtered in place.
    pub data: &'a CudaData,
    /// The data's shape.
    pub shape: &'a [usize],
    /// The axis filtered along.
    pub axis: usize,
    /// The spline order, 0..=5.
    pub order: usize,
    /// The boundary mode.
    pub mode: InterpMode,
}

impl Op for SplineFilter1d<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let SplineFilter1d {
            data,
            shape,
            axis,
            order,
            mode,
        } = self;
        let CudaData::F64(b) = data else {
            return Err(Error::invalid(
                "spline_filter1d",
                "the GPU prefilters f64 data (cast first)",
            ));
        };
        let passes = spline_passes(shape, axis, order, mode, b.len())?;
        let sms = u64::from(cuda.info().desc.multiprocessors.max(1));
        for p in &passes {
            let blocks = (p.lines as u64)
                .div_ceil(u64::from(THREADS))
                .min(sms * BLOCKS_PER_SM)
                .clamp(1, i32::MAX as u64) as u32;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // Sizes: `spline_passes` checked b against shape; each thread walks its line's
            // len samples at stride inner inside b.
            cuda.launch(
                Kernel::INTERP_SPLINE_POLE_F64,
                cfg,
                &[Arg::buf(b), Arg::by_value(p)],
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(ishape: &'a [usize], oshape: &'a [usize], map: Resample<'a>) -> InterpSpec<'a> {
        InterpSpec {
            ishape,
            oshape,
            order: 3,
            mode: InterpMode::Mirror,
            cval: 0.0,
            nprepad: 0,
            map,
        }
    }

    #[test]
    fn the_struct_is_the_declared_one() {
        assert_eq!(
            InterpArgs::default().bytes().len(),
            std::mem::size_of::<InterpArgs>()
        );
        assert_eq!(
            SplineArgs::default().bytes().len(),
            std::mem::size_of::<SplineArgs>()
        );
        assert_eq!(
            Kernel::INTERP_SPLINE_POLE_F64.params()[1],
            crate::kernels::KernelParam::Struct {
                name: SplineArgs::C_NAME,
                bytes: std::mem::size_of::<SplineArgs>() as u32
            }
        );
        for k in RESAMPLE_KERNELS.iter().flatten().flatten().copied() {
            assert_eq!(
                *k.params().last().expect("the struct parameter"),
                crate::kernels::KernelParam::Struct {
                    name: InterpArgs::C_NAME,
                    bytes: std::mem::size_of::<InterpArgs>() as u32
                }
            );
        }
    }

    #[test]
    fn each_kind_order_and_input_type_has_its_kernel() {
        let c = [0.0];
        let maps = [
            (
                Resample::ZoomShift {
                    zoom: None,
                    shift: None,
                    grid_mode: false,
                },
                "zoom_shift",
            ),
            (
                Resample::Affine {
                    matrix: &c,
                    offset: &c,
                },
                "affine",
            ),
            (Resample::Coordinates(&c), "coords"),
        ];
        let mut seen = std::collections::HashSet::new();
        for (map, kind) in maps {
            for order in 0..=5 {
                for (in_f64, dt) in [(false, "f32"), (true, "f64")] {
                    let k = resample_kernel(&map, order, in_f64);
                    assert_eq!(k.symbol(), format!("interp_{kind}_o{order}_{dt}"));
                    let elem = if in_f64 { ScalarType::F64 } else { ScalarType::F32 };
                    assert_eq!(
                        k.params()[0],
                        crate::kernels::KernelParam::Pointer {
                            elem: Some(elem),
                            access: crate::kernels::Access::In
                        }
                    );
                    assert!(seen.insert(k.symbol()));
                }
            }
        }
    }

    #[test]
    fn shapes_ranks_and_bounds_are_checked() {
        let zs = Resample::ZoomShift {
            zoom: Some(&[0.5, 2.0]),
            shift: None,
            grid_mode: true,
        };
        let (a, safe) = build(&spec(&[4, 5], &[8, 3], zs), false, 20, true, 24).expect("valid");
        assert!(safe);
        assert_eq!(
            (a.istride[0], a.istride[1], a.n, a.has_zoom, a.has_shift),
            (5, 1, 24, 1, 0)
        );
        assert!(build(&spec(&[4, 5], &[8, 3], zs), false, 19, true, 24).is_err());
        assert!(build(&spec(&[4, 5], &[8, 3, 1], zs), false, 20, true, 24).is_err());
        let rank4 = [1usize, 1, 1, 1];
        let e = build(&spec(&rank4, &rank4, zs), false, 1, true, 1).expect_err("rank 4");
        assert!(format!("{e}").contains("rank 1 to 3"), "{e}");
        let m = [1.0, 0.0, 0.0, 1e300];
        let aff = Resample::Affine {
            matrix: &m,
            offset: &[0.0, 0.0],
        };
        let (_, safe) = build(&spec(&[4, 5], &[2, 2], aff), true, 20, false, 4).expect("valid");
        assert!(!safe, "a huge matrix entry must take the checked path");
        let mut s = spec(&[4, 5], &[2, 2], aff);
        s.order = 6;
        assert!(build(&s, true, 20, false, 4).is_err());
    }
}
