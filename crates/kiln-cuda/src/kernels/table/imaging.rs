//! 2-D and 3-D filters, the fused separable passes and the ndimage family (`filter2d.cu`, `separable.cu`, `filter3d.cu`, `ndimage.cu`).

use super::{f2d_smem, B256, B32X8, F2D_K3_P, F2D_P, F3D_P, SEP2D_P};
use crate::kernels::params::decl::*;
use crate::kernels::{FILTER2D, FILTER3D, NDIMAGE, SEPARABLE};

declare_kernels! { FAMILY:
    /// filter2d direct path, 5x5.
    FILTER2D_K5_F32 {
        symbol: "filter2d_k5_f32",
        module: FILTER2D,
        compile_ms: 566,
        computes: "direct 2-D correlation, 5x5 taps unrolled",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(5),
        dynamic_shared_note: "(32+2r)(64+2r) floats, r = 2",
        params: F2D_P,
    }
    /// filter2d direct path, 7x7.
    FILTER2D_K7_F32 {
        symbol: "filter2d_k7_f32",
        module: FILTER2D,
        compile_ms: 726,
        computes: "direct 2-D correlation, 7x7 taps unrolled",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(7),
        dynamic_shared_note: "(32+2r)(64+2r) floats, r = 3",
        params: F2D_P,
    }
    /// filter2d direct path, any odd k up to 31.
    FILTER2D_KN_F32 {
        symbol: "filter2d_kn_f32",
        module: FILTER2D,
        compile_ms: 301,
        computes: "direct 2-D correlation for any odd k up to 31 (weights in the parameter bank)",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(31),
        dynamic_shared_note: "(32+2r)(64+2r) floats; shown at k = 31, the largest",
        params: F2D_P,
    }
    /// One separable pass along the contiguous axis.
    FILTER1D_X_F32 {
        symbol: "filter1d_x_f32",
        module: SEPARABLE,
        compile_ms: 192,
        computes: "one separable 1-D correlation pass along the contiguous axis",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(lines/8), 65535)); a warp per 128-output line segment",
        dynamic_shared_bytes: 8 * (128 + 2 * 8) * 4,
        dynamic_shared_note: "8(128+2r) floats; shown at r = 8 (gaussian sigma 2)",
        params: &[input(F32), output(F32), val(I32), val(I32), W1, val(I32), val(I32), val(F32)],
    }
    /// One separable pass along a strided axis.
    FILTER1D_S_F32 {
        symbol: "filter1d_s_f32",
        module: SEPARABLE,
        compile_ms: 171,
        computes: "one separable 1-D correlation pass along a strided axis",
        block: B32X8,
        grid: "(ceil(A/32), min(ceil(L/32), 65535), min(O, 65535)); 4 outputs a thread",
        dynamic_shared_bytes: (32 + 2 * 8) * 32 * 4,
        dynamic_shared_note: "(32+2r)·32 floats; shown at r = 8 (gaussian sigma 2)",
        params: &[
            input(F32),
            output(F32),
            val(I32),
            val(I64),
            val(I32),
            val(I32),
            val(I64),
            W1,
            val(I32),
            val(I32),
            val(F32),
        ],
    }
    /// filter3d direct path, 3x3x3 (z-marching, register ring).
    FILTER3D_K3_F32 {
        symbol: "filter3d_k3_f32",
        module: FILTER3D,
        compile_ms: 255,
        computes: "direct 3-D correlation, 3x3x3, z-marching with a register ring of planes",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc in 4..=64 for ~4 blocks/SM; 4 rows a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: F3D_P,
    }
    /// filter3d direct path, 7x7x7.
    FILTER3D_K7_F32 {
        symbol: "filter3d_k7_f32",
        module: FILTER3D,
        compile_ms: 734,
        computes: "direct 3-D correlation, 7x7x7, z-marching",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc in 4..=64 for ~4 blocks/SM; 4 rows a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: F3D_P,
    }
    /// filter2d direct 3x3 from registers (no shared memory), 8 rows a thread.
    FILTER2D_K3R8_F32 {
        symbol: "filter2d_k3r8_f32",
        module: FILTER2D,
        compile_ms: 819,
        computes: "direct 2-D correlation, 3x3, from registers (float4 rows, shuffled neighbours), 8 rows a thread, no shared memory",
        block: [32, 4, 1],
        grid: "(ceil(w/128), min(ceil(h/(4*8)), 65535), min(n, 65535)); a warp per 8-row strip, 4 columns a lane",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: F2D_K3_P,
    }
    /// filter2d direct 3x3 from registers, 4 rows a thread.
    FILTER2D_K3R4_F32 {
        symbol: "filter2d_k3r4_f32",
        module: FILTER2D,
        compile_ms: 519,
        computes: "direct 2-D correlation, 3x3, from registers, 4 rows a thread",
        block: [32, 4, 1],
        grid: "(ceil(w/128), min(ceil(h/(4*4)), 65535), min(n, 65535)); a warp per 4-row strip, 4 columns a lane",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: F2D_K3_P,
    }
    /// filter3d direct 5x5x5, z-marching (cp.async ring), 4 rows a thread.
    FILTER3D_ZM5_F32 {
        symbol: "filter3d_zm5_f32",
        module: FILTER3D,
        compile_ms: 1590,
        computes: "direct 3-D correlation, 5x5x5, z-marching cp.async ring, 4 rows a thread",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc for whole waves of resident blocks",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: F3D_P,
    }
    /// Fused separable 2-D, radius 1: pass along H, then along W.
    SEP2D_VH_R1_F32 {
        symbol: "sep2d_vh_r1_f32",
        module: SEPARABLE,
        compile_ms: 215,
        computes: "fused separable 2-D correlation, radius 1: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 2: pass along H, then along W.
    SEP2D_VH_R2_F32 {
        symbol: "sep2d_vh_r2_f32",
        module: SEPARABLE,
        compile_ms: 224,
        computes: "fused separable 2-D correlation, radius 2: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 3: pass along H, then along W.
    SEP2D_VH_R3_F32 {
        symbol: "sep2d_vh_r3_f32",
        module: SEPARABLE,
        compile_ms: 221,
        computes: "fused separable 2-D correlation, radius 3: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 4: pass along H, then along W.
    SEP2D_VH_R4_F32 {
        symbol: "sep2d_vh_r4_f32",
        module: SEPARABLE,
        compile_ms: 232,
        computes: "fused separable 2-D correlation, radius 4: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 5: pass along H, then along W.
    SEP2D_VH_R5_F32 {
        symbol: "sep2d_vh_r5_f32",
        module: SEPARABLE,
        compile_ms: 234,
        computes: "fused separable 2-D correlation, radius 5: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 6: pass along H, then along W.
    SEP2D_VH_R6_F32 {
        symbol: "sep2d_vh_r6_f32",
        module: SEPARABLE,
        compile_ms: 231,
        computes: "fused separable 2-D correlation, radius 6: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 7: pass along H, then along W.
    SEP2D_VH_R7_F32 {
        symbol: "sep2d_vh_r7_f32",
        module: SEPARABLE,
        compile_ms: 251,
        computes: "fused separable 2-D correlation, radius 7: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 8: pass along H, then along W.
    SEP2D_VH_R8_F32 {
        symbol: "sep2d_vh_r8_f32",
        module: SEPARABLE,
        compile_ms: 258,
        computes: "fused separable 2-D correlation, radius 8: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 1: pass along W, then along H.
    SEP2D_HV_R1_F32 {
        symbol: "sep2d_hv_r1_f32",
        module: SEPARABLE,
        compile_ms: 253,
        computes: "fused separable 2-D correlation, radius 1: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 2: pass along W, then along H.
    SEP2D_HV_R2_F32 {
        symbol: "sep2d_hv_r2_f32",
        module: SEPARABLE,
        compile_ms: 276,
        computes: "fused separable 2-D correlation, radius 2: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 3: pass along W, then along H.
    SEP2D_HV_R3_F32 {
        symbol: "sep2d_hv_r3_f32",
        module: SEPARABLE,
        compile_ms: 275,
        computes: "fused separable 2-D correlation, radius 3: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 4: pass along W, then along H.
    SEP2D_HV_R4_F32 {
        symbol: "sep2d_hv_r4_f32",
        module: SEPARABLE,
        compile_ms: 332,
        computes: "fused separable 2-D correlation, radius 4: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 5: pass along W, then along H.
    SEP2D_HV_R5_F32 {
        symbol: "sep2d_hv_r5_f32",
        module: SEPARABLE,
        compile_ms: 380,
        computes: "fused separable 2-D correlation, radius 5: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 6: pass along W, then along H.
    SEP2D_HV_R6_F32 {
        symbol: "sep2d_hv_r6_f32",
        module: SEPARABLE,
        compile_ms: 352,
        computes: "fused separable 2-D correlation, radius 6: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 7: pass along W, then along H.
    SEP2D_HV_R7_F32 {
        symbol: "sep2d_hv_r7_f32",
        module: SEPARABLE,
        compile_ms: 397,
        computes: "fused separable 2-D correlation, radius 7: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    /// Fused separable 2-D, radius 8: pass along W, then along H.
    SEP2D_HV_R8_F32 {
        symbol: "sep2d_hv_r8_f32",
        module: SEPARABLE,
        compile_ms: 365,
        computes: "fused separable 2-D correlation, radius 8: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: SEP2D_P,
    }
    // measured 2026-12-03 with the whole ndimage module (NVRTC 13.0, --ptxas-options=-v,
    // the build machine busy): 7 type instantiations each
    /// ndimage: a 1-D pass of any length and anchor along the contiguous axis.
    ND_PASS_X_ANY {
        symbol: "nd_pass_x_any",
        module: NDIMAGE,
        compile_ms: 1247,
        computes: "ndimage: one 1-D correlation pass of any length and anchor along the contiguous axis (weights from a device buffer; f32, u8 or u16 in and out)",
        block: B32X8,
        grid: "(ceil(w/256), min(ceil(lines/8), 65535)); a warp per 256-output line segment, 8 outputs a lane",
        dynamic_shared_bytes: (8 * (288 + 288 / 8 + 1) + 33) * 4,
        dynamic_shared_note: "8S+k floats, S = (255+k)+(255+k)/8+1 (skewed); shown at k = 33 (gaussian sigma 4)",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I32),
            input(F32),
            val(I32),
            val(I32),
            val(I32),
            val(F32),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage: a 1-D pass of any length and anchor along a strided axis.
    ND_PASS_S_ANY {
        symbol: "nd_pass_s_any",
        module: NDIMAGE,
        compile_ms: 1701,
        computes: "ndimage: one 1-D correlation pass of any length and anchor along a strided axis (weights from a device buffer; f32, u8 or u16 in and out)",
        block: B32X8,
        grid: "(ceil(A/32), min(ceil(L/64), 65535), min(O, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: ((64 + 33 - 1) * 32 + 33) * 4,
        dynamic_shared_note: "(64+k-1)*32+k floats; shown at k = 33 (gaussian sigma 4)",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I64),
            val(I32),
            val(I32),
            val(I64),
            input(F32),
            val(I32),
            val(I32),
            val(I32),
            val(F32),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage: direct correlation with any (kd, kh, kw) kernel and anchors.
    ND_DIRECT_ANY {
        symbol: "nd_direct_any",
        module: NDIMAGE,
        compile_ms: 4952,
        computes: "ndimage: direct correlation with any (kd, kh, kw) kernel and per-axis anchors (weights from a device buffer; f32, u8 or u16 in and out)",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), min(d, 65535)); 4 rows a thread of a 32x32 tile, grid-stride in z",
        dynamic_shared_bytes: (32 + 5 - 1) * (32 + 5 - 1) * 4,
        dynamic_shared_note: "(32+kw-1)(32+kh-1) floats; shown at 5x5",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I32),
            val(I32),
            input(F32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(F32),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage: the element-wise combination of filter terms (sum, squares, sqrt).
    ND_COMBINE_F32 {
        symbol: "nd_combine_f32",
        module: NDIMAGE,
        compile_ms: 85,
        computes: "ndimage: combine filter terms element-wise in f32 (t*t, acc+t, acc+t*t, sqrt)",
        block: B256,
        grid: "min(ceil(n/256), 65535) blocks, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(F32), input(F32), val(I64), val(I32)],
    }
    // compile times: each kernel alone (`ptxas_info -- sm_90 <symbol>`, NVRTC 13.0, the build
    // machine busy); 32-40 registers, no spills
    /// ndimage, exact: a correlate1d pass along the contiguous axis in the CPU's double arithmetic.
    ND_PASS_X_F64 {
        symbol: "nd_pass_x_f64",
        module: NDIMAGE,
        compile_ms: 1232,
        computes: "ndimage, exact: one correlate1d pass along the contiguous axis in double, scipy's symmetric / antisymmetric / general sum in the CPU's order, no fma (f32 or f64 in and out; the CPU's bits)",
        block: B32X8,
        grid: "(ceil(w/256), min(lines, 65535)); one output a thread, grid-stride over lines",
        dynamic_shared_bytes: 33 * 8,
        dynamic_shared_note: "k doubles (the weights); shown at k = 33 (gaussian sigma 4)",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I32),
            input(F64),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(F64),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage, exact: a correlate1d pass along a strided axis in the CPU's double arithmetic.
    ND_PASS_S_F64 {
        symbol: "nd_pass_s_f64",
        module: NDIMAGE,
        compile_ms: 940,
        computes: "ndimage, exact: one correlate1d pass along a strided axis in double, scipy's symmetric / antisymmetric / general sum in the CPU's order, no fma (f32 or f64 in and out; the CPU's bits)",
        block: B32X8,
        grid: "(ceil(A/32), min(ceil(L/8), 65535), min(O, 65535)); one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 33 * 8,
        dynamic_shared_note: "k doubles (the weights); shown at k = 33 (gaussian sigma 4)",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I64),
            val(I32),
            val(I32),
            val(I64),
            input(F64),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(F64),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage, exact: uniform_filter1d's running sum in the CPU's double arithmetic.
    ND_UNIFORM_F64 {
        symbol: "nd_uniform_f64",
        module: NDIMAGE,
        compile_ms: 632,
        computes: "ndimage, exact: one uniform_filter1d pass as scipy's running sum along the line in double, every sum, difference and quotient rounded on its own (f32 or f64 in and out; the CPU's bits)",
        block: B256,
        grid: "min(ceil(A*O/256), 65535) blocks of 256; one line a thread, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I64),
            val(I32),
            val(I32),
            val(I64),
            val(I32),
            val(I32),
            val(I32),
            val(F64),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage, exact: direct correlation in the CPU's double arithmetic.
    ND_DIRECT_F64 {
        symbol: "nd_direct_f64",
        module: NDIMAGE,
        compile_ms: 457,
        computes: "ndimage, exact: direct correlation with any (kd, kh, kw) kernel and anchors in double, 0 + Σ w·x over the taps with |w| > DBL_EPSILON in row-major order, no fma (f32 or f64 in and out; the CPU's bits)",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/8), 65535), min(d, 65535)); one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            val(I32),
            val(I32),
            val(I32),
            input(F64),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(F64),
            val(I32),
            val(I32),
        ],
    }
    /// ndimage: the element-wise combination of filter terms in f64.
    ND_COMBINE_F64 {
        symbol: "nd_combine_f64",
        module: NDIMAGE,
        compile_ms: 110,
        computes: "ndimage: combine filter terms element-wise in f64 (t*t, acc+t, acc+t*t, sqrt), each operation rounded on its own",
        block: B256,
        grid: "min(ceil(n/256), 65535) blocks, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(F64), input(F64), val(I64), val(I32)],
    }
}
