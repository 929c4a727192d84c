//! `kiln ndimage measure` (and the statistics by scipy's names) and `map_coordinates` end to
//! end: the measurements of a small labelled array against values worked out by scipy's
//! rules (the arithmetic in the same order, so equal to the bit), the table and the JSON;
//! map_coordinates against known bilinear values and against the facade's `shift` (the same
//! resampling at the shifted grid's coordinates, the prefilter and padding included); bad
//! input with exit 4 and nothing written.
#![allow(clippy::unwrap_used)]

mod filter_support;
use filter_support::*;
use kiln::ndimage::scipy_interp::{self as si, InterpOptions};
use kiln::{DType, Runtime};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};

fn write_typed<T: ndarray_npy::WritableElement>(p: &Path, shape: &[usize], v: Vec<T>) {
    let a = ArrayD::from_shape_vec(IxDyn(shape), v).unwrap();
    a.write_npy(std::fs::File::create(p).unwrap()).unwrap();
}

fn read_any<T: ndarray_npy::ReadableElement + Copy>(p: &Path) -> (Vec<usize>, Vec<T>) {
    let a = ArrayD::<T>::read_npy(std::fs::File::open(p).unwrap()).unwrap();
    (a.shape().to_vec(), a.iter().copied().collect())
}

/// x = 1..12 in a 3x4, three labelled regions (label 4 absent).
fn setup(d: &Dir) {
    write_typed(&d.p("x.npy"), &[3, 4], (1..=12).map(f64::from).collect());
    #[rustfmt::skip]
    let l: Vec<i32> = vec![
        1, 1, 0, 2,
        1, 0, 2, 2,
        0, 0, 3, 3,
    ];
    write_typed(&d.p("l.npy"), &[3, 4], l);
}

fn var(v: &[f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64
}

#[test]
fn measure_gives_scipys_statistics_per_label() {
    let d = Dir::new();
    setup(&d);
    let j = d.ok(
        "ndimage measure --input x.npy --labels l.npy --index 1,2,3,4 --stats \
         sum,mean,variance,standard_deviation,minimum,maximum,median,minimum_position,\
         maximum_position,center_of_mass,extrema --json",
    );
    let r = &j["results"];
    assert_eq!(r.as_array().unwrap().len(), 4, "{j}");
    let one = &r[0];
    assert_eq!(one["label"], 1);
    assert_eq!(one["count"], 3);
    assert_eq!(one["sum"], 8.0);
    assert_eq!(one["mean"], 8.0 / 3.0);
    assert_eq!(one["variance"], var(&[1.0, 2.0, 5.0]));
    assert_eq!(one["standard_deviation"], var(&[1.0, 2.0, 5.0]).sqrt());
    assert_eq!(
        (one["minimum"].clone(), one["maximum"].clone()),
        (1.0.into(), 5.0.into())
    );
    assert_eq!(one["median"], 2.0);
    assert_eq!(one["minimum_position"], serde_json::json!([0, 0]));
    assert_eq!(one["maximum_position"], serde_json::json!([1, 0]));
    assert_eq!(one["center_of_mass"], serde_json::json!([5.0 / 8.0, 2.0 / 8.0]));
    assert_eq!(one["extrema"], serde_json::json!([1.0, 5.0, [0, 0], [1, 0]]));
    assert_eq!(r[1]["median"], 7.0);
    assert_eq!(r[1]["maximum_position"], serde_json::json!([1, 3]));
    assert_eq!(r[2]["median"], 11.5);
    assert_eq!(
        r[2]["center_of_mass"],
        serde_json::json!([2.0, (11.0 * 2.0 + 12.0 * 3.0) / 23.0])
    );
    // label 4 has no element
    assert_eq!(
        (r[3]["count"].clone(), r[3]["sum"].clone()),
        (0.into(), 0.0.into())
    );
    assert!(r[3]["mean"].is_null() && r[3]["minimum_position"].is_null());
}

#[test]
fn index_rules_and_the_named_functions_follow_scipy() {
    let d = Dir::new();
    setup(&d);
    // no labels: the whole input; labels without index: every label above 0 as one region
    let j = d.ok("ndimage sum --input x.npy --json");
    assert_eq!(j["results"][0]["sum"], 78.0);
    assert!(j["results"][0]["label"].is_null());
    let j = d.ok("ndimage sum_labels --input x.npy --labels l.npy --json");
    assert_eq!(j["results"][0]["sum"], 50.0);
    let j = d.ok("ndimage mean --input x.npy --labels l.npy --index 2 --json");
    assert_eq!(j["results"][0]["mean"], 19.0 / 3.0);
    let j = d.ok("ndimage maximum --input x.npy --labels l.npy --index all --json");
    let labels: Vec<i64> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_i64().unwrap())
        .collect();
    assert_eq!(labels, vec![1, 2, 3]);
    assert_eq!(j["results"][2]["maximum"], 12.0);
    // the table
    let o =
        d.kiln("ndimage measure --input x.npy --labels l.npy --index 1,3 --stats minimum,minimum_position");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "label\tcount\tminimum\tminimum_position\n1\t3\t1.0\t(0, 0)\n3\t2\t11.0\t(2, 2)\n"
    );
    // an 8-bit PNG with PNG labels: the stored values are measured
    write_img(
        &d.p("x.png"),
        3,
        4,
        1,
        (1..=12).map(|v| v as f32 * 10.0).collect(),
        SampleType::U8,
    );
    let j = d.ok("ndimage mean --input x.png --labels l.npy --index 3 --json");
    assert_eq!(j["results"][0]["mean"], 115.0);
}

#[test]
fn map_coordinates_gives_bilinear_values_and_the_facades_resampling() {
    let d = Dir::new();
    // x[i][j] = 10 i + j, float32
    write_npy(
        &d.p("x.npy"),
        &[3, 4],
        (0..12).map(|k| (10 * (k / 4) + k % 4) as f32).collect(),
    );
    // three points: (0.5, 0.5), (1, 2.25), (-2, 0) outside
    write_typed(&d.p("c.npy"), &[2, 3], vec![0.5, 1.0, -2.0, 0.5, 2.25, 0.0]);
    let j = d.ok(
        "ndimage map_coordinates --input x.npy --coordinates c.npy --order 1 --cval 7 --output o.npy --json",
    );
    assert_eq!(j["output_type"], "float32");
    assert_eq!(j["output_shape"], serde_json::json!([3]));
    let (s, v) = read_any::<f32>(&d.p("o.npy"));
    assert_eq!((s, v), (vec![3], vec![5.5, 12.25, 7.0]));
    d.ok("ndimage map_coordinates --input x.npy --coordinates c.npy --order 0 --output o0.npy");
    // order 0 takes the nearest sample, halves rounded up (scipy's floor(c + 0.5))
    assert_eq!(read_any::<f32>(&d.p("o0.npy")).1, vec![11.0, 12.0, 0.0]);

    // the shifted grid's coordinates give the facade's shift, cubic, for each mode
    let shape = [9, 11];
    let x = f32s(99, 17, -5.0, 20.0);
    write_npy(&d.p("r.npy"), &shape, x.clone());
    let (sh0, sh1) = (0.3, -0.7);
    let mut c = Vec::new();
    for axis in 0..2 {
        for i in 0..9 {
            for j in 0..11 {
                c.push(if axis == 0 { i as f64 - sh0 } else { j as f64 - sh1 });
            }
        }
    }
    write_typed(&d.p("g.npy"), &[2, 9, 11], c);
    let rt = Runtime::cpu();
    let t = rt.tensor(&x, &shape).unwrap();
    for (mode, cval) in [
        ("nearest", None),
        ("mirror", None),
        ("grid-constant", Some(2.5)),
        ("constant", None),
    ] {
        let o = InterpOptions {
            order: 3,
            mode: si::interp_mode(mode).unwrap(),
            cval: cval.unwrap_or(0.0),
            prefilter: true,
        };
        let want = si::shift(&rt, &t, &[sh0, sh1], &o, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let cv = cval.map(|c| format!(" --cval {c}")).unwrap_or_default();
        d.ok(&format!(
            "ndimage map_coordinates --input r.npy --coordinates g.npy --mode {mode}{cv} --output m.npy"
        ));
        let (s, got) = read_any::<f32>(&d.p("m.npy"));
        assert_eq!(s, shape.to_vec(), "{mode}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{mode}");
    }
    // NIfTI in and out: the values at 8 points, a default header (no world transform)
    let v: Vec<f32> = (0..60).map(|k| k as f32).collect();
    let mut vol = Volume::new(ArrayD::from_shape_vec(IxDyn(&[5, 4, 3]), v).unwrap());
    vol.header = oblique_header();
    kiln_io::write_volume(d.p("v.nii"), &vol).unwrap();
    // points (i, j, k) = (1 + a, 2 - b, c) for a, b, c in 0..2
    let mut c3 = Vec::new();
    for axis in 0..3 {
        for p in 0..8 {
            let (a, b, c) = (p / 4, p / 2 % 2, p % 2);
            c3.push([1.0 + a as f64, 2.0 - b as f64, c as f64][axis]);
        }
    }
    write_typed(&d.p("p.npy"), &[3, 2, 2, 2], c3);
    d.ok("ndimage map_coordinates --input v.nii --coordinates p.npy --order 1 --output p.nii");
    let got = kiln_io::read_volume(d.p("p.nii")).unwrap();
    assert_eq!(got.data.shape(), &[2, 2, 2]);
    let want: Vec<f32> = (0..8)
        .map(|p| ((1 + p / 4) * 12 + (2 - p / 2 % 2) * 3 + p % 2) as f32)
        .collect();
    assert_eq!(flat(&got.data), want);
    assert_eq!((got.header.qform_code, got.header.sform_code), (0, 0));
    // an 8-bit image is stored as scipy stores uint8 (rounded, clipped)
    write_img(
        &d.p("x.png"),
        3,
        4,
        1,
        (0..12).map(|k| (k * 20) as f32).collect(),
        SampleType::U8,
    );
    write_typed(&d.p("h.npy"), &[2, 1], vec![0.0, 0.5]);
    let j =
        d.ok("ndimage map_coordinates --input x.png --coordinates h.npy --order 1 --output h8.npy --json");
    assert_eq!(j["output_type"], "uint8");
    assert_eq!(read_any::<u8>(&d.p("h8.npy")).1, vec![10]);
}

#[test]
fn bad_measure_and_map_coordinates_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    setup(&d);
    write_typed(&d.p("l35.npy"), &[3, 5], vec![1i32; 15]);
    write_typed(&d.p("lf.npy"), &[3, 4], vec![0.5f64; 12]);
    write_typed(&d.p("c3.npy"), &[3, 2], vec![0.0f64; 6]);
    write_typed(&d.p("cn.npy"), &[2, 1], vec![f64::NAN, 0.0]);
    write_typed(&d.p("c.npy"), &[2, 1], vec![0.0f64, 0.0]);
    for (line, needle) in [
        ("measure --input x.npy --labels l.npy", "measure needs --stats"),
        (
            "measure --input x.npy --labels l.npy --stats mode",
            "`mode` is not a statistic",
        ),
        (
            "mean --input x.npy --labels l.npy --stats sum",
            "mean does not take --stats",
        ),
        ("mean --input x.npy --index 1", "--index needs --labels"),
        ("mean --input x.npy --labels l35.npy", "they must match"),
        ("mean --input x.npy --labels lf.npy", "whole numbers"),
        ("mean --input x.npy --labels l.npy --index 1,x", "integer labels"),
        ("mean --input x.npy --labels l.npy --index 1,1", "listed twice"),
        (
            "mean --input x.npy --labels l.npy --output m.npy",
            "writes no file",
        ),
        (
            "mean --input x.npy --labels l.npy --sigma 1",
            "mean does not take --sigma",
        ),
        (
            "map_coordinates --input x.npy --output o.npy",
            "needs --coordinates",
        ),
        (
            "map_coordinates --input x.npy --coordinates c3.npy --output o.npy",
            "(2, ...)",
        ),
        (
            "map_coordinates --input x.npy --coordinates cn.npy --output o.npy",
            "must be finite",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy --mode nearest --cval 1 --output o.npy",
            "--cval 1 applies",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy --order 6 --output o.npy",
            "0 to 5",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy --mode edge --output o.npy",
            "not an interpolation mode",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy --output o.png",
            "write .npy",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy --zoom 2 --output o.npy",
            "does not take --zoom",
        ),
        (
            "map_coordinates --input x.npy --coordinates c.npy",
            "needs --output",
        ),
    ] {
        d.fails(&format!("ndimage {line}"), needle);
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn map_coordinates_on_cuda_gives_the_cpu_bits() {
    if !kiln::testing::gpu_or_skip("map_coordinates_on_cuda_gives_the_cpu_bits") {
        return;
    }
    let d = Dir::new();
    write_npy(&d.p("x.npy"), &[13, 9], f32s(13 * 9, 51, -40.0, 90.0));
    write_npy(&d.p("v.npy"), &[7, 6, 5], f32s(7 * 6 * 5, 52, -1.0, 1.0));
    // points inside and around the inputs, output shapes (4, 5) and (30,)
    let c2: Vec<f64> = values(2 * 20, 53, -2.0, 14.0);
    write_typed(&d.p("c2.npy"), &[2, 4, 5], c2);
    let c3: Vec<f64> = values(3 * 30, 54, -1.5, 8.0);
    write_typed(&d.p("c3.npy"), &[3, 30], c3);
    for (i, line) in [
        "--input x.npy --coordinates c2.npy",
        "--input x.npy --coordinates c2.npy --order 5 --mode nearest",
        "--input x.npy --coordinates c2.npy --order 2 --mode grid-constant --cval 3.5",
        "--input v.npy --coordinates c3.npy --order 1 --mode mirror",
        "--input v.npy --coordinates c3.npy --mode grid-wrap",
    ]
    .iter()
    .enumerate()
    {
        // --device cuda exits 3 when no GPU can be used: a result here ran on one
        let j = d.ok(&format!(
            "--device cuda ndimage map_coordinates {line} --output g{i}.npy --json"
        ));
        d.ok(&format!(
            "--device cpu ndimage map_coordinates {line} --output cpu{i}.npy"
        ));
        let (sg, g) = read_any::<f32>(&d.p(&format!("g{i}.npy")));
        // (not c{i}.npy: c2.npy and c3.npy are the coordinates)
        let (sc, c) = read_any::<f32>(&d.p(&format!("cpu{i}.npy")));
        assert_eq!(sg, sc, "{line}: {j}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&g), bits(&c), "{line}");
    }
}
