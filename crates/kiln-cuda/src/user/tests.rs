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
