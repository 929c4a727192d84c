//! scipy.ndimage's interpolation, bitwise the CPU's (`interp.cu`). The compile times are one
//! NVRTC 13.0 compile of each kernel alone for sm_90 on the 2-core development machine under
//! a load average of about 9 (so high rather than low).

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

/// `(const void* src, void* dst, int* status, InterpArgs a)`.
const INTERP_P: &[KernelParam] = &[INPUT_ANY, OUTPUT_ANY, inout(I32), INTERP_ARGS];

/// `(const void* src, void* dst, int* status, const double* coords, InterpArgs a)`.
const INTERP_COORDS_P: &[KernelParam] = &[INPUT_ANY, OUTPUT_ANY, inout(I32), input(F64), INTERP_ARGS];

const INTERP_GRID: &str = "min(ceil(points / 256), 32 blocks per SM) blocks, grid-stride over output points";

declare_kernels! { FAMILY:
    /// zoom / shift: each output point's input coordinates from its index, per axis.
    INTERP_ZOOM_SHIFT_ANY {
        symbol: "interp_zoom_shift_any",
        module: INTERP,
        compile_ms: 3150,
        computes: "scipy.ndimage zoom / shift: order 0-5 B-spline interpolation at (k + shift) * zoom per axis, every mode, the CPU's f64 operations in order (f32 or f64 in and out, ranks 1-3)",
        block: B256,
        grid: INTERP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: INTERP_P,
    }
    /// affine_transform: each output point's input coordinates as matrix · index + offset.
    INTERP_AFFINE_ANY {
        symbol: "interp_affine_any",
        module: INTERP,
        compile_ms: 3510,
        computes: "scipy.ndimage affine_transform: order 0-5 B-spline interpolation at matrix * index + offset, every mode, the CPU's f64 operations in order (f32 or f64 in and out, ranks 1-3)",
        block: B256,
        grid: INTERP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: INTERP_P,
    }
    /// map_coordinates: each output point's input coordinates read from an f64 array.
    INTERP_COORDS_ANY {
        symbol: "interp_coords_any",
        module: INTERP,
        compile_ms: 2860,
        computes: "scipy.ndimage map_coordinates: order 0-5 B-spline interpolation at given f64 coordinates, every mode, the CPU's f64 operations in order (f32 or f64 in and out, ranks 1-3)",
        block: B256,
        grid: INTERP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: INTERP_COORDS_P,
    }
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
