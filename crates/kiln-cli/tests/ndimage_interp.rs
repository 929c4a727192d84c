//! `kiln ndimage` interpolation end to end: zoom, shift, rotate, affine_transform,
//! spline_filter and spline_filter1d on odd-shaped 2-D `.npy` images, an 8-bit PNG, 3-D
//! `.npy` and NIfTI volumes and a 4-D series, each output equal to the bit to
//! `kiln::ndimage::scipy_interp` on the same data on the CPU (the functions kiln-py's
//! `_ndimage_interp.py` runs, checked against scipy by the Python suite); the NIfTI header
//! after zoom, shift, rotate and affine_transform (each voxel's world position kept); and every bad-input case with exit 4 and nothing written.
#![allow(clippy::unwrap_used)]

mod filter_support;
use filter_support::*;
use kiln::core::imaging::interp::{store_value, Store};
use kiln::ndimage::scipy_interp::{self as si, AffineMatrix, InterpOptions};
use kiln::{DType, Runtime, Tensor};

fn opts(order: usize, mode: &str, cval: f64) -> InterpOptions {
    InterpOptions {
        order,
        mode: si::interp_mode(mode).unwrap(),
        cval,
        prefilter: true,
    }
}

fn run(
    x: &[f32],
    shape: &[usize],
    f: impl Fn(&Runtime, &Tensor) -> kiln::Result<Tensor>,
) -> (Vec<usize>, Vec<f32>) {
    let rt = Runtime::cpu();
    let t = rt.tensor(x, shape).unwrap();
    let y = f(&rt, &t).unwrap();
    (y.shape().to_vec(), y.to_vec::<f32>().unwrap())
}

/// A facade call on a CPU tensor.
type Op = dyn Fn(&Runtime, &Tensor) -> kiln::Result<Tensor>;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The CLI's `.npy` output equals `want` to the bit.
fn same_npy(d: &Dir, name: &str, want: &(Vec<usize>, Vec<f32>)) {
    let (shape, got, _) = read_npy(&d.p(name));
    assert_eq!(shape, want.0, "{name}");
    assert_eq!(bits(&got), bits(&want.1), "{name}");
}

#[test]
fn each_function_on_a_13x9_npy_gives_the_facade_bits() {
    let d = Dir::new();
    let shape = [13, 9];
    let x = f32s(13 * 9, 31, -40.0, 90.0);
    write_npy(&d.p("in.npy"), &shape, x.clone());
    let m = |v: &[f64], s: &[usize]| AffineMatrix {
        values: v.to_vec(),
        shape: s.to_vec(),
    };
    let cases: Vec<(&str, Box<Op>)> = vec![
        (
            "zoom --zoom 1.7,0.6",
            Box::new(|rt, t| si::zoom(rt, t, &[1.7, 0.6], false, &opts(3, "constant", 0.0), DType::F32)),
        ),
        (
            "zoom --zoom 2.5 --order 1 --mode nearest --grid-mode true",
            Box::new(|rt, t| si::zoom(rt, t, &[2.5, 2.5], true, &opts(1, "nearest", 0.0), DType::F32)),
        ),
        (
            "zoom --zoom 0.7 --order 5 --mode grid-constant --cval 3.5",
            Box::new(|rt, t| {
                si::zoom(
                    rt,
                    t,
                    &[0.7, 0.7],
                    false,
                    &opts(5, "grid-constant", 3.5),
                    DType::F32,
                )
            }),
        ),
        (
            "shift --shift 1.5,-2.25 --mode wrap",
            Box::new(|rt, t| si::shift(rt, t, &[1.5, -2.25], &opts(3, "wrap", 0.0), DType::F32)),
        ),
        (
            "shift --shift 0.4 --order 0 --mode grid-wrap",
            Box::new(|rt, t| si::shift(rt, t, &[0.4, 0.4], &opts(0, "grid-wrap", 0.0), DType::F32)),
        ),
        (
            "rotate --angle 30",
            Box::new(|rt, t| si::rotate(rt, t, 30.0, [1, 0], true, &opts(3, "constant", 0.0), DType::F32)),
        ),
        (
            "rotate --angle -117.5 --reshape false --order 1 --mode mirror",
            Box::new(|rt, t| si::rotate(rt, t, -117.5, [1, 0], false, &opts(1, "mirror", 0.0), DType::F32)),
        ),
        (
            "affine_transform --matrix 0.9,0.2;-0.1,1.1 --offset 1,-2 --output-shape 11,14 --mode reflect",
            Box::new(move |rt, t| {
                si::affine_transform(
                    rt,
                    t,
                    &m(&[0.9, 0.2, -0.1, 1.1], &[2, 2]),
                    &[1.0, -2.0],
                    Some(&[11, 14]),
                    &opts(3, "reflect", 0.0),
                    DType::F32,
                )
            }),
        ),
        (
            "affine_transform --matrix 1.2,0,0.5;0,0.8,-1;0,0,1 --order 2 --mode grid-mirror",
            Box::new(move |rt, t| {
                si::affine_transform(
                    rt,
                    t,
                    &m(&[1.2, 0.0, 0.5, 0.0, 0.8, -1.0, 0.0, 0.0, 1.0], &[3, 3]),
                    &[0.0],
                    None,
                    &opts(2, "grid-mirror", 0.0),
                    DType::F32,
                )
            }),
        ),
        (
            "affine_transform --matrix 0.5,1.5 --offset 2",
            Box::new(move |rt, t| {
                si::affine_transform(
                    rt,
                    t,
                    &m(&[0.5, 1.5], &[2]),
                    &[2.0],
                    None,
                    &opts(3, "constant", 0.0),
                    DType::F32,
                )
            }),
        ),
        (
            "spline_filter --order 4",
            Box::new(|_, t| si::spline_filter(t, 4, si::interp_mode("mirror").unwrap(), DType::F32)),
        ),
        (
            "spline_filter1d --axis 0 --mode nearest",
            Box::new(|_, t| si::spline_filter1d(t, 3, 0, si::interp_mode("nearest").unwrap(), DType::F32)),
        ),
    ];
    for (i, (line, f)) in cases.iter().enumerate() {
        let out = format!("o{i}.npy");
        let json = d.ok(&format!("ndimage {line} --input in.npy --output {out} --json"));
        let want = run(&x, &shape, f);
        assert_eq!(json["output_shape"], serde_json::json!(want.0), "{line}");
        assert_eq!(json["input_shape"], serde_json::json!([13, 9]), "{line}");
        same_npy(&d, &out, &want);
    }
}

#[test]
fn an_8bit_png_is_stored_as_scipy_stores_uint8() {
    let d = Dir::new();
    let (h, w, c) = (11, 7, 3);
    let x = ints(h * w * c, 5, 255);
    write_img(&d.p("in.png"), h, w, c, x.clone(), kiln_io::SampleType::U8);
    let json = d.ok("ndimage zoom --input in.png --zoom 1.6,2.3 --output out.png --json");
    let (oh, ow) = (18, 16);
    assert_eq!(json["output_shape"], serde_json::json!([oh, ow, c]));
    assert_eq!(json["output_type"], "u8");
    let img = read_img(&d.p("out.png"));
    let got = pixels(&img);
    let rt = Runtime::cpu();
    for ch in 0..c {
        let plane: Vec<f32> = (0..h * w).map(|p| x[p * c + ch]).collect();
        let t = rt.tensor(&plane, &[h, w]).unwrap();
        let y = si::zoom(&rt, &t, &[1.6, 2.3], false, &opts(3, "constant", 0.0), DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        for p in 0..oh * ow {
            let want = store_value(y[p], Store::Unsigned(255.0)) as u8;
            assert_eq!(got[p * c + ch], f32::from(want), "pixel {p} channel {ch}");
        }
    }
}

#[test]
fn volumes_and_series_give_the_facade_bits() {
    let d = Dir::new();
    let shape = [7, 6, 5];
    let x = f32s(7 * 6 * 5, 8, -100.0, 300.0);
    write_npy(&d.p("v.npy"), &shape, x.clone());
    write_nifti(&d.p("v.nii.gz"), &shape, x.clone());
    let o = opts(3, "constant", 0.0);
    d.ok("ndimage rotate --input v.npy --angle 25 --output r.npy");
    same_npy(
        &d,
        "r.npy",
        &run(&x, &shape, |rt, t| {
            si::rotate(rt, t, 25.0, [1, 0], true, &o, DType::F32)
        }),
    );
    d.ok("ndimage rotate --input v.npy --angle 70 --axes 0,2 --reshape false --mode nearest --output r2.npy");
    let on = opts(3, "nearest", 0.0);
    same_npy(
        &d,
        "r2.npy",
        &run(&x, &shape, |rt, t| {
            si::rotate(rt, t, 70.0, [0, 2], false, &on, DType::F32)
        }),
    );
    d.ok("ndimage shift --input v.nii.gz --shift 0.5,-1,2.25 --output s.nii");
    let want = run(&x, &shape, |rt, t| {
        si::shift(rt, t, &[0.5, -1.0, 2.25], &o, DType::F32)
    });
    let s = kiln_io::read_volume(d.p("s.nii")).unwrap();
    assert_eq!(bits(&flat(&s.data)), bits(&want.1));
    // the header moves with the grid (world positions: the header test below)
    let inp = kiln_io::read_volume(d.p("v.nii.gz")).unwrap();
    assert_ne!(s.affine(), inp.affine(), "shift moves the sform");
    let m = "1,0.1,0,0.5;0,0.9,0.2,-1;0.05,0,1.1,0";
    d.ok(&format!(
        "ndimage affine_transform --input v.npy --matrix {m} --order 1 --output a.npy"
    ));
    let am = AffineMatrix {
        values: vec![1.0, 0.1, 0.0, 0.5, 0.0, 0.9, 0.2, -1.0, 0.05, 0.0, 1.1, 0.0],
        shape: vec![3, 4],
    };
    let o1 = opts(1, "constant", 0.0);
    same_npy(
        &d,
        "a.npy",
        &run(&x, &shape, |rt, t| {
            si::affine_transform(rt, t, &am, &[0.0], None, &o1, DType::F32)
        }),
    );
    // a 4-D series: volume by volume along t
    let t4 = 3;
    let x4 = f32s(7 * 6 * 5 * t4, 9, 0.0, 10.0);
    write_nifti(&d.p("s4.nii"), &[7, 6, 5, t4], x4.clone());
    d.ok("ndimage zoom --input s4.nii --zoom 1.5,0.5,1 --order 1 --output z4.nii");
    let z4 = kiln_io::read_volume(d.p("z4.nii")).unwrap();
    assert_eq!(z4.data.shape(), &[10, 3, 5, t4]);
    for k in 0..t4 {
        let v: Vec<f32> = (0..7 * 6 * 5).map(|p| x4[p * t4 + k]).collect();
        let want = run(&v, &shape, |rt, t| {
            si::zoom(rt, t, &[1.5, 0.5, 1.0], false, &o1, DType::F32)
        });
        let got: Vec<f32> = z4.data.index_axis(ndarray::Axis(3), k).iter().copied().collect();
        assert_eq!(bits(&got), bits(&want.1), "volume {k}");
    }
}

/// World position of voxel `v` under a 4x4 affine.
fn world(a: &[[f64; 4]; 4], v: [f64; 3]) -> [f64; 3] {
    let mut w = [0.0; 3];
    for (r, o) in w.iter_mut().enumerate() {
        *o = a[r][3] + (0..3).map(|j| a[r][j] * v[j]).sum::<f64>();
    }
    w
}

/// The qform's affine of a volume (its sform left out).
fn qform(v: &kiln_io::Volume) -> [[f64; 4]; 4] {
    kiln_io::header_affine(&kiln_io::NiftiHeader {
        sform_code: 0,
        ..v.header.clone()
    })
}

#[test]
fn shift_rotate_and_affine_transform_keep_each_voxels_world_position() {
    let d = Dir::new();
    let shape = [7, 6, 5];
    // one bright voxel at (2, 1, 3); order 0 moves it whole
    let mut x = vec![0.0f32; 7 * 6 * 5];
    x[2 * 30 + 5 + 3] = 100.0;
    let mut vol = Volume::new(ArrayD::from_shape_vec(IxDyn(&shape), x).unwrap());
    vol.header = oblique_header();
    // equal voxel sizes in the plane of axes 0 and 1, so rotations there stay rigid
    vol.header.pixdim[1] = 0.9;
    kiln_io::write_volume(d.p("v.nii"), &vol).unwrap();
    let inp = kiln_io::read_volume(d.p("v.nii")).unwrap();
    for (args, at) in [
        ("shift --shift 1,2,-1", [3, 3, 2]),
        // 90 degrees in the plane (0, 1), reshaped to 6x7: output (i, j) reads input
        // (j, 5 - i), so input (2, 1) is output (4, 2)
        ("rotate --angle 90", [4, 2, 3]),
        // axes 0 and 1 swapped (a reflection: qfac flips) and offset by 1 along axis 0
        (
            "affine_transform --matrix 0,1,0;1,0,0;0,0,1 --offset 1,0,0",
            [1, 1, 3],
        ),
        // a diagonal: output (i, j, k) reads input (2 i, j, k); the voxel size along 0 doubles
        ("affine_transform --matrix 2,1,1", [1, 1, 3]),
    ] {
        let j = d.ok(&format!(
            "ndimage {args} --order 0 --input v.nii --output o.nii --json"
        ));
        assert_eq!(j["header"], "moved", "{args}");
        let out = kiln_io::read_volume(d.p("o.nii")).unwrap();
        let k = out.data.iter().position(|&v| v == 100.0).unwrap();
        let s = out.data.shape();
        let o = [k / (s[1] * s[2]), k / s[2] % s[1], k % s[2]];
        assert_eq!(o, at, "{args}");
        assert_eq!((out.header.qform_code, out.header.sform_code), (1, 2), "{args}");
        // the qform's voxel size along axis 0: doubled by the diagonal, axis 1's after the swap
        let scale0 = if args.contains("2,1,1") { 2.0 } else { 1.0 };
        let from = if args.contains("0,1,0;1,0,0") { 2 } else { 1 };
        let want = f64::from(inp.header.pixdim[from]) * scale0;
        let got = f64::from(out.header.pixdim[1]);
        assert!((got - want).abs() < 1e-5, "{args}: {:?}", out.header.pixdim);
        let vo = o.map(|v| v as f64);
        for (a_in, a_out) in [(inp.affine(), out.affine()), (qform(&inp), qform(&out))] {
            let (p, q) = (world(&a_in, [2.0, 1.0, 3.0]), world(&a_out, vo));
            for r in 0..3 {
                assert!((p[r] - q[r]).abs() < 1e-3, "{args}: {p:?} vs {q:?}");
            }
        }
    }
    // 30 degrees in a plane of unequal voxel sizes is a shear in world space: the sform
    // follows, no qform can, so its code is cleared
    let j = d.ok("ndimage rotate --angle 30 --axes 0,2 --input v.nii --output r.nii --json");
    assert!(
        j["header"].as_str().unwrap().contains("qform_code set to 0"),
        "{j}"
    );
    let r = kiln_io::read_volume(d.p("r.nii")).unwrap();
    assert_eq!((r.header.qform_code, r.header.sform_code), (0, 2));
    // pixdim: the voxel sizes under the new sform (its columns' lengths)
    let a = r.affine();
    for (c, p) in r.header.pixdim[1..4].iter().enumerate() {
        let n = a[..3].iter().map(|row| row[c] * row[c]).sum::<f64>().sqrt();
        assert!((f64::from(*p) - n).abs() < 1e-5, "pixdim {c}");
    }
    // the spline filters keep the header as it is
    let j = d.ok("ndimage spline_filter --input v.nii --output f.nii --json");
    assert_eq!(j["header"], "kept");
    assert_eq!(kiln_io::read_volume(d.p("f.nii")).unwrap().header, inp.header);
}

#[test]
fn zoom_on_nifti_scales_the_voxel_sizes_and_keeps_the_covered_space() {
    let d = Dir::new();
    let shape = [9, 7, 5];
    let x = f32s(9 * 7 * 5, 4, -1.0, 1.0);
    write_nifti(&d.p("v.nii.gz"), &shape, x.clone());
    let json = d.ok("ndimage zoom --input v.nii.gz --zoom 2,1.5,0.6 --order 1 --output z.nii.gz --json");
    assert_eq!(json["header"], "scaled");
    let inp = kiln_io::read_volume(d.p("v.nii.gz")).unwrap();
    let out = kiln_io::read_volume(d.p("z.nii.gz")).unwrap();
    assert_eq!(out.data.shape(), &[18, 10, 3]);
    let o1 = opts(1, "constant", 0.0);
    let want = run(&x, &shape, |rt, t| {
        si::zoom(rt, t, &[2.0, 1.5, 0.6], false, &o1, DType::F32)
    });
    assert_eq!(bits(&flat(&out.data)), bits(&want.1));
    // scipy's factors: (in - 1) / (out - 1)
    let f = [8.0 / 17.0, 6.0 / 9.0, 4.0 / 2.0];
    for (j, fj) in f.iter().enumerate() {
        let want = f64::from(inp.header.pixdim[j + 1]) * fj;
        assert!(
            (f64::from(out.header.pixdim[j + 1]) - want).abs() < 1e-6,
            "pixdim {j}"
        );
    }
    // the first and last voxel centres stay where they were, under the sform and the qform
    let qf = |v: &kiln_io::Volume| {
        kiln_io::header_affine(&kiln_io::NiftiHeader {
            sform_code: 0,
            ..v.header.clone()
        })
    };
    for (a_in, a_out) in [(inp.affine(), out.affine()), (qf(&inp), qf(&out))] {
        for (vi, vo) in [([0.0; 3], [0.0; 3]), ([8.0, 6.0, 4.0], [17.0, 9.0, 2.0])] {
            let (p, q) = (world(&a_in, vi), world(&a_out, vo));
            for r in 0..3 {
                assert!((p[r] - q[r]).abs() < 1e-3, "{p:?} vs {q:?}");
            }
        }
    }
    assert_eq!(
        (
            out.header.qform_code,
            out.header.sform_code,
            out.header.xyzt_units
        ),
        (
            inp.header.qform_code,
            inp.header.sform_code,
            inp.header.xyzt_units
        )
    );
    // grid_mode: the outer edges stay (voxel -0.5 and n - 0.5)
    d.ok("ndimage zoom --input v.nii.gz --zoom 2 --grid-mode true --mode grid-constant --output g.nii");
    let g = kiln_io::read_volume(d.p("g.nii")).unwrap();
    let (p, q) = (
        world(&inp.affine(), [8.5, 6.5, 4.5]),
        world(&g.affine(), [17.5, 13.5, 9.5]),
    );
    for r in 0..3 {
        assert!((p[r] - q[r]).abs() < 1e-3, "{p:?} vs {q:?}");
    }
}

#[test]
fn a_batch_directory_is_resampled_file_by_file() {
    let d = Dir::new();
    std::fs::create_dir(d.p("in")).unwrap();
    let (a, b) = (f32s(5 * 8, 1, 0.0, 1.0), f32s(6 * 3, 2, 0.0, 1.0));
    write_npy(&d.p("in/a.npy"), &[5, 8], a.clone());
    write_npy(&d.p("in/b.npy"), &[6, 3], b.clone());
    d.ok("ndimage zoom --input in --zoom 2 --order 1 --output out");
    let o1 = opts(1, "constant", 0.0);
    same_npy(
        &d,
        "out/a.npy",
        &run(&a, &[5, 8], |rt, t| {
            si::zoom(rt, t, &[2.0, 2.0], false, &o1, DType::F32)
        }),
    );
    same_npy(
        &d,
        "out/b.npy",
        &run(&b, &[6, 3], |rt, t| {
            si::zoom(rt, t, &[2.0, 2.0], false, &o1, DType::F32)
        }),
    );
}

#[test]
fn bad_interpolation_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    write_npy(&d.p("in.npy"), &[9, 7], f32s(63, 3, 0.0, 1.0));
    write_npy(&d.p("v.npy"), &[5, 4, 3], f32s(60, 3, 0.0, 1.0));
    write_npy_f64(&d.p("m4.npy"), &[2, 5], &[1.0; 10]);
    for (line, needle) in [
        ("zoom --zoom 0", "every factor must be > 0"),
        ("zoom --zoom 1,-2", "every factor must be > 0"),
        ("zoom --zoom 1,2,3", "3 values for 2-D data"),
        ("zoom --zoom 0.01", "gives 0 samples"),
        ("zoom --zoom 2 --order 6", "the spline order is 0 to 5"),
        ("zoom --zoom 2 --mode reflect101", "not an interpolation mode"),
        ("shift --shift 1 --mode edge", "not an interpolation mode"),
        (
            "zoom --zoom 2 --mode reflect --cval 3",
            "--cval 3 applies to --mode constant",
        ),
        ("zoom --zoom nan", "not a finite number"),
        ("zoom", "zoom needs --zoom"),
        ("rotate --axes 0,1", "rotate needs --angle"),
        ("rotate --angle 10 --axes 0,2", "invalid rotation plane"),
        ("rotate --angle 10 --axes 1,1", "one axis twice"),
        ("rotate --angle 10 --reshape maybe", "true or false"),
        ("affine_transform --matrix m4.npy", "a matrix of shape [2, 5]"),
        ("affine_transform --matrix 1,2,3", "a matrix of shape [3]"),
        (
            "affine_transform --matrix 1,0;0,1;0,1",
            "a matrix of shape [3, 2]",
        ),
        ("affine_transform --matrix 1,0,0;0,1,0;1,0,1", "bottom row"),
        ("affine_transform --matrix 1,0;0,1,2", "different lengths"),
        (
            "affine_transform --matrix 1,0;0,1 --output-shape 4,0",
            "an axis of length 0",
        ),
        (
            "affine_transform --matrix 1,0;0,1 --output-shape 4,5,6",
            "3 axes for 2-D data",
        ),
        (
            "affine_transform --matrix 1,0;0,1 --offset 1,2,3",
            "3 offsets for 2 axes",
        ),
        ("spline_filter --order 1", "orders 2 to 5"),
        ("spline_filter1d --axis 2", "out of bounds"),
        ("zoom --zoom 2 --sigma 1", "zoom does not take --sigma"),
        ("shift --shift 1 --angle 3", "shift does not take --angle"),
        ("gaussian_filter --sigma 1 --zoom 2", "does not take --zoom"),
        (
            "median_filter --size 3 --prefilter false",
            "does not take --prefilter",
        ),
        (
            "zoom --zoom 2 --readers 2",
            "--readers is not used by interpolation",
        ),
    ] {
        d.fails(&format!("ndimage {line} --input in.npy --output out.npy"), needle);
    }
    d.fails(
        "ndimage affine_transform --input v.npy --matrix 1,0;0,1 --output out.npy",
        "a matrix of shape [2, 2]",
    );
    d.fails(
        "ndimage zoom --input v.npy --zoom 2 --output out.png",
        "unknown file extension",
    );
    d.fails(
        "ndimage zoom --input in.npy --zoom 2 --output in.npy",
        "is the input file",
    );
}

/// On a CUDA device (`--device cuda`): the same bits as the CPU facade, for a 2-D rotate and
/// zoom of each order class, a 3-D rotate (plane by plane) and a NIfTI zoom.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn on_cuda_the_cli_gives_the_cpu_bits() {
    if !kiln::testing::gpu_or_skip("on_cuda_the_cli_gives_the_cpu_bits") {
        return;
    }
    let d = Dir::new();
    let x = f32s(13 * 9, 41, -40.0, 90.0);
    write_npy(&d.p("in.npy"), &[13, 9], x.clone());
    let v = f32s(7 * 6 * 5, 42, -1.0, 1.0);
    write_npy(&d.p("v.npy"), &[7, 6, 5], v.clone());
    let o = |order: usize, mode: &str| opts(order, mode, 0.0);
    type Case<'a> = (&'a str, &'a str, &'a [f32], &'a [usize], Box<Op>);
    let cases: Vec<Case> = vec![
        (
            "rotate --angle 30 --order 1",
            "in.npy",
            &x,
            &[13, 9],
            Box::new(move |rt, t| si::rotate(rt, t, 30.0, [1, 0], true, &o(1, "constant"), DType::F32)),
        ),
        (
            "rotate --angle -50 --mode nearest",
            "in.npy",
            &x,
            &[13, 9],
            Box::new(move |rt, t| si::rotate(rt, t, -50.0, [1, 0], true, &o(3, "nearest"), DType::F32)),
        ),
        (
            "zoom --zoom 1.7,0.6 --order 5 --mode grid-constant",
            "in.npy",
            &x,
            &[13, 9],
            Box::new(move |rt, t| si::zoom(rt, t, &[1.7, 0.6], false, &o(5, "grid-constant"), DType::F32)),
        ),
        (
            "rotate --angle 25",
            "v.npy",
            &v,
            &[7, 6, 5],
            Box::new(move |rt, t| si::rotate(rt, t, 25.0, [1, 0], true, &o(3, "constant"), DType::F32)),
        ),
        (
            "affine_transform --matrix 1,0.1,0,0.5;0,0.9,0.2,-1;0.05,0,1.1,0 --order 2 --mode mirror",
            "v.npy",
            &v,
            &[7, 6, 5],
            Box::new(move |rt, t| {
                let m = AffineMatrix {
                    values: vec![1.0, 0.1, 0.0, 0.5, 0.0, 0.9, 0.2, -1.0, 0.05, 0.0, 1.1, 0.0],
                    shape: vec![3, 4],
                };
                si::affine_transform(rt, t, &m, &[0.0], None, &o(2, "mirror"), DType::F32)
            }),
        ),
    ];
    for (i, (line, input, data, shape, f)) in cases.iter().enumerate() {
        let out = format!("g{i}.npy");
        let json = d.ok(&format!(
            "--device cuda ndimage {line} --input {input} --output {out} --json"
        ));
        // --device cuda exits 3 when no GPU can be used: a result here ran on one
        assert!(json["fallback_reason"].is_null(), "{json}");
        same_npy(&d, &out, &run(data, shape, f));
    }
}
