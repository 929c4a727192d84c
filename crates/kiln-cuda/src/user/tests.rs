use super::args::BufferArg;
use super::*;
use kiln_core::backend::{bf16, f16};
use kiln_core::DType;

fn opts(o: &[&str]) -> Vec<String> {
    o.iter().map(|s| s.to_string()).collect()
}

fn p(decl: &str) -> Param {
    signature::parse_params(decl).unwrap().remove(0)
}

fn ok(decl: &str, s: impl Into<Scalar>) -> bool {
    convert(&p(decl), &KernelArg::Scalar(s.into())).is_ok()
}

fn err(decl: &str, s: impl Into<Scalar>) -> String {
    match convert(&p(decl), &KernelArg::Scalar(s.into())) {
        Ok(_) => panic!("{decl}: expected an error"),
        Err(e) => e,
    }
}

#[test]
fn arch_options_are_refused_and_others_pass_through() {
    for bad in [
        "-arch=sm_80",
        "-arch",
        "--gpu-architecture=compute_90",
        "--gpu-architecture",
        "-arch sm_90",
    ] {
        let e = UserSource::new("", &opts(&[bad])).unwrap_err().to_string();
        assert!(e.contains("exact architecture") && e.contains(bad), "{bad}: {e}");
    }
    for rdc in ["-dc", "--device-c", "-rdc=true", "--relocatable-device-code=true"] {
        assert!(UserSource::new("", &opts(&[rdc])).unwrap().relocatable(), "{rdc}");
    }
    assert!(!UserSource::new("", &opts(&["-rdc=false"])).unwrap().relocatable());
    for bad in ["", " ", "DN=4"] {
        assert!(UserSource::new("", &opts(&[bad])).is_err(), "{bad:?}");
    }
    let s = UserSource::new("", &opts(&["-DN=4", "--use_fast_math"])).unwrap();
    let o = s.options();
    assert!(o.contains(&"-DN=4".to_string()) && o.contains(&"--use_fast_math".to_string()));
    assert!(o.contains(&"--std=c++17".to_string()) && o.contains(&"-lineinfo".to_string()));
    // the user's own standard replaces kiln's
    let s = UserSource::new("", &opts(&["-std=c++20"])).unwrap();
    assert!(
        !s.options().contains(&"--std=c++17".to_string()),
        "{:?}",
        s.options()
    );
    assert!(s.options().contains(&"-std=c++20".to_string()));
}

#[test]
fn cache_keys_differ_with_source_and_options_and_are_stable() {
    let src = r#"extern "C" __global__ void k(float* y) { y[0] = 1.0f; }"#;
    let a = UserSource::new(src, &[]).unwrap();
    assert_eq!(a.name(), "user_k");
    let key = a.key("sm_90", (13, 0));
    assert_eq!(key, UserSource::new(src, &[]).unwrap().key("sm_90", (13, 0)));
    let other_src = UserSource::new(&src.replace("1.0f", "2.0f"), &[]).unwrap();
    assert_ne!(key, other_src.key("sm_90", (13, 0)));
    let other_opts = UserSource::new(src, &opts(&["-DN=4"])).unwrap();
    assert_ne!(key, other_opts.key("sm_90", (13, 0)));
    assert_ne!(key, a.key("sm_80", (13, 0)));
    let long = format!("extern \"C\" __global__ void {}(float* y) {{}}", "k".repeat(300));
    assert_eq!(UserSource::new(&long, &[]).unwrap().name().len(), 5 + 64);
    assert_ne!(key, a.key("sm_90", (13, 1)));
    // pinned: the key scheme must not drift silently (a change invalidates every cached
    // user cubin, which is allowed but must be deliberate)
    if std::env::var("KILN_NVRTC_EXTRA").map_or(true, |v| v.trim().is_empty()) {
        let unit = Unit {
            name: "user_k",
            source: src,
            options: &opts(&["-lineinfo", "--std=c++17"]),
        };
        assert_eq!(key, KernelCache::key(&unit, "sm_90", (13, 0)));
    }
}

#[test]
fn scalars_convert_exactly_or_not_at_all() {
    assert!(ok("int n", 5i32));
    assert!(ok("int n", 5u64));
    assert!(ok("unsigned char c", 255i64));
    assert!(err("unsigned char c", 256i32).contains("not exactly representable"));
    assert!(err("unsigned n", -1i32).contains("-1"));
    assert!(err("int n", 2.0f32).contains("pass an integer"));
    assert!(err("long long n", 1.5f64).contains("integer"));
    assert!(ok("float a", 2.5f32));
    assert!(ok("float a", 2.5f64));
    assert!(ok("float a", f64::NAN));
    assert!(err("float a", 0.1f64).contains("not exactly representable"));
    assert!(ok("float a", 16777216i32));
    assert!(err("float a", 16777217i32).contains("16777217"));
    assert!(ok("double a", 0.1f32));
    assert!(ok("double a", 9007199254740992i64));
    assert!(err("double a", 9007199254740993i64).contains("not exactly"));
    assert!(ok("__half h", f16::from_f32(0.5)));
    assert!(ok("__half h", 0.5f32));
    assert!(err("__half h", 0.1f32).contains("__half"));
    assert!(ok("__nv_bfloat16 h", bf16::from_f32(3.0)));
    assert!(ok("bool b", true));
    assert!(err("bool b", 1i32).contains("pass a bool"));
    assert!(err("int n", true).contains("pass a number"));
}

#[test]
fn buffers_match_their_pointer_type() {
    let buf = |dtype| {
        KernelArg::Buffer(BufferArg {
            ptr: 0x1000,
            dtype,
            len: 10,
            _borrow: std::marker::PhantomData,
        })
    };
    assert!(convert(&p("const float* x"), &buf(DType::F32)).is_ok());
    assert!(convert(&p("void* x"), &buf(DType::U16)).is_ok());
    assert!(convert(&p("__half* x"), &buf(DType::F16)).is_ok());
    let e = convert(&p("float* x"), &buf(DType::F64)).err().unwrap();
    assert!(
        e.contains("f32") && e.contains("f64") && e.contains("cast"),
        "{e}"
    );
    let e = convert(&p("int* x"), &buf(DType::F32)).err().unwrap();
    assert!(e.contains("no kiln tensor holds"), "{e}");
    let e = convert(&p("float* x"), &KernelArg::from(1.0f32)).err().unwrap();
    assert!(e.contains("got a scalar f32"), "{e}");
    let e = convert(&p("float x"), &buf(DType::F32)).err().unwrap();
    assert!(e.contains("got a buffer"), "{e}");
}

/// A source that does not compile is `Error::Compile` with NVRTC's log, which names the
/// source file and line (needs only libnvrtc, no GPU).
#[test]
fn a_compile_error_carries_nvrtc_log_with_line_numbers() {
    if !nvrtc::available() {
        kiln_testkit::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "a_compile_error_carries_nvrtc_log_with_line_numbers",
            "libnvrtc cannot be loaded",
        );
        return;
    }
    let src = "extern \"C\" __global__ void broken(float* y) {\n    y[0] = 1.0f\n    undefined_name(y);\n}\n";
    let e = UserSource::new(src, &[]).unwrap().compile("sm_80").unwrap_err();
    match &e {
        Error::Compile { module, arch, log } => {
            assert_eq!(module, "user_broken");
            assert_eq!(arch, "sm_80");
            assert!(
                log.contains("user_broken.cu(3)") || log.contains("user_broken.cu(2)"),
                "{log}"
            );
        }
        other => panic!("expected Error::Compile, got {other:?}"),
    }
    // a missing header says how to give NVRTC an include path
    let with_header = "#include <cuda_fp16.h>\nextern \"C\" __global__ void h(__half* y) {}\n";
    match UserSource::new(with_header, &[]).unwrap().compile("sm_80") {
        Err(Error::Compile { log, .. }) => assert!(log.contains("-I/usr/local/cuda/include"), "{log}"),
        // an NVRTC with the header built in compiles it
        other => assert!(other.is_ok(), "{other:?}"),
    }
    // and a good source compiles for sm_80 with user options
    let good =
        "extern \"C\" __global__ void fill(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = N; }";
    let cubin = UserSource::new(good, &opts(&["-DN=4.0f", "--use_fast_math"]))
        .unwrap()
        .compile("sm_80")
        .unwrap();
    assert!(cubin.windows(4).any(|w| w == b"fill"));
}

fn sized_ok(size: usize, a: KernelArg<'_>) -> Vec<u8> {
    match convert_sized(size, &a) {
        Ok(Value::Bytes(b)) => b,
        Ok(Value::U64(p)) => p.to_le_bytes().to_vec(),
        other => panic!("{size} {a:?}: {other:?}"),
    }
}

fn sized_err(size: usize, a: KernelArg<'_>) -> String {
    match convert_sized(size, &a) {
        Ok(v) => panic!("{size} {a:?}: expected an error, got {v:?}"),
        Err(e) => e,
    }
}

/// Kernels whose parameter types kiln cannot read take arguments of exactly each
/// parameter's size: pointers are 8 bytes, scalars their own size, untyped integers any
/// size they fit, raw bytes (complex values) their length.
#[test]
fn arguments_by_size_pack_exactly_or_are_refused() {
    assert_eq!(
        sized_ok(8, KernelArg::external_untyped(0x1234, 3)),
        0x1234u64.to_le_bytes()
    );
    assert_eq!(
        sized_ok(8, KernelArg::external(0x10, ScalarType::F32, 3)),
        0x10u64.to_le_bytes()
    );
    assert!(sized_err(4, KernelArg::external(0x10, ScalarType::F32, 3)).contains("8-byte pointer"));
    assert_eq!(sized_ok(4, KernelArg::from(7i32)), 7i32.to_le_bytes());
    assert_eq!(sized_ok(4, KernelArg::from(1.5f32)), 1.5f32.to_le_bytes());
    assert_eq!(
        sized_ok(2, KernelArg::from(f16::from_f32(1.0))),
        f16::from_f32(1.0).to_bits().to_le_bytes()
    );
    assert_eq!(sized_ok(1, KernelArg::from(true)), [1]);
    let e = sized_err(4, KernelArg::from(7i64));
    assert!(
        e.contains("i64") && e.contains("8 bytes") && e.contains("np.int32"),
        "{e}"
    );
    assert!(sized_err(4, KernelArg::from(1.0f64)).contains("np.float32"));
    // an untyped integer: any size it fits in, as signed or unsigned
    assert_eq!(sized_ok(4, KernelArg::Int(100)), 100u32.to_le_bytes());
    assert_eq!(sized_ok(4, KernelArg::Int(-1)), (-1i32).to_le_bytes());
    assert_eq!(
        sized_ok(4, KernelArg::Int(u32::MAX.into())),
        u32::MAX.to_le_bytes()
    );
    assert_eq!(sized_ok(8, KernelArg::Int(-5)), (-5i64).to_le_bytes());
    assert_eq!(sized_ok(1, KernelArg::Int(255)), [255]);
    assert!(sized_err(4, KernelArg::Int(1 << 32)).contains("does not fit"));
    assert!(sized_err(1, KernelArg::Int(-129)).contains("does not fit"));
    assert!(sized_err(16, KernelArg::Int(1)).contains("16-byte"));
    // raw bytes: complex64 (8), complex128 (16)
    let c64 = [0u8, 0, 0, 64, 0, 0, 64, 64];
    assert_eq!(sized_ok(8, KernelArg::Bytes(&c64)), c64);
    assert!(sized_err(16, KernelArg::Bytes(&c64)).contains("np.complex128"));
}

#[test]
fn untyped_integers_and_raw_values_against_known_types() {
    let int = |decl: &str, v: i128| convert(&p(decl), &KernelArg::Int(v));
    assert!(matches!(int("unsigned int n", 100), Ok(Value::U32(100))));
    assert!(matches!(int("long long n", -3), Ok(Value::I64(-3))));
    assert!(matches!(
        int("unsigned long long n", u64::MAX.into()),
        Ok(Value::U64(u64::MAX))
    ));
    assert!(matches!(int("float a", 3), Ok(Value::F32(x)) if x == 3.0));
    let e = int("unsigned char c", 300).unwrap_err();
    assert!(
        e.contains("300 is not exactly representable") && !e.contains("i64"),
        "{e}"
    );
    assert!(int("int n", i128::from(u64::MAX) + 1)
        .unwrap_err()
        .contains("no C integer"));
    assert!(int("float* x", 1).unwrap_err().contains("device array"));
    let e = convert(&p("float a"), &KernelArg::Bytes(&[0; 8])).unwrap_err();
    assert!(e.contains("8-byte value"), "{e}");
    let e = convert(&p("float* x"), &KernelArg::external_untyped(0x10, 4)).unwrap_err();
    assert!(e.contains("complex"), "{e}");
    assert!(convert(&p("void* x"), &KernelArg::external_untyped(0x10, 4)).is_ok());
    // a null pointer fills any pointer parameter
    assert!(matches!(
        convert(&p("const float* x"), &KernelArg::external_untyped(0, 0)),
        Ok(Value::U64(0))
    ));
}

fn nvrtc_or_skip(test: &str) -> bool {
    if nvrtc::available() {
        return true;
    }
    kiln_testkit::skip_unless_required("KILN_REQUIRE_NVRTC", test, "libnvrtc cannot be loaded");
    false
}

/// CuPy's `test_cxx_template` and `_test_name_expr_cache` sources: NVRTC instantiates each
/// name expression and reports its mangled symbol, which the cubin holds.
#[test]
fn name_expressions_are_lowered_to_the_cubin_symbols() {
    if !nvrtc_or_skip("name_expressions_are_lowered_to_the_cubin_symbols") {
        return;
    }
    let src = r#"
namespace mylib { enum class Tag { A, B }; }
template<typename T> __global__ void my_sqrt(T* input, int N) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < N) input[x] *= input[x];
}
__global__ void my_func(double* input, int N) {}
template<typename Tv, typename Tp> __global__ void multi_param() { }
template<typename T> __global__ void ptr_param(T* p) { }
template<typename T, int N> __global__ void non_type_param() { }
template<mylib::Tag t> __global__ void enum_param() { }
"#;
    let exprs = opts(&[
        "my_sqrt<int>",
        "my_sqrt<unsigned int>",
        "my_func",
        "multi_param<float, double>",
        "ptr_param<float *>",
        "ptr_param<size_t>",
        "non_type_param<float, (int)3>",
        "enum_param<mylib::Tag::B>",
        "my_sqrt<int>",
    ]);
    let s = UserSource::new(src, &[])
        .unwrap()
        .with_name_expressions(&exprs)
        .unwrap();
    // repeats are dropped; the key covers the expressions, NVRTC's options do not
    assert_eq!(s.name_expressions().len(), 8);
    assert!(!s.options().iter().any(|o| o.contains("kiln-name-expression")));
    let plain = UserSource::new(src, &[]).unwrap();
    assert_ne!(s.key("sm_90", (13, 0)), plain.key("sm_90", (13, 0)));
    assert_eq!(plain.key_unit().options, plain.unit().options);
    let c = s.compile_full("sm_90").unwrap();
    assert_eq!(
        c.lowered,
        [
            "_Z7my_sqrtIiEvPT_i",
            "_Z7my_sqrtIjEvPT_i",
            "_Z7my_funcPdi",
            "_Z11multi_paramIfdEvv",
            "_Z9ptr_paramIPfEvPT_",
            "_Z9ptr_paramImEvPT_",
            "_Z14non_type_paramIfLi3EEvv",
            "_Z10enum_paramILN5mylib3TagE1EEvv",
        ]
    );
    for sym in &c.lowered {
        assert!(c.cubin.windows(sym.len()).any(|w| w == sym.as_bytes()), "{sym}");
    }
    // an expression NVRTC cannot resolve fails the compile with its log
    let bad = UserSource::new(src, &[])
        .unwrap()
        .with_name_expressions(&opts(&["my_sqrt<nonexistent>"]))
        .unwrap();
    match bad.compile_full("sm_90") {
        Err(Error::Compile { log, .. }) => assert!(log.contains("name expression"), "{log}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
    for e in ["", "  ", "k\0"] {
        assert!(
            UserSource::new(src, &[])
                .unwrap()
                .with_name_expressions(&opts(&[e]))
                .is_err(),
            "{e:?}"
        );
    }
}

/// NVRTC's warnings come back with the cubin (CuPy's `compile(log_stream=...)`).
#[test]
fn a_successful_compile_returns_nvrtc_warnings() {
    if !nvrtc_or_skip("a_successful_compile_returns_nvrtc_warnings") {
        return;
    }
    let src = "extern \"C\" __global__ void test_op(const float* x1, float* y, unsigned int N) {\n    int j;\n    y[0] = x1[0] OP 1.0f;\n}\n";
    let c = UserSource::new(src, &opts(&["-DOP=+"]))
        .unwrap()
        .compile_full("sm_80")
        .unwrap();
    assert!(c.log.contains("warning") && c.log.contains("\"j\""), "{}", c.log);
    assert!(c.lowered.is_empty());
}

/// CuPy's `_test_source4`: a kernel launching a kernel needs relocatable device code, which
/// compiles only where it will be linked with the device runtime (the link itself needs a
/// driver: tests/test_raw_gpu.py).
#[test]
fn relocatable_code_compiles_only_with_a_device_runtime_to_link() {
    if !nvrtc_or_skip("relocatable_code_compiles_only_with_a_device_runtime_to_link") {
        return;
    }
    let src = r#"extern "C"{
__global__ void test_kernel_inner(float *arr, int N) {
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N) arr[tid] = 1.0;
}
__global__ void test_kernel(float *arr, int N, int inner_blk) {
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N/inner_blk) test_kernel_inner<<<1, inner_blk>>>(arr+tid*inner_blk, inner_blk);
}
}"#;
    // without -dc NVRTC refuses the launch in device code
    assert!(matches!(
        UserSource::new(src, &[]).unwrap().compile("sm_90"),
        Err(Error::Compile { .. })
    ));
    let s = UserSource::new(src, &opts(&["-dc"])).unwrap();
    let e = s.compile_full("sm_90").unwrap_err().to_string();
    assert!(
        e.contains("libcudadevrt") && e.contains("with_device_runtime"),
        "{e}"
    );
    let missing = std::path::Path::new("/nonexistent/libcudadevrt.a");
    assert!(s
        .clone()
        .with_device_runtime(missing)
        .unwrap_err()
        .to_string()
        .contains("nonexistent"));
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libcudadevrt.a");
    std::fs::write(&lib, b"!<arch>\n").unwrap();
    let linked = s.clone().with_device_runtime(&lib).unwrap();
    assert_ne!(linked.key("sm_90", (13, 0)), s.key("sm_90", (13, 0)));
    assert_eq!(linked.device_link(), std::slice::from_ref(&lib));
    // NVRTC's output is relocatable (ELF type 1), for the driver's linker
    let c = linked.compile_full("sm_90").unwrap();
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([c.cubin[16], c.cubin[17]]), 1);
}
