//! scipy.ndimage's interpolation, bitwise the CPU's (`interp.cu`). The compile times are one
//! NVRTC 13.0 compile of each kernel alone for sm_90 on the 2-core development machine under
//! a load average of about 9 (so high rather than low); the resampling kernels' are
//! `examples/ptxas_info.rs`'s time for each (higher orders unroll more taps: 0.5 s at order
//! 0 to 8 s at order 5).

use super::B256;
use crate::kernels::params::decl::*;
use crate::kernels::{KernelParam, INTERP};

/// interp.cu's `InterpArgs`: shapes and strides (9 `long long`), the matrix or zooms (9
/// doubles), the offset or shifts (3), cval, the prepadding, the point count, 10 ints.
pub(crate) const INTERP_ARGS: KernelParam = KernelParam::Struct {
    name: "InterpArgs",
    bytes: 9 * 8 + 9 * 8 + 3 * 8 + 8 + 8 + 8 + 10 * 4,
};

/// interp.cu's `SplineArgs`: 3 `long long`, 3 doubles, 2 ints.
pub(crate) const SPLINE_ARGS: KernelParam = KernelParam::Struct {
    name: "SplineArgs",
    bytes: 3 * 8 + 3 * 8 + 2 * 4,
};

/// `(const float* src, void* dst, int* status, InterpArgs a)`.
const INTERP_F32_P: &[KernelParam] = &[input(F32), OUTPUT_ANY, inout(I32), INTERP_ARGS];
/// `(const double* src, void* dst, int* status, InterpArgs a)`.
const INTERP_F64_P: &[KernelParam] = &[input(F64), OUTPUT_ANY, inout(I32), INTERP_ARGS];
/// `(const float* src, void* dst, int* status, const double* coords, InterpArgs a)`.
const INTERP_COORDS_F32_P: &[KernelParam] = &[input(F32), OUTPUT_ANY, inout(I32), input(F64), INTERP_ARGS];
/// `(const double* src, void* dst, int* status, const double* coords, InterpArgs a)`.
const INTERP_COORDS_F64_P: &[KernelParam] = &[input(F64), OUTPUT_ANY, inout(I32), input(F64), INTERP_ARGS];

const INTERP_GRID: &str = "min(ceil(points / 256), 32 blocks per SM) blocks, grid-stride over output points";

/// What a resampling kernel computes, by coordinate kind.
macro_rules! interp_computes {
    (zoom_shift, $order:literal, $dt:literal) => {
        concat!("scipy.ndimage zoom / shift: order ", $order, " B-spline interpolation at (k + shift) * zoom per axis, every mode, the CPU's f64 operations in order (", $dt, " in, f32 or f64 out, ranks 1-3)")
    };
    (affine, $order:literal, $dt:literal) => {
        concat!("scipy.ndimage affine_transform: order ", $order, " B-spline interpolation at matrix * index + offset, every mode, the CPU's f64 operations in order (", $dt, " in, f32 or f64 out, ranks 1-3)")
    };
    (coords, $order:literal, $dt:literal) => {
        concat!("scipy.ndimage map_coordinates: order ", $order, " B-spline interpolation at given f64 coordinates, every mode, the CPU's f64 operations in order (", $dt, " in, f32 or f64 out, ranks 1-3)")
    };
}

/// The parameters of a resampling kernel, by coordinate kind and input type.
macro_rules! interp_params {
    (coords, "f32") => {
        INTERP_COORDS_F32_P
    };
    (coords, "f64") => {
        INTERP_COORDS_F64_P
    };
    ($kind:ident, "f32") => {
        INTERP_F32_P
    };
    ($kind:ident, "f64") => {
        INTERP_F64_P
    };
}

/// The family: one resampling kernel per coordinate kind (zoom / shift, affine_transform,
/// map_coordinates), spline order and input type, so each compiles its order's loops with
/// compile-time bounds (`IM_KERNEL` in interp.cu); then the prefilter.
macro_rules! interp_family {
    ($($name:ident $sym:literal $kind:ident $order:tt $dt:tt $ms:literal;)*) => {
        declare_kernels! { FAMILY:
            $(
                #[doc = concat!("`", $sym, "`: ", interp_computes!($kind, $order, $dt), ".")]
                $name {
                    symbol: $sym,
                    module: INTERP,
                    compile_ms: $ms,
                    computes: interp_computes!($kind, $order, $dt),
                    block: B256,
                    grid: INTERP_GRID,
                    dynamic_shared_bytes: 0,
                    dynamic_shared_note: "",
                    params: interp_params!($kind, $dt),
                }
            )*
            /// spline_filter1d: one pole's causal and anticausal pass, one thread per line.
            INTERP_SPLINE_POLE_F64 {
                symbol: "interp_spline_pole_f64",
                module: INTERP,
                compile_ms: 440,
                computes: "scipy.ndimage spline_filter1d: one pole's recursive pass (gain on the first) along an axis of an f64 array in place, scipy's boundary initialisation per mode, the CPU's f64 operations in order",
                block: B256,
                grid: "min(ceil(lines / 256), 32 blocks per SM) blocks, grid-stride over lines",
                dynamic_shared_bytes: 0,
                dynamic_shared_note: "",
                params: &[inout(F64), SPLINE_ARGS],
            }
        }
    };
}

interp_family! {
    INTERP_ZOOM_SHIFT_O0_F32 "interp_zoom_shift_o0_f32" zoom_shift 0 "f32" 545;
    INTERP_ZOOM_SHIFT_O0_F64 "interp_zoom_shift_o0_f64" zoom_shift 0 "f64" 524;
    INTERP_ZOOM_SHIFT_O1_F32 "interp_zoom_shift_o1_f32" zoom_shift 1 "f32" 615;
    INTERP_ZOOM_SHIFT_O1_F64 "interp_zoom_shift_o1_f64" zoom_shift 1 "f64" 655;
    INTERP_ZOOM_SHIFT_O2_F32 "interp_zoom_shift_o2_f32" zoom_shift 2 "f32" 1033;
    INTERP_ZOOM_SHIFT_O2_F64 "interp_zoom_shift_o2_f64" zoom_shift 2 "f64" 1716;
    INTERP_ZOOM_SHIFT_O3_F32 "interp_zoom_shift_o3_f32" zoom_shift 3 "f32" 2789;
    INTERP_ZOOM_SHIFT_O3_F64 "interp_zoom_shift_o3_f64" zoom_shift 3 "f64" 2616;
    INTERP_ZOOM_SHIFT_O4_F32 "interp_zoom_shift_o4_f32" zoom_shift 4 "f32" 3813;
    INTERP_ZOOM_SHIFT_O4_F64 "interp_zoom_shift_o4_f64" zoom_shift 4 "f64" 4488;
    INTERP_ZOOM_SHIFT_O5_F32 "interp_zoom_shift_o5_f32" zoom_shift 5 "f32" 5212;
    INTERP_ZOOM_SHIFT_O5_F64 "interp_zoom_shift_o5_f64" zoom_shift 5 "f64" 7589;
    INTERP_AFFINE_O0_F32 "interp_affine_o0_f32" affine 0 "f32" 1570;
    INTERP_AFFINE_O0_F64 "interp_affine_o0_f64" affine 0 "f64" 1132;
    INTERP_AFFINE_O1_F32 "interp_affine_o1_f32" affine 1 "f32" 1863;
    INTERP_AFFINE_O1_F64 "interp_affine_o1_f64" affine 1 "f64" 1907;
    INTERP_AFFINE_O2_F32 "interp_affine_o2_f32" affine 2 "f32" 2556;
    INTERP_AFFINE_O2_F64 "interp_affine_o2_f64" affine 2 "f64" 2367;
    INTERP_AFFINE_O3_F32 "interp_affine_o3_f32" affine 3 "f32" 3539;
    INTERP_AFFINE_O3_F64 "interp_affine_o3_f64" affine 3 "f64" 3562;
    INTERP_AFFINE_O4_F32 "interp_affine_o4_f32" affine 4 "f32" 3331;
    INTERP_AFFINE_O4_F64 "interp_affine_o4_f64" affine 4 "f64" 2964;
    INTERP_AFFINE_O5_F32 "interp_affine_o5_f32" affine 5 "f32" 7350;
    INTERP_AFFINE_O5_F64 "interp_affine_o5_f64" affine 5 "f64" 8002;
    INTERP_COORDS_O0_F32 "interp_coords_o0_f32" coords 0 "f32" 967;
    INTERP_COORDS_O0_F64 "interp_coords_o0_f64" coords 0 "f64" 1001;
    INTERP_COORDS_O1_F32 "interp_coords_o1_f32" coords 1 "f32" 1291;
    INTERP_COORDS_O1_F64 "interp_coords_o1_f64" coords 1 "f64" 1228;
    INTERP_COORDS_O2_F32 "interp_coords_o2_f32" coords 2 "f32" 1739;
    INTERP_COORDS_O2_F64 "interp_coords_o2_f64" coords 2 "f64" 1555;
    INTERP_COORDS_O3_F32 "interp_coords_o3_f32" coords 3 "f32" 2685;
    INTERP_COORDS_O3_F64 "interp_coords_o3_f64" coords 3 "f64" 2747;
    INTERP_COORDS_O4_F32 "interp_coords_o4_f32" coords 4 "f32" 4169;
    INTERP_COORDS_O4_F64 "interp_coords_o4_f64" coords 4 "f64" 3959;
    INTERP_COORDS_O5_F32 "interp_coords_o5_f32" coords 5 "f32" 6941;
    INTERP_COORDS_O5_F64 "interp_coords_o5_f64" coords 5 "f64" 7005;
}
