//! NPY: every supported dtype and dimension, Fortran order, byte order, bad input.
#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::*;
use kiln_io::{read_npy, write_npy, IoError, NpyDtype};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use ndarray_npy::WriteNpyExt;
use rand::Rng;

fn write_with_crate<A: ndarray_npy::WritableElement>(path: &std::path::Path, a: &ArrayD<A>) {
    let f = std::fs::File::create(path).unwrap();
    a.write_npy(f).unwrap();
}

#[test]
fn f32_round_trips_in_every_dimension() {
    let dir = tempfile::tempdir().unwrap();
    for (i, shape) in [
        vec![7],
        vec![3, 5],
        vec![2, 3, 4],
        vec![2, 3, 4, 5],
        vec![1, 2, 1, 3, 2],
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("a{i}.npy"));
        let a = float_array(10 + i as u64, &shape);
        write_npy(&path, &a).unwrap();
        let back = read_npy(&path).unwrap();
        assert_eq!(back.dtype, NpyDtype::F32);
        assert_eq!(back.data, a, "{shape:?}");
    }
}

#[test]
fn f64_u8_u16_are_read_into_f32_with_their_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(5);
    let shape = IxDyn(&[4, 3, 2]);

    let f64s = ArrayD::from_shape_fn(shape.clone(), |_| r.random_range(-1e6f64..1e6));
    let p = dir.path().join("f64.npy");
    write_with_crate(&p, &f64s);
    let back = read_npy(&p).unwrap();
    assert_eq!(back.dtype, NpyDtype::F64);
    assert_eq!(back.data, f64s.mapv(|v| v as f32));

    let u8s = ArrayD::from_shape_fn(shape.clone(), |_| r.random::<u8>().max(1));
    let p = dir.path().join("u8.npy");
    write_with_crate(&p, &u8s);
    let back = read_npy(&p).unwrap();
    assert_eq!(back.dtype, NpyDtype::U8);
    assert_eq!(back.data, u8s.mapv(f32::from));

    let u16s = ArrayD::from_shape_fn(shape, |_| r.random::<u16>().max(1));
    let p = dir.path().join("u16.npy");
    write_with_crate(&p, &u16s);
    let back = read_npy(&p).unwrap();
    assert_eq!(back.dtype, NpyDtype::U16);
    assert_eq!(back.data, u16s.mapv(f32::from));
}

#[test]
fn fortran_order_files_are_read_correctly_into_c_layout() {
    let dir = tempfile::tempdir().unwrap();
    let c = float_array(3, &[3, 4, 5]);
    // Same logical values, Fortran memory order: ndarray-npy writes `fortran_order: True`.
    let mut f = ArrayD::<f32>::zeros(IxDyn(&[3, 4, 5]).f());
    f.assign(&c);
    assert!(!f.is_standard_layout());
    let p = dir.path().join("f.npy");
    write_with_crate(&p, &f);
    let head = std::fs::read(&p).unwrap();
    assert!(String::from_utf8_lossy(&head[..128]).contains("'fortran_order': True"));
    let back = read_npy(&p).unwrap();
    assert!(back.data.is_standard_layout());
    assert_eq!(back.data, c);
}

/// Builds an NPY v1 file by hand (for descriptors ndarray-npy does not write).
fn handmade(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend(data);
    out
}

#[test]
fn big_endian_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let vals = [1.5f32, -2.25, 1e-3, 12345.0];
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
    let p = dir.path().join("be.npy");
    std::fs::write(&p, handmade(">f4", "(2, 2)", &data)).unwrap();
    let back = read_npy(&p).unwrap();
    assert_eq!(back.data.as_slice().unwrap(), &vals);
}

#[test]
fn unsupported_dtypes_name_the_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("i32.npy");
    write_with_crate(&p, &ArrayD::from_shape_fn(IxDyn(&[3, 3]), |i| i[0] as i32 + 1));
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDtype { .. }), "{e}");
    assert!(
        e.to_string().contains("<i4") && e.to_string().contains("float32"),
        "{e}"
    );

    std::fs::write(&p, handmade("<c8", "(1,)", &[0u8; 8])).unwrap();
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDtype { .. }), "{e}");
}

#[test]
fn truncated_and_corrupt_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.npy");
    write_npy(&p, &float_array(8, &[20, 30])).unwrap();
    truncate_half(&p);
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");

    // Cut inside the header.
    std::fs::write(&p, &handmade("<f4", "(2,)", &[0u8; 8])[..40]).unwrap();
    let e = read_npy(&p).unwrap_err();
    assert!(e.to_string().contains("header"), "{e}");

    // A header announcing an absurd shape must fail before allocating it.
    std::fs::write(&p, handmade("<f4", "(100000000000, 100000)", &[0u8; 8])).unwrap();
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::Corrupt { .. }), "{e}");
    std::fs::write(&p, handmade("<f8", "(4611686018427387904, 8)", &[0u8; 8])).unwrap();
    let e = read_npy(&p).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");

    // Trailing garbage.
    let mut bytes = handmade("<f4", "(2,)", &[0u8; 8]);
    bytes.extend([1, 2, 3]);
    std::fs::write(&p, bytes).unwrap();
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::Corrupt { .. }), "{e}");

    for junk in [
        &b""[..],
        b"\x93NUMPY",
        b"PK\x03\x04 zip, not npy",
        b"\x93NUMPY\x09\x00\x10\x00",
    ] {
        std::fs::write(&p, junk).unwrap();
        let e = read_npy(&p).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{junk:?}: {e}");
    }
}

#[test]
fn scrambled_headers_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.npy");
    write_npy(&p, &float_array(2, &[4, 6])).unwrap();
    for seed in 0..300u64 {
        let bad = scramble(&p, seed, 0, 1 + (seed % 4) as usize);
        let m = dir.path().join("m.npy");
        std::fs::write(&m, &bad[..bad.len().min(128 + (seed as usize % 64))]).unwrap();
        let _ = read_npy(&m);
        std::fs::write(&m, &bad).unwrap();
        let _ = read_npy(&m);
    }
}

#[test]
fn missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let e = read_npy(dir.path().join("none.npy")).unwrap_err();
    assert!(matches!(e, IoError::NotFound { .. }), "{e}");
}

/// Prints what reading and writing a 256 MiB f32 `.npy` costs in one process, as kiln's
/// file-to-file paths do it (`--ignored --nocapture`; `NPY_BENCH_DIR` picks the directory,
/// default the system's temporary one): `read_npy` of a page-cached file, `write_npy` to a
/// new name, and `write_npy` over an existing output (the atomic rename over a file, where
/// ext4 used to start the writeback inside the rename), each the median of 5.
#[test]
#[ignore = "bench: prints NPY read/write timings"]
fn npy_io_timings() {
    let base = std::env::var_os("NPY_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(base).unwrap();
    let side = 8192;
    let a = ArrayD::from_shape_fn(IxDyn(&[side, side]), |d| (d[0] * 31 + d[1]) as f32 * 1e-3);
    let src = dir.path().join("in.npy");
    write_npy(&src, &a).unwrap();
    let med = |mut f: Box<dyn FnMut() -> f64 + '_>| {
        f();
        let mut v: Vec<f64> = (0..5).map(|_| f()).collect();
        v.sort_by(f64::total_cmp);
        v[2]
    };
    let read = med(Box::new(|| {
        let t = std::time::Instant::now();
        let b = read_npy(&src).unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(b.data.len(), side * side);
        ms
    }));
    let mut k = 0;
    let new = med(Box::new(|| {
        k += 1;
        let p = dir.path().join(format!("new{k}.npy"));
        let t = std::time::Instant::now();
        write_npy(&p, &a).unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        std::fs::remove_file(&p).unwrap();
        ms
    }));
    let out = dir.path().join("out.npy");
    let over = med(Box::new(|| {
        let t = std::time::Instant::now();
        write_npy(&out, &a).unwrap();
        t.elapsed().as_secs_f64() * 1e3
    }));
    assert_eq!(read_npy(&out).unwrap().data, a);
    println!(
        "NPY 256 MiB f32: read_npy {read:.1} ms; write_npy to a new name {new:.1} ms, over an existing output {over:.1} ms (median of 5)"
    );
}
