//! CuPy's `TestElementwiseKernelSize` (tests/cupy_tests/core_tests/test_userkernel.py) on
//! the CPU path: when `size=` is required, refused or decided by an output.

use kiln_expr::{Arg, ElementwiseKernel, HostArray, HostArrayMut, Scalar};

/// A no-op kernel whose inputs and outputs are raw where the flags say.
fn kernel(input_raw: &[bool], output_raw: &[bool]) -> ElementwiseKernel {
    let list = |raws: &[bool], n: &str| {
        raws.iter()
            .enumerate()
            .map(|(i, &r)| format!("{}float32 {n}{i}", if r { "raw " } else { "" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    ElementwiseKernel::new(&list(input_raw, "x"), &list(output_raw, "y"), "", "kernel")
        .unwrap_or_else(|e| panic!("{e}"))
}

const ARR1: [f32; 2] = [1.0, 2.0];
const ARR2: [f32; 2] = [3.0, 4.0];

fn a1() -> Arg<'static> {
    Arg::Array(HostArray::from_slice(&[2], &ARR1))
}
fn a2() -> Arg<'static> {
    Arg::Array(HostArray::from_slice(&[2], &ARR2))
}
fn seven() -> Arg<'static> {
    Arg::Scalar(Scalar::I64(7))
}

/// Calls with `args`, of which the last `nout` are outputs (given as fresh arrays of 2).
fn call(k: &ElementwiseKernel, args: Vec<Arg<'_>>, nout: usize, size: Option<usize>) -> Result<(), String> {
    let nin = args.len() - nout;
    if nout == 0 {
        return k.call_alloc(&args, size).map(|_| ()).map_err(|e| e.to_string());
    }
    let mut bufs = vec![[0f32; 2]; nout];
    let mut outs: Vec<HostArrayMut<'_>> = bufs
        .iter_mut()
        .map(|b| HostArrayMut::from_slice(&[2], b))
        .collect();
    k.call(&args[..nin], &mut outs, size).map_err(|e| e.to_string())
}

fn not_allowed(r: Result<(), String>) {
    let e = r.expect_err("size was accepted");
    assert!(
        e.contains("Specified 'size' can be used only if all of the ndarray are 'raw'"),
        "{e}"
    );
}
fn required(r: Result<(), String>) {
    let e = r.expect_err("no size was accepted");
    assert!(e.contains("Loop size is undecided"), "{e}");
}

#[test]
fn all_raws() {
    let k1 = kernel(&[true, true], &[false]);
    call(&k1, vec![a1(), a2()], 0, Some(2)).unwrap();
    required(call(&k1, vec![a1(), a2()], 0, None));
    let k2 = kernel(&[true, true], &[true]);
    call(&k2, vec![a1(), a2()], 0, Some(2)).unwrap();
    required(call(&k2, vec![a1(), a2()], 0, None));
}

#[test]
fn all_and_some_nonraws() {
    not_allowed(call(
        &kernel(&[false, false], &[false]),
        vec![a1(), a2()],
        0,
        Some(2),
    ));
    not_allowed(call(
        &kernel(&[false, false], &[true]),
        vec![a1(), a2()],
        0,
        Some(2),
    ));
    for (i, o) in [
        ([true, false], [false]),
        ([false, true], [false]),
        ([true, false], [true]),
        ([false, true], [true]),
    ] {
        not_allowed(call(&kernel(&i, &o), vec![a1(), a2()], 0, Some(2)));
    }
}

#[test]
fn scalars_with_nonraws_and_raws() {
    not_allowed(call(
        &kernel(&[false, false], &[false]),
        vec![a1(), seven()],
        0,
        Some(2),
    ));
    not_allowed(call(
        &kernel(&[false, false], &[false]),
        vec![seven(), a1()],
        0,
        Some(2),
    ));
    not_allowed(call(
        &kernel(&[false, false], &[true]),
        vec![a1(), seven()],
        0,
        Some(2),
    ));
    not_allowed(call(
        &kernel(&[false, false, true], &[false]),
        vec![a1(), seven(), a2()],
        0,
        Some(2),
    ));
    for (i, o, first_scalar) in [
        ([true, false], [false], false),
        ([false, true], [false], true),
        ([true, false], [true], false),
        ([false, true], [true], true),
    ] {
        let k = kernel(&i, &o);
        let args = || {
            if first_scalar {
                vec![seven(), a1()]
            } else {
                vec![a1(), seven()]
            }
        };
        call(&k, args(), 0, Some(2)).unwrap();
        required(call(&k, args(), 0, None));
    }
}

#[test]
fn size_determined_by_output() {
    let k1 = kernel(&[true], &[false]);
    call(&k1, vec![a1(), a2()], 1, None).unwrap();
    not_allowed(call(&k1, vec![a1(), a2()], 1, Some(2)));
    let k2 = kernel(&[false], &[false]);
    call(&k2, vec![a1(), a2()], 1, None).unwrap();
    not_allowed(call(&k2, vec![seven(), a2()], 1, Some(2)));
    let k3 = kernel(&[], &[false]);
    call(&k3, vec![a1()], 1, None).unwrap();
    not_allowed(call(&k3, vec![a1()], 1, Some(2)));
}

#[test]
fn no_input_and_raw_output() {
    let k = kernel(&[], &[true]);
    call(&k, vec![a1()], 1, Some(2)).unwrap();
    required(call(&k, vec![a1()], 1, None));
}
