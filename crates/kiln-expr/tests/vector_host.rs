//! The vector form of generated element-wise kernels (`<name>_vec`), run on the host: the
//! generated source is compiled by the host C++ compiler with stand-ins for the CUDA
//! built-ins (`__ldcs`/`__stcs` as plain loads and stores, every block's threads run one
//! after another: the kernel has no barrier and no thread reads another's elements), and
//! its outputs must equal the CPU evaluator's bit for bit, at sizes around the vector width
//! and the block's span (tails of every length). This checks the vector kernel's index
//! math, lane handling, tail and which outputs it loads and stores before a GPU runs it.
//! Fails without a C++ compiler when `KILN_REQUIRE_CXX=1`, else skips.
#![allow(clippy::unwrap_used)] // a test: a failed step is a failed test

use kiln_expr::{Arg, ArgSpec, ElementwiseKernel, HostArray, HostArrayMut, KernelParam, Scalar, ScalarType};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const STUB: &str = r#"#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static Dim3 blockIdx, blockDim, gridDim, threadIdx;
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__
#define __launch_bounds__(...)
#define asm(...)
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
template <class T> static inline T __ldcs(const T* p) { return *p; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
static void* load(const char* path, size_t bytes) {
  void* p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  FILE* f = fopen(path, "rb");
  if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "read %s\n", path); exit(2); }
  fclose(f);
  return p;
}
static void save(const char* path, const void* p, size_t bytes) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "write %s\n", path); exit(2); }
  fclose(f);
}
"#;

/// Kernels whose vector form the test runs: (in_params, out_params, operation, name,
/// argument types and shapes where `n` is the loop size: `None` shape = scalar).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [(ScalarType, Shape)],
);

#[derive(Clone, Copy)]
enum Shape {
    Loop,
    One,
    Scalar,
}

use ScalarType::*;
use Shape::*;

const CASES: &[Case] = &[
    (
        "T x, T y, T a",
        "T z",
        "z = a * x + y",
        "axpy",
        &[(F32, Loop), (F32, Loop), (F32, Scalar)],
    ),
    (
        "T x, T y, T a, T b",
        "T z",
        "z = (a * x + y) * x - b",
        "fma4",
        &[(F64, Loop), (F64, Loop), (F64, Scalar), (F64, Scalar)],
    ),
    (
        "T x, T y",
        "T z",
        "z = x + y",
        "bcast",
        &[(F32, Loop), (F32, One)],
    ),
    (
        "T a, T b",
        "bool lt, bool ne",
        "lt = a < b; ne = a != b",
        "cmp",
        &[(F32, Loop), (F32, Loop)],
    ),
    (
        "int8 x, int8 y",
        "int8 z, int32 w",
        "z = x + y; w = x + y",
        "int8_wrap",
        &[(I8, Loop), (I8, Loop)],
    ),
    (
        "T x, T y",
        "T z",
        "z = x; z += y",
        "out_read",
        &[(I32, Loop), (I32, Loop)],
    ),
    (
        "float32 x",
        "float32 y",
        "if (x > 1.0f) { y = x * 2; } else if (x < -1) { y = 0; }",
        "cond_write",
        &[(F32, Loop)],
    ),
    ("", "int64 z", "z = i * 2 + _ind.size()", "iota", &[]),
    (
        "uint16 x, float32 s",
        "float32 y",
        "y = x * s",
        "widen",
        &[(U16, Loop), (F32, Scalar)],
    ),
    (
        "T x, T y, T a",
        "T z, T w",
        "z = a * x + y; w = x / y - conj(a)",
        "caxpy",
        &[(C64, Loop), (C64, Loop), (C64, Scalar)],
    ),
    (
        "T x, T y",
        "T z",
        "z = x * y / (x - y) + abs(x)",
        "cdiv128",
        &[(C128, Loop), (C128, Loop)],
    ),
    (
        "T x, float32 r",
        "T z, float32 m",
        "z = x * r + r - x / r; m = abs(x) + real(x) - imag(x)",
        "cmix",
        &[(C64, Loop), (F32, Loop)],
    ),
    (
        "complex128 z",
        "complex128 e, complex128 q",
        "e = exp(z) + log(z); q = sqrt(z) * sin(z) - cos(z) + pow(z, 0.5)",
        "cfun128",
        &[(C128, Loop)],
    ),
];

/// Sizes around the width (4 for f32, 2 for f64, 16/4 for the mixed ones) and the 512
/// vectors a block moves.
const SIZES: [usize; 8] = [4, 5, 7, 33, 2048, 2049, 2051, 8195];

/// Deterministic element `k` of argument `a` as a value of `t`'s range, as bytes.
fn bytes_of(t: ScalarType, n: usize, a: usize) -> Vec<u8> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (a as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut out = Vec::with_capacity(n * t.size());
    for _ in 0..n {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (s >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let v = u * 6.0 - 3.0;
        match t {
            F32 => out.extend((v as f32).to_le_bytes()),
            F64 => out.extend(v.to_le_bytes()),
            I8 => out.extend(((u * 256.0) as i32 - 128).to_le_bytes()[..1].iter()),
            I32 => out.extend(((v * 1000.0) as i32).to_le_bytes()),
            U16 => out.extend(((u * 65535.0) as u16).to_le_bytes()),
            // the imaginary part from the same stream, shifted
            C64 => out.extend(
                (v as f32)
                    .to_le_bytes()
                    .into_iter()
                    .chain(((1.7 - v) as f32).to_le_bytes()),
            ),
            C128 => out.extend(v.to_le_bytes().into_iter().chain((1.7 - v).to_le_bytes())),
            other => panic!("no generator for {other:?}"),
        }
    }
    out
}

fn scalar_of(t: ScalarType, a: usize) -> (Scalar, String) {
    let v = 0.75 + a as f64 * 0.5;
    match t {
        F32 => (Scalar::F32(v as f32), format!("(float){v:?}")),
        F64 => (Scalar::F64(v), format!("(double){v:?}")),
        // the kernel takes the real, then the imaginary part
        C64 => (Scalar::C64(v as f32, -0.5), format!("(float){v:?}, (float)-0.5")),
        C128 => (Scalar::C128(v, -0.5), format!("(double){v:?}, (double)-0.5")),
        other => panic!("no scalar for {other:?}"),
    }
}

fn spec_shape(s: Shape, n: usize) -> Vec<usize> {
    match s {
        Loop => vec![n],
        One => vec![1],
        Scalar => vec![],
    }
}

#[test]
fn vector_kernels_equal_the_cpu_evaluator_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("vector_kernels_equal_the_cpu_evaluator_on_the_host") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("kiln-expr-vector-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = 0;
    for &(ins, outs, op, name, args) in CASES {
        let k = ElementwiseKernel::new(ins, outs, op, name).unwrap();
        for n in SIZES {
            ran += run_case(&cxx, &dir, &k, args, n);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ran >= CASES.len() * SIZES.len() - 4,
        "only {ran} cases had a vector form"
    );
}

/// Runs one kernel at size `n` on the host through its vector form and compares every
/// output with the CPU evaluator's; 1 when it ran, 0 when the binding has no vector form.
fn run_case(cxx: &str, dir: &Path, k: &ElementwiseKernel, args: &[(ScalarType, Shape)], n: usize) -> usize {
    let name = k.name();
    let specs: Vec<ArgSpec> = args
        .iter()
        .map(|&(t, s)| match s {
            Scalar => ArgSpec::Scalar(t),
            s => ArgSpec::Array {
                dtype: t,
                shape: spec_shape(s, n),
            },
        })
        .collect();
    let size = if args.is_empty() { Some(n) } else { None };
    let b = k.bind(&specs, &[], size).unwrap();
    let Some(plan) = k.vector_plan(&b) else { return 0 };
    assert!(
        plan.fits(|_| Some(0)),
        "{name}: a 64-byte aligned address must fit"
    );
    assert!(!plan.fits(|_| Some(2)), "{name}: a 2-byte offset must not fit");
    let src = k.cuda_source(&b).unwrap();
    assert!(
        src.contains(&plan.symbol),
        "{name}: the source lacks {}",
        plan.symbol
    );

    // inputs, and the CPU evaluator's outputs (each output starts as its own pattern, so a
    // lane the kernel fails to store, or stores when it must not, shows)
    let in_bytes: Vec<Vec<u8>> = args
        .iter()
        .enumerate()
        .map(|(a, &(t, s))| bytes_of(t, spec_shape(s, n).iter().product(), a))
        .collect();
    let scalars: Vec<(Scalar, String)> = args
        .iter()
        .enumerate()
        .map(|(a, &(t, _))| scalar_of_if(t, a))
        .collect();
    let out_types: Vec<ScalarType> = b.param_types[args.len()..].to_vec();
    let mut want: Vec<Vec<u8>> = out_types
        .iter()
        .enumerate()
        .map(|(o, &t)| init_out(t, n, 100 + o))
        .collect();
    let start = want.clone();
    {
        let inputs: Vec<Arg<'_>> = args
            .iter()
            .enumerate()
            .map(|(a, &(t, s))| match s {
                Scalar => Arg::Scalar(scalars[a].0),
                s => Arg::Array(HostArray::contiguous(t, &spec_shape(s, n), &in_bytes[a])),
            })
            .collect();
        let mut outputs: Vec<HostArrayMut<'_>> = want
            .iter_mut()
            .zip(&out_types)
            .map(|(v, &t)| host_mut(t, n, v))
            .collect();
        // the outputs are given, so they set the loop shape (CuPy refuses `size` then)
        k.call(&inputs, &mut outputs, None).unwrap();
    }

    // the driver: every array from a file, the kernel over every block and thread
    let case = dir.join(format!("{name}_{n}"));
    std::fs::create_dir_all(&case).unwrap();
    let mut main = String::from("int main() {\n");
    let mut call = Vec::new();
    let nin = args.len();
    for p in k.kernel_params(&b) {
        match p {
            KernelParam::Array {
                name: pn,
                dtype,
                output,
            } => {
                let idx = param_index(k, &pn);
                let (file, bytes) = if output {
                    let o = idx - nin;
                    std::fs::write(case.join(format!("p{idx}.bin")), &start[o]).unwrap();
                    (format!("p{idx}.bin"), start[o].len())
                } else {
                    std::fs::write(case.join(format!("p{idx}.bin")), &in_bytes[idx]).unwrap();
                    (format!("p{idx}.bin"), in_bytes[idx].len())
                };
                // a complex array is passed as its parts
                let c = if dtype.is_complex() {
                    dtype.part().c_name()
                } else {
                    dtype.c_storage_name()
                };
                let _ = writeln!(
                    main,
                    "  {c}* p{idx} = ({c}*)load(\"{}\", {bytes});",
                    case.join(&file).display()
                );
                call.push(format!("p{idx}"));
            }
            KernelParam::Scalar { name: pn, .. } => call.push(scalars[param_index(k, &pn)].1.clone()),
            // written with its real part above
            KernelParam::ScalarImag { .. } => {}
            KernelParam::Size => call.push(format!("(long long){n}")),
            other => panic!("{name}: unexpected parameter {other:?} in a vector kernel"),
        }
    }
    let _ = writeln!(
        main,
        "  blockDim.x = {}; gridDim.x = {};",
        plan.block(),
        plan.grid(n)
    );
    let _ = writeln!(
        main,
        "  for (unsigned b = 0; b < gridDim.x; ++b) {{ blockIdx.x = b; for (unsigned t = 0; t < blockDim.x; ++t) {{ threadIdx.x = t; {}({}); }} }}",
        plan.symbol,
        call.join(", ")
    );
    for (o, bytes) in start.iter().enumerate() {
        let idx = nin + o;
        let _ = writeln!(
            main,
            "  save(\"{}\", p{idx}, {});",
            case.join(format!("o{idx}.bin")).display(),
            bytes.len()
        );
    }
    main.push_str("  return 0;\n}\n");
    let cpp = case.join("k.cpp");
    std::fs::write(&cpp, format!("{STUB}\n{src}\n{main}")).unwrap();
    let exe = case.join("k");
    let c = Command::new(cxx)
        .args(["-O1", "-std=c++17", "-ffp-contract=off", "-w", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .output()
        .unwrap();
    assert!(
        c.status.success(),
        "{name}: host compile failed:\n{}\n{src}",
        String::from_utf8_lossy(&c.stderr)
    );
    let r = Command::new(&exe).output().unwrap();
    assert!(
        r.status.success(),
        "{name} n={n}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    for (o, w) in want.iter().enumerate() {
        let got = std::fs::read(case.join(format!("o{}.bin", nin + o))).unwrap();
        if &got != w {
            let sz = out_types[o].size();
            let first = (0..n)
                .find(|&e| got[e * sz..(e + 1) * sz] != w[e * sz..(e + 1) * sz])
                .unwrap_or(n);
            panic!("{name} n={n}: output {o} differs from the CPU evaluator's first at element {first} (width {})", plan.width);
        }
    }
    1
}

fn scalar_of_if(t: ScalarType, a: usize) -> (Scalar, String) {
    if matches!(t, F32 | F64 | C64 | C128) {
        scalar_of(t, a)
    } else {
        (Scalar::I32(0), String::new())
    }
}

fn init_out(t: ScalarType, n: usize, seed: usize) -> Vec<u8> {
    match t {
        Bool => (0..n).map(|e| (e % 3 == 0) as u8).collect(),
        I64 => (0..n as i64).flat_map(|e| (e * 7 - 5).to_le_bytes()).collect(),
        _ => bytes_of(t, n, seed),
    }
}

fn host_mut<'a>(t: ScalarType, n: usize, v: &'a mut [u8]) -> HostArrayMut<'a> {
    HostArrayMut {
        dtype: t,
        shape: vec![n],
        bytes: v,
    }
}

fn param_index(k: &ElementwiseKernel, name: &str) -> usize {
    k.in_params()
        .iter()
        .chain(k.out_params())
        .position(|p| p.name == name)
        .unwrap_or_else(|| panic!("no parameter {name}"))
}
