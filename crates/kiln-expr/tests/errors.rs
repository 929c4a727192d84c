//! Every kind of bad input is a clear error naming the problem, never a panic.

use kiln_expr::{Arg, Axis, ElementwiseKernel, HostArray, HostArrayMut, ReductionKernel, Scalar, ScalarType};

fn ew_err(i: &str, o: &str, op: &str) -> String {
    match ElementwiseKernel::new(i, o, op, "k") {
        Err(e) => e.to_string(),
        Ok(k) => {
            let x = [1f32, 2.0, 3.0, 4.0];
            let args: Vec<Arg<'_>> = (0..k.in_params().len())
                .map(|_| Arg::Array(HostArray::from_slice(&[4], &x)))
                .collect();
            k.call_alloc(&args, None)
                .expect_err("the kernel was accepted")
                .to_string()
        }
    }
}

fn has(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{msg}` does not mention `{p}`");
    }
}

#[test]
fn unsupported_constructs_name_the_construct_and_position() {
    has(
        &ew_err(
            "float32 x",
            "float32 y",
            "y = 0;\n  for (int j = 0; j < 3; j++) y += x;",
        ),
        &["`for` loops are not supported", "line 2, column 3"],
    );
    has(
        &ew_err("float32 x", "float32 y", "while (x > 0) {}"),
        &["`while` loops"],
    );
    has(
        &ew_err("float32 x", "float32 y", "y = foo(x)"),
        &["unknown function `foo`", "line 1, column 5"],
    );
    has(
        &ew_err("float32 x", "float32 y", "y = *x"),
        &["pointer dereference"],
    );
    has(&ew_err("float32 x", "float32 y", "y = x++"), &["`++`"]);
    has(
        &ew_err("float32 x", "float32 y", "y = x % 2"),
        &["`%` needs integer operands", "float32"],
    );
    has(
        &ew_err("float32 x", "float32 y", "x = 1"),
        &["input parameter `x` is read-only"],
    );
    has(&ew_err("float32 x", "float32 y", "y = z"), &["unknown name `z`"]);
    has(
        &ew_err("float32 x", "float32 y", "y = x[0]"),
        &["`x` is not a raw parameter"],
    );
    has(&ew_err("float32 x", "float32 y", "y = (x"), &["expected `)`"]);
    has(
        &ew_err("float32 x", "float32 y", "y = 1, y = 2"),
        &["comma operator"],
    );
    has(
        &ew_err("float32 x", "float32 y", "y = tex1D<float>(x, 0)"),
        &["template call"],
    );
}

#[test]
fn parameter_lists() {
    has(
        &ElementwiseKernel::new("complex256 x", "float32 y", "y = 0", "k")
            .unwrap_err()
            .to_string(),
        &["extended-precision complex has no CUDA type"],
    );
    has(
        &ElementwiseKernel::new("float32", "float32 y", "y = 0", "k")
            .unwrap_err()
            .to_string(),
        &["Syntax error"],
    );
    has(
        &ElementwiseKernel::new("float32 i", "float32 y", "y = 0", "k")
            .unwrap_err()
            .to_string(),
        &["Can not use 'i' as a parameter name"],
    );
    has(
        &ElementwiseKernel::new("float32 x", "float32 y", "y = 0", "1k")
            .unwrap_err()
            .to_string(),
        &["Invalid kernel name"],
    );
    has(
        &ElementwiseKernel::new("float32 x, float32 x", "float32 y", "y = 0", "k")
            .unwrap_err()
            .to_string(),
        &["`x` is used twice"],
    );
    has(
        &ElementwiseKernel::new("unsigned foo x", "float32 y", "y = 0", "k")
            .unwrap_err()
            .to_string(),
        &["Unknown keyword \"foo\""],
    );
}

#[test]
fn binding_errors() {
    let k = ElementwiseKernel::new("T x, T y", "T z", "z = x + y", "add").unwrap();
    let f32s = [1f32, 2.0, 3.0];
    let f64s = [1f64, 2.0, 3.0];
    let a = || Arg::Array(HostArray::from_slice(&[3], &f32s));
    // T bound to two types.
    let e = k
        .call_alloc(&[a(), Arg::Array(HostArray::from_slice(&[3], &f64s))], None)
        .unwrap_err()
        .to_string();
    has(
        &e,
        &["Type is mismatched", "`T`", "`x`", "`y`", "float32", "float64"],
    );
    // Wrong argument count.
    has(
        &k.call_alloc(&[a()], None).unwrap_err().to_string(),
        &["Wrong number of arguments for 'add'", "either 2 or 3", "given 1"],
    );
    // Shapes that do not broadcast.
    let four = [1f32; 4];
    let e = k
        .call_alloc(&[a(), Arg::Array(HostArray::from_slice(&[4], &four))], None)
        .unwrap_err()
        .to_string();
    has(&e, &["could not be broadcast", "[3]", "[4]"]);
    // An output of the wrong shape or dtype.
    let mut z = [0f32; 4];
    let e = k
        .call(&[a(), a()], &mut [HostArrayMut::from_slice(&[4], &mut z)], None)
        .unwrap_err()
        .to_string();
    has(&e, &["could not be broadcast"]);
    let mut z = [0f32; 6];
    let e = k.call(
        &[a(), a()],
        &mut [HostArrayMut::from_slice(&[2, 3], &mut z)],
        None,
    );
    assert!(
        e.is_ok(),
        "an output of a broadcast-compatible larger shape sets the loop shape"
    );
    let k1 = ElementwiseKernel::new("float32 x", "float32 z", "z = x", "copy").unwrap();
    let mut z = [0f32; 6];
    let e = k1.call(&[a()], &mut [HostArrayMut::from_slice(&[2, 3], &mut z)], None);
    assert!(e.is_ok());
    let kr = ElementwiseKernel::new("raw float32 x", "float32 z", "z = x[i]", "rawcopy").unwrap();
    let mut z = [0f32; 2];
    let e = kr.call(&[a()], &mut [HostArrayMut::from_slice(&[2], &mut z)], None);
    assert!(e.is_ok());
    let mut zd = [0f64; 3];
    let e = k
        .call(&[a(), a()], &mut [HostArrayMut::from_slice(&[3], &mut zd)], None)
        .unwrap_err()
        .to_string();
    has(&e, &["Type is mismatched", "`z`", "float64", "float32"]);
    let kc = ElementwiseKernel::new("float32 x", "float64 z", "z = x", "conv").unwrap();
    let mut zf = [0f32; 3];
    let e = kc
        .call(&[a()], &mut [HostArrayMut::from_slice(&[3], &mut zf)], None)
        .unwrap_err()
        .to_string();
    has(&e, &["Type is mismatched", "`z`", "float64"]);
    // A concrete parameter given another dtype.
    let e = kc
        .call_alloc(&[Arg::Array(HostArray::from_slice(&[3], &f64s))], None)
        .unwrap_err()
        .to_string();
    has(&e, &["Type is mismatched", "`x`", "float32", "float64"]);
    // `size` rules.
    has(
        &k.call_alloc(&[a(), a()], Some(3)).unwrap_err().to_string(),
        &["Specified 'size' can be used only if all of the ndarray are 'raw'"],
    );
    let kraw = ElementwiseKernel::new("raw T x", "raw T y", "y[i] = x[i]", "rawonly").unwrap();
    has(
        &kraw.call_alloc(&[a()], None).unwrap_err().to_string(),
        &["Loop size is undecided"],
    );
    has(
        &kraw
            .call_alloc(&[Arg::Scalar(Scalar::F32(1.0))], Some(3))
            .unwrap_err()
            .to_string(),
        &["raw parameter `x` needs an array"],
    );
    // the same for a raw parameter of a concrete type
    let kf = ElementwiseKernel::new("raw float32 x", "float32 y", "y = x[i]", "rawf").unwrap();
    has(
        &kf.call_alloc(&[Arg::Scalar(Scalar::F32(1.0))], Some(3))
            .unwrap_err()
            .to_string(),
        &["raw parameter `x` needs an array"],
    );
    // A placeholder nothing binds.
    let ku = ElementwiseKernel::new("T x", "U y", "y = x", "unbound").unwrap();
    has(
        &ku.call_alloc(&[a()], None).unwrap_err().to_string(),
        &["type `U`", "`y`", "cannot be decided"],
    );
    // A preamble cannot run on the CPU.
    let kp = ElementwiseKernel::new("T x", "T y", "y = x", "pre")
        .unwrap()
        .with_preamble("#define A 1");
    has(
        &kp.call_alloc(&[a()], None).unwrap_err().to_string(),
        &["preamble", "only on the GPU"],
    );
    // A view past the end of its buffer.
    let bad = HostArray {
        dtype: ScalarType::F32,
        shape: vec![4],
        strides: vec![1],
        offset: 0,
        bytes: bytemuck::cast_slice(&f32s),
    };
    has(
        &k.call_alloc(&[Arg::Array(bad), a()], None)
            .unwrap_err()
            .to_string(),
        &["could not be broadcast"],
    );
    let bad = HostArray {
        dtype: ScalarType::F32,
        shape: vec![3],
        strides: vec![2],
        offset: 0,
        bytes: bytemuck::cast_slice(&f32s),
    };
    has(
        &k.call_alloc(&[Arg::Array(bad), a()], None)
            .unwrap_err()
            .to_string(),
        &["addresses elements 0..=4", "holds 3"],
    );
}

#[test]
fn reduction_errors() {
    let k = ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "my_sum", None).unwrap();
    let x = [1f32; 4];
    let a = || Arg::Array(HostArray::from_slice(&[2, 2], &x));
    has(
        &k.call_alloc(&[a()], &Axis::One(2), false)
            .unwrap_err()
            .to_string(),
        &["axis 2 is out of bounds for array of dimension 2"],
    );
    has(
        &k.call_alloc(&[a()], &Axis::Many(vec![0, 7]), false)
            .unwrap_err()
            .to_string(),
        &["axis 7 is out of bounds"],
    );
    has(
        &k.call_alloc(&[a()], &Axis::One(-3), false)
            .unwrap_err()
            .to_string(),
        &["axis -3 is out of bounds"],
    );
    has(
        &k.call_alloc(&[a()], &Axis::Many(vec![1, 1]), false)
            .unwrap_err()
            .to_string(),
        &["duplicate value in 'axis'"],
    );
    has(
        &k.call_alloc(&[a()], &Axis::Many(vec![0, -2]), false)
            .unwrap_err()
            .to_string(),
        &["duplicate value in 'axis'"],
    );
    has(
        &k.call_alloc(&[a(), a()], &Axis::All, false)
            .unwrap_err()
            .to_string(),
        &["Wrong number of arguments for my_sum"],
    );
    let mut y = [0f32; 3];
    has(
        &k.call(
            &[a()],
            &mut [HostArrayMut::from_slice(&[3], &mut y)],
            &Axis::One(0),
            false,
        )
        .unwrap_err()
        .to_string(),
        &["Out shape is mismatched", "[3]", "[2]"],
    );
    has(
        &ReductionKernel::new("raw T x", "T y", "x", "a + b", "y = a", Some("0"), "r", None)
            .unwrap_err()
            .to_string(),
        &["raw parameter `x`", "not supported in reduction kernels"],
    );
    has(
        &ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "1r", None)
            .unwrap_err()
            .to_string(),
        &["Invalid kernel name"],
    );
    let kb = ReductionKernel::new("T x", "T y", "x", "a +* b", "y = a", Some("0"), "bad", None).unwrap();
    has(
        &kb.call_alloc(&[a()], &Axis::All, false).unwrap_err().to_string(),
        &["reduce_expr", "pointer dereference"],
    );
    let kb = ReductionKernel::new(
        "T x",
        "T y",
        "x",
        "a + b",
        "for (;;) y = a",
        Some("0"),
        "bad",
        None,
    )
    .unwrap();
    has(
        &kb.call_alloc(&[a()], &Axis::All, false).unwrap_err().to_string(),
        &["post_map_expr", "`for` loops"],
    );
}
