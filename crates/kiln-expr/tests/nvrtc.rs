//! Every generated kernel of the test corpus compiles with NVRTC (no GPU needed). Fails when
//! NVRTC cannot be loaded, unless `KILN_REQUIRE_NVRTC` is not `1`, where it skips instead.

mod common;

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

/// Compiles `src` for sm_80 and sm_90; `Err` carries NVRTC's log.
fn compile(name: &str, src: &str) -> Result<(), String> {
    for arch in ["sm_80", "sm_90"] {
        let opts = CompileOptions {
            arch: Some(arch),
            name: Some(format!("{name}.cu")),
            ..Default::default()
        };
        compile_ptx_with_opts(src, opts).map_err(|e| format!("{name} for {arch}: {e:?}\n{src}"))?;
    }
    Ok(())
}

/// Whether NVRTC loads here (cudarc panics on first use when the library is missing).
fn nvrtc_loads() -> bool {
    std::panic::catch_unwind(|| {
        let _ = compile_ptx_with_opts("extern \"C\" __global__ void k() {}", CompileOptions::default());
    })
    .is_ok()
}

#[test]
fn every_corpus_kernel_compiles_with_nvrtc() {
    if !nvrtc_loads() {
        kiln_testkit::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "every_corpus_kernel_compiles_with_nvrtc",
            "libnvrtc cannot be loaded (set LD_LIBRARY_PATH to a CUDA lib dir; scripts/fetch-nvrtc.sh)",
        );
        return;
    }
    let mut failures = Vec::new();
    let mut count = 0;
    for k in common::EW {
        let kern = common::ew(k.3);
        for (specs, size) in common::ew_bindings(k.3) {
            let b = kern.bind(&specs, &[], size).unwrap();
            let src = kern.cuda_source(&b).unwrap();
            count += 1;
            if let Err(e) = compile(k.3, &src) {
                failures.push(e);
            }
        }
    }
    for r in common::RED {
        let kern = common::red(r.6);
        for (specs, axis, keep) in common::red_bindings(r.6) {
            let b = kern.bind(&specs, &[], &axis, keep).unwrap();
            let src = kern.cuda_source(&b).unwrap();
            count += 1;
            if let Err(e) = compile(r.6, &src) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} kernels failed to compile:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(count > 40, "only {count} kernels compiled");
}

#[test]
fn a_kernel_with_a_preamble_compiles_verbatim_preamble() {
    if !nvrtc_loads() {
        kiln_testkit::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "a_kernel_with_a_preamble_compiles_verbatim_preamble",
            "libnvrtc cannot be loaded (set LD_LIBRARY_PATH to a CUDA lib dir; scripts/fetch-nvrtc.sh)",
        );
        return;
    }
    let k = kiln_expr::ElementwiseKernel::new("T x", "T y", "y = x * 2", "pre")
        .unwrap()
        .with_preamble("#define KILN_TEST_MACRO 1\n");
    let specs = vec![kiln_expr::ArgSpec::Array {
        dtype: kiln_expr::ScalarType::F32,
        shape: vec![10],
    }];
    let b = k.bind(&specs, &[], None).unwrap();
    let src = k.cuda_source(&b).unwrap();
    assert!(src.contains("KILN_TEST_MACRO"));
    compile("pre", &src).unwrap();
}

#[test]
fn loops_of_2_pow_31_elements_or_more_use_64_bit_indices() {
    use kiln_expr::{ArgSpec, KernelParam, ScalarType};
    let k = common::ew("add");
    let small = vec![
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![1000],
        },
        ArgSpec::Scalar(ScalarType::F32),
    ];
    let b = k.bind(&small, &[], None).unwrap();
    assert!(k.cuda_source(&b).unwrap().contains("for (unsigned int _i"));
    assert_eq!(
        k.kernel_params(&b),
        vec![
            KernelParam::Array {
                name: "x".into(),
                dtype: ScalarType::F32,
                output: false
            },
            KernelParam::Scalar {
                name: "y".into(),
                dtype: ScalarType::F32
            },
            KernelParam::Array {
                name: "z".into(),
                dtype: ScalarType::F32,
                output: true
            },
            KernelParam::Size,
        ]
    );
    let big = vec![
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![1 << 31],
        },
        ArgSpec::Scalar(ScalarType::F32),
    ];
    let b = k.bind(&big, &[], None).unwrap();
    let src = k.cuda_source(&b).unwrap();
    assert!(src.contains("for (unsigned long long _i"), "{src}");
    // A broadcast operand is addressed through its strides, passed after the extents.
    let bc = vec![
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![3, 1],
        },
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![4],
        },
    ];
    let b = k.bind(&bc, &[], None).unwrap();
    let ps = k.kernel_params(&b);
    assert_eq!(
        &ps[4..],
        &[
            KernelParam::Extent { axis: 0 },
            KernelParam::Extent { axis: 1 },
            KernelParam::Stride {
                name: "x".into(),
                axis: 0
            },
            KernelParam::Stride {
                name: "x".into(),
                axis: 1
            },
            KernelParam::Stride {
                name: "y".into(),
                axis: 0
            },
            KernelParam::Stride {
                name: "y".into(),
                axis: 1
            }
        ]
    );
}

#[test]
fn bodies_outside_the_c_subset_are_emitted_verbatim_for_the_gpu() {
    use kiln_expr::{Arg, ArgSpec, ElementwiseKernel, HostArray, ScalarType};
    let k = ElementwiseKernel::new(
        "T x, raw T w, int32 n",
        "T y",
        "T s = 0; for (int j = 0; j < n; ++j) { s += w[j] * sq(x); } y = s;",
        "loop_pre",
    )
    .unwrap()
    .with_preamble("template <class T> __device__ T sq(T v) { return v * v; }");
    let specs = vec![
        ArgSpec::Array {
            dtype: ScalarType::F64,
            shape: vec![10],
        },
        ArgSpec::Array {
            dtype: ScalarType::F64,
            shape: vec![3],
        },
        ArgSpec::Scalar(ScalarType::I32),
    ];
    let b = k.bind(&specs, &[], None).unwrap();
    let src = k.cuda_source(&b).unwrap();
    assert!(
        src.contains("typedef double T;") && src.contains("for (int j = 0;"),
        "{src}"
    );
    // The CPU refuses it, naming the construct.
    let x = [1f64; 10];
    let e = k
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[10], &x)),
                Arg::Array(HostArray::from_slice(&[10], &x)),
                Arg::Scalar(kiln_expr::Scalar::I32(3)),
            ],
            None,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("preamble"), "{e}");
    let k2 = ElementwiseKernel::new(
        "T x",
        "T y",
        "y = 0; for (int j = 0; j < 3; ++j) y += x",
        "loop_only",
    )
    .unwrap();
    let e = k2
        .call_alloc(&[Arg::Array(HostArray::from_slice(&[10], &x))], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`for` loops are not supported"), "{e}");
    if !nvrtc_loads() {
        kiln_testkit::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "bodies_outside_the_c_subset_are_emitted_verbatim_for_the_gpu",
            "libnvrtc cannot be loaded (set LD_LIBRARY_PATH to a CUDA lib dir; scripts/fetch-nvrtc.sh)",
        );
        return;
    }
    compile("loop_pre", &src).unwrap();
    let b2 = k2.bind(&specs[..1], &[], None).unwrap();
    compile("loop_only", &k2.cuda_source(&b2).unwrap()).unwrap();
}
