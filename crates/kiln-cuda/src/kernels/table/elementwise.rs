//! Element-wise maps, axpy, transpose, casts and the fault-injection kernel (`map.cu`, `transpose.cu`, `cast.cu`, `fault.cu`).

use super::{AXPY_B16_P, AXPY_F32_P, B256, B32X8, EW_GRID, MAP_B16_P, MAP_F32_P, MAP_GRID};
use crate::kernels::params::decl::*;
use crate::kernels::{CAST, FAULT, MAP, TRANSPOSE};

declare_kernels! { FAMILY:
    /// `MapOp` on f32 storage (op code and two parameters as arguments).
    MAP_F32 {
        symbol: "map_f32",
        module: MAP,
        compile_ms: 183,
        computes: "y = op(x) for a MapOp (unary function, scale-shift, clamp; op code and two parameters as arguments) on f32",
        block: B256,
        grid: MAP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MAP_F32_P,
    }
    /// `MapOp` on f16 storage, f32 arithmetic.
    MAP_F16 {
        symbol: "map_f16",
        module: MAP,
        compile_ms: 236,
        computes: "y = op(x) on f16 storage, f32 arithmetic, rounded once to f16",
        block: B256,
        grid: MAP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MAP_B16_P,
    }
    /// `MapOp` on bf16 storage, f32 arithmetic.
    MAP_BF16 {
        symbol: "map_bf16",
        module: MAP,
        compile_ms: 313,
        computes: "y = op(x) on bf16 storage, f32 arithmetic, rounded once to bf16",
        block: B256,
        grid: MAP_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MAP_B16_P,
    }
    /// `y = a*x + y` on f32.
    AXPY_F32 {
        symbol: "axpy_f32",
        module: MAP,
        compile_ms: 58,
        computes: "y = a*x + y on f32 (one fma)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: AXPY_F32_P,
    }
    /// `y = a*x + y` on f16 storage.
    AXPY_F16 {
        symbol: "axpy_f16",
        module: MAP,
        compile_ms: 66,
        computes: "y = a*x + y on f16 storage (f32 fma, rounded once)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: AXPY_B16_P,
    }
    /// `y = a*x + y` on bf16 storage.
    AXPY_BF16 {
        symbol: "axpy_bf16",
        module: MAP,
        compile_ms: 85,
        computes: "y = a*x + y on bf16 storage (f32 fma, rounded once)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: AXPY_B16_P,
    }
    /// 2-D transpose of 32-bit elements (f32), 64x64 tiles.
    TRANSPOSE_B32 {
        symbol: "transpose_b32",
        module: TRANSPOSE,
        compile_ms: 91,
        computes: "2-D transpose of 32-bit elements through a padded 64x64 shared tile, 16 loads in flight a thread",
        block: B32X8,
        grid: "(ceil(cols/64), min(ceil(rows/64), 65535)), grid-stride over tiles; 16 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(F32), output(F32), val(I32), val(I32)],
    }
    /// 2-D transpose of 16-bit elements (f16, bf16) as 32-bit words; rows and cols even.
    TRANSPOSE_B16 {
        symbol: "transpose_b16",
        module: TRANSPOSE,
        compile_ms: 76,
        computes: "2-D transpose of 16-bit elements (f16, bf16; rows and cols even) moved as 32-bit words: 2x2 blocks permuted in registers, 64x64 tiles",
        block: B32X8,
        grid: "(ceil(cols/64), min(ceil(rows/64), 65535)), grid-stride over tiles; 8 words a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), output(U32), val(I32), val(I32)],
    }
    /// 2-D transpose of 16-bit elements one at a time (odd rows or cols).
    TRANSPOSE_H_B16 {
        symbol: "transpose_h_b16",
        module: TRANSPOSE,
        compile_ms: 91,
        computes: "2-D transpose of 16-bit elements one at a time through a padded 32x32 shared tile (odd rows or cols)",
        block: B32X8,
        grid: "(ceil(cols/32), min(ceil(rows/32), 65535)), grid-stride over tiles; 4 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U16), output(U16), val(I32), val(I32)],
    }
    /// Conversion between any two storage types (codes as arguments).
    CAST_ANY {
        symbol: "cast_any",
        module: CAST,
        compile_ms: 308,
        computes: "element type conversion between any two of f32, f64, f16, bf16, u8, u16 (codes as arguments; kiln_core::storage::cast_f64's rules)",
        block: B256,
        grid: "min(ceil(n / 256), one full wave of resident blocks), grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[INPUT_ANY, OUTPUT_ANY, val(U64), val(I32), val(I32)],
    }
    /// Fault injection: a store through an invalid address (sticky error 700).
    FAULT_ILLEGAL_ADDRESS {
        symbol: "fault_illegal_address",
        module: FAULT,
        compile_ms: 47,
        computes: "fault injection: a store through an invalid address (sticky CUDA_ERROR_ILLEGAL_ADDRESS), launched only on request",
        block: [32, 1, 1],
        grid: "1 block (one warp)",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(F32)],
    }
}
