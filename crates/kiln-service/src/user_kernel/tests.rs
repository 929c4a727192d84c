//! Unit tests of `user_kernel` validation (`super`): each form's params, inputs, limits and
//! the errors that name what is wrong.
use super::*;
use crate::task::{validate as validate_job, Task, Validated};
use kiln::expr::{OwnedArray, ScalarType};
use serde_json::json;
use std::path::PathBuf;

/// No blobs.
struct NoBlobs;
impl BlobLookup for NoBlobs {
    fn blob(&self, _: &str) -> Option<(PathBuf, String)> {
        None
    }
}

fn job(params: Value, inputs: Value) -> Result<Validated, ApiError> {
    validate_job(KIND, &params, &inputs, 1 << 20, false, true, &NoBlobs)
}

fn job_max(params: Value, inputs: Value, max: u64) -> Result<Validated, ApiError> {
    validate_job(KIND, &params, &inputs, max, false, true, &NoBlobs)
}

/// The error's message, which must be a 400 `invalid_params` naming every needle.
fn refused(r: Result<Validated, ApiError>, needles: &[&str]) -> String {
    let e = match r {
        Err(e) => e,
        Ok(v) => match v.task {
            Task::UserKernel { kernel, .. } => panic!("accepted: {kernel:?}"),
            t => panic!("accepted: {t:?}"),
        },
    };
    assert_eq!(e.parts().1, "invalid_params", "{e}");
    let m = e.to_string();
    for n in needles {
        assert!(m.contains(n), "wanted `{n}` in: {m}");
    }
    m
}

fn add() -> Value {
    json!({"type": "elementwise", "in_params": "float32 x, float32 y", "out_params": "float32 z",
        "operation": "z = x + y", "name": "add"})
}

fn xy(x: Value, y: Value) -> Value {
    json!({"x": x, "y": y})
}

fn data(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    json!({"shape": shape, "data": (0..n).map(|i| i as f32 + 0.5).collect::<Vec<_>>()})
}

#[test]
fn an_elementwise_kernel_is_checked_counted_and_stored() {
    let v = job(add(), xy(data(&[2, 3]), data(&[3]))).unwrap();
    // inputs 6 + 3, output 6
    assert_eq!(v.elements, 15);
    assert!(!v.needs_gpu);
    assert!(v.batch_key.starts_with("solo:"), "{}", v.batch_key);
    let Task::UserKernel { kernel, args } = &v.task else {
        panic!("{:?}", v.task)
    };
    assert!(matches!(kernel, UserKernel::Elementwise { name, .. } if name == "add"));
    assert_eq!(args.len(), 2);
    let back: Task = serde_json::from_str(&serde_json::to_string(&v.task).unwrap()).unwrap();
    assert_eq!(back, v.task);
    // scalars: a JSON number (NumPy's int64/float64), or typed; converted to the parameter
    let axpy = json!({"type": "elementwise", "in_params": "T x, T y, float32 a", "out_params": "T z",
        "operation": "z = a * x + y"});
    job(axpy.clone(), json!({"x": data(&[4]), "y": data(&[4]), "a": 2.5})).unwrap();
    job(
        axpy.clone(),
        json!({"x": data(&[4]), "y": data(&[4]), "a": {"scalar": 3, "dtype": "int16"}}),
    )
    .unwrap();
    let v = job(axpy, json!({"x": data(&[4]), "y": data(&[4]), "a": 1e300})).unwrap();
    assert!(
        matches!(&v.task, Task::UserKernel { args, .. } if matches!(&args[2], UserArg::Scalar { dtype: None, .. }))
    );
    // a preamble makes it GPU-only
    let pre = json!({"type": "elementwise", "in_params": "float32 x", "out_params": "float32 z",
        "operation": "z = twice(x)", "preamble": "__device__ float twice(float v) { return 2 * v; }"});
    assert!(job(pre, json!({"x": data(&[4])})).unwrap().needs_gpu);
    let mut blank = add();
    blank["preamble"] = json!("  ");
    assert!(!job(blank, xy(data(&[3]), data(&[3]))).unwrap().needs_gpu);
}

#[test]
fn bad_expressions_name_the_construct() {
    let body = |op: &str| {
        let mut p = add();
        p["operation"] = json!(op);
        job(p, xy(data(&[3]), data(&[3])))
    };
    refused(body("z = x +"), &["params.operation"]);
    refused(body("z = frobnicate(x)"), &["frobnicate"]);
    refused(
        body("for (int k = 0; k < 3; k++) z += x;"),
        &["params.operation", "for"],
    );
    refused(body("z = x + w"), &["w"]);
    let mut p = add();
    p["in_params"] = json!("float32 x, y");
    refused(
        job(p, xy(data(&[3]), data(&[3]))),
        &["params:", "`y`", "[raw] TYPE NAME"],
    );
    let mut p = add();
    p["in_params"] = json!("float32 x, unsigned flaot y");
    refused(job(p, xy(data(&[3]), data(&[3]))), &["params:", "flaot"]);
    let mut p = add();
    p["name"] = json!("not a name");
    refused(job(p, xy(data(&[3]), data(&[3]))), &["params:", "kernel name"]);
    let mut p = add();
    p["turbo"] = json!(true);
    refused(job(p, xy(data(&[3]), data(&[3]))), &["unknown field `turbo`"]);
    refused(
        job(json!({"type": "fused"}), json!({})),
        &["unknown variant `fused`"],
    );
    refused(job(json!({"in_params": "float32 x"}), json!({})), &["type"]);
}

#[test]
fn inputs_are_matched_to_parameters_and_shapes_to_each_other() {
    refused(
        job(add(), json!({"x": data(&[3])})),
        &["inputs.y is missing", "x, y"],
    );
    refused(
        job(add(), json!({"x": data(&[3]), "y": data(&[3]), "w": data(&[3])})),
        &["inputs.w", "no input parameter `w`", "x, y"],
    );
    refused(
        job(add(), json!({"x": data(&[3]), "y": data(&[3]), "z": data(&[3])})),
        &["inputs.z", "output parameter"],
    );
    refused(
        job(add(), xy(data(&[3]), data(&[4]))),
        &["broadcast", "[3]", "[4]"],
    );
    refused(
        job(add(), xy(data(&[3]), json!("abc"))),
        &["inputs.y", "a string"],
    );
    refused(
        job(add(), xy(data(&[3]), json!({"shape": [2], "data": [1.0]}))),
        &["inputs.y", "holds 2 elements"],
    );
    refused(
        job(add(), xy(data(&[3]), json!({"scalar": 300, "dtype": "uint8"}))),
        &["inputs.y", "300", "uint8"],
    );
    refused(
        job(add(), xy(data(&[3]), json!({"scalar": 2.5, "dtype": "int32"}))),
        &["inputs.y", "whole number"],
    );
    refused(job(add(), json!([1, 2])), &["inputs must be an object"]);
    // a raw parameter needs an array
    let raw = json!({"type": "elementwise", "in_params": "raw float32 x", "out_params": "float32 y",
        "operation": "y = x[i]", "size": 3});
    refused(job(raw.clone(), json!({"x": 1.0})), &["raw parameter `x`"]);
    job(raw, json!({"x": data(&[3])})).unwrap();
}

#[test]
fn the_element_limit_counts_inputs_outputs_and_the_broadcast_loop() {
    // 8 + 8 in, 8 out
    refused(
        job_max(add(), xy(data(&[8]), data(&[8])), 20),
        &["24 elements", "limits.max_elements"],
    );
    job_max(add(), xy(data(&[8]), data(&[8])), 24).unwrap();
    // (300, 1) x (1, 300): 600 in, but a loop of 90,000
    refused(
        job_max(add(), xy(data(&[300, 1]), data(&[1, 300])), 10_000),
        &["broadcast shape [300, 300]", "limits.max_elements"],
    );
    let sum = json!({"type": "reduction", "in_params": "float32 x, float32 y", "out_params": "float32 s",
        "map_expr": "x * y", "reduce_expr": "a + b", "post_map_expr": "s = a"});
    refused(
        job_max(sum, xy(data(&[300, 1]), data(&[1, 300])), 10_000),
        &["broadcast shape [300, 300]"],
    );
    let mut p = add();
    p["in_params"] = json!("raw float32 x, raw float32 y");
    p["operation"] = json!("z = x[0] + y[0]");
    p["size"] = json!(1_000_000);
    refused(
        job_max(p, xy(data(&[1]), data(&[1])), 1000),
        &["params.size = 1000000"],
    );
}

#[test]
fn reductions_are_checked_with_their_axes() {
    let l2 = json!({"type": "reduction", "in_params": "T x", "out_params": "T y", "map_expr": "x * x",
        "reduce_expr": "a + b", "post_map_expr": "y = sqrt(a)", "identity": 0, "name": "l2", "axis": 1});
    let v = job(l2.clone(), json!({"x": data(&[4, 5])})).unwrap();
    // 20 in, 4 out
    assert_eq!(v.elements, 24);
    let Task::UserKernel { kernel, .. } = &v.task else {
        panic!()
    };
    assert!(
        matches!(kernel, UserKernel::Reduction { axis: Some(a), identity: Some(i), .. } if a == &[1] && i == "0")
    );
    let mut bad = l2.clone();
    bad["axis"] = json!(2);
    refused(
        job(bad, json!({"x": data(&[4, 5])})),
        &["axis 2 is out of bounds"],
    );
    let mut bad = l2.clone();
    bad["axis"] = json!([0, 0]);
    refused(job(bad, json!({"x": data(&[4, 5])})), &["duplicate"]);
    let mut bad = l2.clone();
    bad["reduce_expr"] = json!("a +* b");
    refused(job(bad, json!({"x": data(&[4, 5])})), &["reduce_expr"]);
    let mut bad = l2;
    bad["post_map_expr"] = json!("q = a");
    refused(job(bad, json!({"x": data(&[4, 5])})), &["q"]);
}

const SAXPY: &str = r#"extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"#;

fn saxpy(args: Value) -> Value {
    json!({"type": "raw", "source": SAXPY, "name": "saxpy", "grid": [4], "block": [256], "args": args})
}

#[test]
fn a_raw_kernel_is_checked_against_its_parameter_list() {
    let args = json!([{"input": "x"}, {"output": "y", "shape": [1000]}, {"scalar": 2.0}, {"scalar": 1000}]);
    let v = job(saxpy(args), json!({"x": data(&[1000])})).unwrap();
    assert!(v.needs_gpu);
    assert_eq!(v.elements, 2000);
    let Task::UserKernel { kernel, args } = &v.task else {
        panic!()
    };
    assert!(matches!(
        kernel,
        UserKernel::Raw {
            grid: [4, 1, 1],
            block: [256, 1, 1],
            shared_mem: 0,
            ..
        }
    ));
    assert!(matches!(&args[2], UserArg::Scalar { dtype: Some(d), .. } if d == "float32"));
    assert!(matches!(&args[3], UserArg::Scalar { dtype: Some(d), .. } if d == "int32"));
    // an output starting from an input
    let from = json!([{"input": "x"}, {"output": "y", "from": "y0"}, {"scalar": 2.0}, {"scalar": 1000}]);
    let v = job(saxpy(from), json!({"x": data(&[1000]), "y0": data(&[1000])})).unwrap();
    assert_eq!(v.elements, 3000);

    let ok = json!({"x": data(&[1000])});
    let with = |args: Value| job(saxpy(args), ok.clone());
    refused(
        with(json!([{"input": "x"}])),
        &["params.args: 1 given", "takes 4", "int n"],
    );
    refused(
        with(json!([{"input": "x"}, {"scalar": 1.0}, {"scalar": 2.0}, {"scalar": 1000}])),
        &[
            "params.args[1]",
            "a scalar for the parameter `float* y`",
            "takes an array",
        ],
    );
    // an input may go to a pointer the kernel writes (its changes are not returned)
    job(
        saxpy(json!([{"input": "x"}, {"input": "x"}, {"scalar": 2.0}, {"scalar": 1000}])),
        ok.clone(),
    )
    .unwrap();
    refused(
        with(json!([{"input": "x"}, {"output": "y", "shape": [10]}, {"input": "x"}, {"scalar": 1}])),
        &["params.args[2]", "float a", "takes a float value"],
    );
    refused(
        with(json!([{"input": "x"}, {"output": "y", "shape": [10]}, {"scalar": 2.0}, {"scalar": 2.5}])),
        &["params.args[3].scalar", "whole number"],
    );
    refused(
        with(
            json!([{"input": "x"}, {"output": "y", "shape": [10]}, {"scalar": 2.0, "dtype": "float64"}, {"scalar": 1}]),
        ),
        &["params.args[2].dtype = `float64`", "float32"],
    );
    refused(
        with(json!([{"input": "x"}, {"output": "y", "shape": [0]}, {"scalar": 2.0}, {"scalar": 1}])),
        &["params.args[1].shape [0]"],
    );
    refused(
        with(json!([{"input": "x"}, {"output": "y"}, {"scalar": 2.0}, {"scalar": 1}])),
        &["either `shape`", "`from`"],
    );
    refused(
        with(json!([{"input": "nope"}, {"output": "y", "shape": [4]}, {"scalar": 2.0}, {"scalar": 1}])),
        &["inputs.nope is missing"],
    );
    // an input no argument uses
    refused(
        job(
            saxpy(json!([{"input": "x"}, {"output": "y", "shape": [4]}, {"scalar": 2.0}, {"scalar": 1}])),
            json!({"x": data(&[4]), "extra": data(&[4])}),
        ),
        &["inputs.extra", "no argument"],
    );
}

#[test]
fn raw_sources_and_launch_shapes_are_bounded() {
    let args = json!([{"input": "x"}, {"output": "y", "shape": [8]}, {"scalar": 2.0}, {"scalar": 8}]);
    let inputs = json!({"x": data(&[8])});
    let with = |f: &dyn Fn(&mut Value)| {
        let mut p = saxpy(args.clone());
        f(&mut p);
        job(p, inputs.clone())
    };
    refused(with(&|p| p["grid"] = json!([0])), &["params.grid[0] = 0"]);
    refused(
        with(&|p| p["grid"] = json!([1, 70000])),
        &["params.grid[1] = 70000", "65535"],
    );
    refused(with(&|p| p["grid"] = json!([])), &["1 to 3 extents"]);
    refused(with(&|p| p["block"] = json!([1025])), &["params.block[0] = 1025"]);
    refused(with(&|p| p["block"] = json!([64, 64])), &["4096 threads", "1024"]);
    refused(
        with(&|p| p["block"] = json!([1, 1, 65])),
        &["params.block[2] = 65"],
    );
    refused(
        with(&|p| p["shared_mem"] = json!(1 << 20)),
        &["params.shared_mem"],
    );
    refused(
        with(&|p| p["name"] = json!("axpy")),
        &["params.name", "no `__global__` function `axpy`", "saxpy"],
    );
    refused(with(&|p| p["source"] = json!("   ")), &["params.source is empty"]);
    refused(
        with(&|p| p["source"] = json!("x".repeat(MAX_SOURCE_BYTES + 1))),
        &["params.source", "262144"],
    );
    for inc in [
        "#include \"/etc/passwd\"\n",
        "#inc\\\nlude </etc/passwd>\n",
        "%:include \"/etc/passwd\"\n",
        "/**/ # /**/ include \"x\"\n",
        "#\\u0069nclude \"x\"\n",
        "#if __has_include(\"/etc/shadow\")\n#endif\n",
    ] {
        let src = format!("{inc}{SAXPY}");
        refused(with(&|p| p["source"] = json!(src)), &["params.source"]);
    }
    // a declaration kiln cannot read: an explicit signature
    let macro_src = "#define K(name) extern \"C\" __global__ void name\nK(saxpy)(const float* x, float* y, float a, int n) {}";
    refused(
        with(&|p| p["source"] = json!(macro_src)),
        &["params.name", "params.signature"],
    );
    with(&|p| {
        p["source"] = json!(macro_src);
        p["signature"] = json!("const float* x, float* y, float a, int n");
    })
    .unwrap();
    refused(
        with(&|p| {
            p["source"] = json!(macro_src);
            p["signature"] = json!("const double* x, float* y, float a, int n");
        }),
        &["params.args[0]", "points to double", "float32"],
    );
}

#[test]
fn npy_results_hold_their_dtype() {
    let a = OwnedArray {
        dtype: ScalarType::F64,
        shape: vec![2, 3],
        bytes: [1.5f64, -2.0, 3.25, 0.0, 1e300, -7.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
    };
    let bytes = super::run::npy_bytes(&a);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    std::fs::write(&p, &bytes).unwrap();
    let (arr, _) = kiln_io::read_npy_f64(&p).unwrap();
    assert_eq!(arr.shape(), &[2, 3]);
    assert_eq!(
        arr.iter().copied().collect::<Vec<_>>(),
        [1.5, -2.0, 3.25, 0.0, 1e300, -7.0]
    );
    let h = kiln_io::peek_shape(&p).unwrap();
    assert_eq!(h.shape, [2, 3]);
}
