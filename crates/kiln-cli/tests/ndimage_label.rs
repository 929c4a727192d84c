//! `kiln ndimage label | find_objects | watershed_ift | distance_transform_edt | _cdt | _bf`
//! end to end: small arrays with known results (scipy's, worked out by hand), random ones
//! against the facade's functions (`kiln::core::imaging`, which kiln.ndimage's Python layer
//! calls and the Python suite checks against scipy), the file types (int32/float64 `.npy`,
//! 16-bit PNG, NIfTI float32 with the input's header), batches, and bad input with exit 4
//! and nothing written.
#![allow(clippy::unwrap_used)]

mod filter_support;
use filter_support::*;
use kiln::core::imaging::distance::{bf, cdt, edt, feature_planes, BfDistances, BfMetric};
use kiln::core::imaging::label::{label, Structure};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};

fn read_i32(p: &Path) -> (Vec<usize>, Vec<i32>) {
    let a = ArrayD::<i32>::read_npy(std::fs::File::open(p).unwrap()).unwrap();
    (a.shape().to_vec(), a.iter().copied().collect())
}

fn read_f64(p: &Path) -> (Vec<usize>, Vec<f64>) {
    let a = ArrayD::<f64>::read_npy(std::fs::File::open(p).unwrap()).unwrap();
    (a.shape().to_vec(), a.iter().copied().collect())
}

fn write_typed<T: ndarray_npy::WritableElement>(p: &Path, shape: &[usize], v: Vec<T>) {
    let a = ArrayD::from_shape_vec(IxDyn(shape), v).unwrap();
    a.write_npy(std::fs::File::create(p).unwrap()).unwrap();
}

/// A 0/1 mask from a picture: `#` is 1.
fn mask(rows: &[&str]) -> (Vec<usize>, Vec<u8>) {
    let v = rows
        .iter()
        .flat_map(|r| r.bytes().map(|b| u8::from(b == b'#')))
        .collect();
    (vec![rows.len(), rows[0].len()], v)
}

const PICTURE: &[&str] = &["##..#", "#...#", "..#..", ".#..#", "....#"];

#[test]
fn label_gives_scipys_labels_for_both_connectivities() {
    let d = Dir::new();
    let (shape, m) = mask(PICTURE);
    write_typed(&d.p("m.npy"), &shape, m.clone());
    let j = d.ok("ndimage label --input m.npy --output l.npy --json");
    assert_eq!(j["num_features"], 5, "{j}");
    assert_eq!(j["output_type"], "int32");
    let (s, l) = read_i32(&d.p("l.npy"));
    assert_eq!(s, shape);
    #[rustfmt::skip]
    let want = vec![
        1, 1, 0, 0, 2,
        1, 0, 0, 0, 2,
        0, 0, 3, 0, 0,
        0, 4, 0, 0, 5,
        0, 0, 0, 0, 5,
    ];
    assert_eq!(l, want);
    // connectivity 2 joins the diagonal pair (2,2)-(3,1)
    let j = d.ok("ndimage label --input m.npy --connectivity 2 --output l2.npy --json");
    assert_eq!(j["num_features"], 4);
    let (_, l2) = read_i32(&d.p("l2.npy"));
    assert_eq!(l2[2 * 5 + 2], l2[3 * 5 + 1]);
    // a structure file: the same as connectivity 2
    write_typed(&d.p("s.npy"), &[3, 3], vec![true; 9]);
    d.ok("ndimage label --input m.npy --structure s.npy --output l3.npy");
    assert_eq!(read_i32(&d.p("l3.npy")).1, l2);
}

#[test]
fn label_of_random_masks_equals_the_facade_in_every_file_type() {
    let d = Dir::new();
    let shape = [37, 23];
    let m: Vec<u8> = values(37 * 23, 7, 0.0, 1.0)
        .iter()
        .map(|&v| u8::from(v > 0.55))
        .collect();
    let mut want = vec![0i32; m.len()];
    let n = label(&m, &shape, &Structure::connectivity(2, 1).unwrap(), &mut want).unwrap();
    write_img(
        &d.p("m.png"),
        37,
        23,
        1,
        m.iter().map(|&v| f32::from(v) * 255.0).collect(),
        SampleType::U8,
    );
    let j = d.ok("ndimage label --input m.png --output l.npy --json");
    assert_eq!(j["num_features"], n);
    assert_eq!(read_i32(&d.p("l.npy")).1, want);
    // 16-bit PNG output
    let j = d.ok("ndimage label --input m.png --output l.png --json");
    assert_eq!(j["output_type"], "u16");
    let img = read_img(&d.p("l.png"));
    assert_eq!(img.sample_type, SampleType::U16);
    assert_eq!(pixels(&img), want.iter().map(|&v| v as f32).collect::<Vec<_>>());
    // a 3-D NIfTI keeps its header; labels stored as float32
    let shape3 = [6, 5, 4];
    let m3: Vec<u8> = values(120, 9, 0.0, 1.0)
        .iter()
        .map(|&v| u8::from(v > 0.5))
        .collect();
    let mut want3 = vec![0i32; 120];
    let n3 = label(&m3, &shape3, &Structure::connectivity(3, 3).unwrap(), &mut want3).unwrap();
    let vol = Volume {
        data: ArrayD::from_shape_vec(IxDyn(&shape3), m3.iter().map(|&v| f32::from(v)).collect()).unwrap(),
        header: oblique_header(),
        ..Volume::new(ArrayD::zeros(IxDyn(&[1, 1, 1])))
    };
    kiln_io::write_volume(d.p("m.nii.gz"), &vol).unwrap();
    let j = d.ok("ndimage label --input m.nii.gz --connectivity 3 --output l.nii.gz --json");
    assert_eq!(j["num_features"], n3);
    assert_eq!(j["output_type"], "f32");
    let back = kiln_io::read_volume(d.p("l.nii.gz")).unwrap();
    assert_eq!(
        flat(&back.data),
        want3.iter().map(|&v| v as f32).collect::<Vec<_>>()
    );
    assert_eq!(back.affine(), vol.affine());
    assert_eq!(back.header.pixdim, vol.header.pixdim);
}

#[test]
fn label_refuses_more_labels_than_a_16bit_png_holds() {
    let d = Dir::new();
    // a checkerboard: every foreground pixel its own group under connectivity 1
    let (h, w) = (400, 400);
    let m: Vec<f32> = (0..h * w)
        .map(|i| if (i / w + i % w) % 2 == 0 { 255.0 } else { 0.0 })
        .collect();
    write_img(&d.p("c.png"), h, w, 1, m, SampleType::U8);
    d.fails(
        "ndimage label --input c.png --output l.png",
        "a 16-bit image holds 0 to 65535",
    );
    let j = d.ok("ndimage label --input c.png --output l.npy --json");
    assert_eq!(j["num_features"], 80000);
}

#[test]
fn find_objects_prints_scipys_slices() {
    let d = Dir::new();
    #[rustfmt::skip]
    let l: Vec<i32> = vec![
        1, 1, 0, 0, 0,
        0, 1, 0, 3, 3,
        0, 0, 0, 3, 0,
    ];
    write_typed(&d.p("l.npy"), &[3, 5], l);
    let j = d.ok("ndimage find_objects --input l.npy --json");
    assert_eq!(
        j["objects"],
        serde_json::json!([[[0, 2], [0, 2]], null, [[1, 3], [3, 5]]])
    );
    let j = d.ok("ndimage find_objects --input l.npy --max-label 1 --json");
    assert_eq!(j["objects"], serde_json::json!([[[0, 2], [0, 2]]]));
    let o = d.kiln("ndimage find_objects --input l.npy");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1 [0:2, 0:2]\n2 None\n3 [1:3, 3:5]\n"
    );
}

#[test]
fn watershed_ift_equals_the_facade() {
    let d = Dir::new();
    let shape = [11, 13];
    let x: Vec<u8> = values(143, 5, 0.0, 256.0).iter().map(|&v| v as u8).collect();
    let mut mk = vec![0i32; 143];
    mk[0] = -1;
    mk[5 * 13 + 6] = 1;
    mk[10 * 13 + 12] = 2;
    let want = kiln::core::imaging::watershed::watershed_ift(
        &x.iter().map(|&v| u16::from(v)).collect::<Vec<_>>(),
        &shape,
        Structure::connectivity(2, 1).unwrap().mask(),
        &mk,
        kiln::core::imaging::watershed::StoredLabel::Wide,
    )
    .unwrap();
    write_typed(&d.p("x.npy"), &shape, x);
    write_typed(&d.p("mk.npy"), &shape, mk);
    d.ok("ndimage watershed_ift --input x.npy --markers mk.npy --output w.npy");
    assert_eq!(read_i32(&d.p("w.npy")).1, want);
    assert!(want.contains(&1) && want.contains(&2) && want.contains(&-1));
}

#[test]
fn distance_transforms_give_known_values_and_the_facades() {
    let d = Dir::new();
    write_typed(&d.p("r.npy"), &[1, 7], vec![0u8, 1, 1, 1, 1, 1, 0]);
    d.ok("ndimage distance_transform_edt --input r.npy --output e.npy");
    assert_eq!(read_f64(&d.p("e.npy")).1, vec![0.0, 1.0, 2.0, 3.0, 2.0, 1.0, 0.0]);
    d.ok("ndimage distance_transform_edt --input r.npy --sampling 1,0.5 --output e2.npy");
    assert_eq!(
        read_f64(&d.p("e2.npy")).1,
        vec![0.0, 0.5, 1.0, 1.5, 1.0, 0.5, 0.0]
    );
    d.ok("ndimage distance_transform_cdt --input r.npy --output c.npy");
    assert_eq!(read_i32(&d.p("c.npy")).1, vec![0, 1, 2, 3, 2, 1, 0]);
    // a single background pixel in a 3x3: chessboard 1 all round, taxicab 2 at the corners
    let (shape, m) = mask(&["###", "#.#", "###"]);
    write_typed(&d.p("b.npy"), &shape, m.clone());
    d.ok("ndimage distance_transform_cdt --input b.npy --output cb.npy");
    assert_eq!(read_i32(&d.p("cb.npy")).1, vec![1, 1, 1, 1, 0, 1, 1, 1, 1]);
    d.ok("ndimage distance_transform_cdt --input b.npy --metric taxicab --output ct.npy");
    assert_eq!(read_i32(&d.p("ct.npy")).1, vec![2, 1, 2, 1, 0, 1, 2, 1, 2]);
    let j = d.ok("ndimage distance_transform_bf --input b.npy --metric chessboard --output bc.npy --json");
    assert_eq!(j["output_type"], "uint32");
    let a = ArrayD::<u32>::read_npy(std::fs::File::open(d.p("bc.npy")).unwrap()).unwrap();
    assert_eq!(
        a.iter().copied().collect::<Vec<_>>(),
        vec![1, 1, 1, 1, 0, 1, 1, 1, 1]
    );
    d.ok("ndimage distance_transform_bf --input b.npy --output be.npy --return-indices bi.npy");
    let r2 = 2f64.sqrt();
    assert_eq!(
        read_f64(&d.p("be.npy")).1,
        vec![r2, 1.0, r2, 1.0, 0.0, 1.0, r2, 1.0, r2]
    );
    let (s, ix) = read_i32(&d.p("bi.npy"));
    assert_eq!((s, ix), (vec![2, 3, 3], [vec![1; 9], vec![1; 9]].concat()));

    // random 3-D masks against the facade, indices included
    let shape = [7, 6, 5];
    let m: Vec<u8> = values(210, 3, 0.0, 1.0)
        .iter()
        .map(|&v| u8::from(v > 0.2))
        .collect();
    write_typed(&d.p("m.npy"), &shape, m.clone());
    let sp = [1.5, 1.0, 0.75];
    let want = edt(&m, &shape, Some(&sp), true, true).unwrap();
    d.ok("ndimage distance_transform_edt --input m.npy --sampling 1.5,1,0.75 --output d.npy --return-indices i.npy");
    assert_eq!(read_f64(&d.p("d.npy")).1, want.distances.unwrap());
    let (s, ix) = read_i32(&d.p("i.npy"));
    assert_eq!(s, vec![3, 7, 6, 5]);
    assert_eq!(ix, want.indices.unwrap());
    let want = cdt(&m, &shape, Structure::connectivity(3, 1).unwrap().mask(), true).unwrap();
    d.ok("ndimage distance_transform_cdt --input m.npy --metric taxicab --output c3.npy --return-indices ci.npy");
    assert_eq!(read_i32(&d.p("c3.npy")).1, want.distances);
    assert_eq!(
        read_i32(&d.p("ci.npy")).1,
        feature_planes(&want.features.unwrap(), &shape)
    );
    let want = bf(&m, &shape, BfMetric::Euclidean, None, true, false).unwrap();
    d.ok("ndimage distance_transform_bf --input m.npy --output b3.npy");
    let Some(BfDistances::F64(w)) = want.distances else {
        panic!()
    };
    assert_eq!(read_f64(&d.p("b3.npy")).1, w);
    // NIfTI: float32, the header kept
    let vol = Volume {
        data: ArrayD::from_shape_vec(IxDyn(&shape), m.iter().map(|&v| f32::from(v)).collect()).unwrap(),
        header: oblique_header(),
        ..Volume::new(ArrayD::zeros(IxDyn(&[1, 1, 1])))
    };
    kiln_io::write_volume(d.p("m.nii"), &vol).unwrap();
    d.ok("ndimage distance_transform_edt --input m.nii --output d.nii");
    let back = kiln_io::read_volume(d.p("d.nii")).unwrap();
    let want = edt(&m, &shape, None, true, false).unwrap().distances.unwrap();
    assert_eq!(
        flat(&back.data),
        want.iter().map(|&v| v as f32).collect::<Vec<_>>()
    );
    assert_eq!(back.affine(), vol.affine());
}

#[test]
fn label_and_distances_run_a_batch_file_by_file() {
    let d = Dir::new();
    std::fs::create_dir(d.p("in")).unwrap();
    for (i, rows) in [PICTURE, &["#.#", "...", "#.#"]].iter().enumerate() {
        let (shape, m) = mask(rows);
        write_typed(&d.p(&format!("in/m{i}.npy")), &shape, m);
    }
    let j = d.ok("ndimage label --input in --output out --json");
    assert_eq!(
        (j["files"].clone(), j["succeeded"].clone()),
        (2.into(), 2.into()),
        "{j}"
    );
    assert_eq!(j["results"][0]["num_features"], 5);
    assert_eq!(j["results"][1]["num_features"], 4);
    assert_eq!(read_i32(&d.p("out/m1.npy")).1, vec![1, 0, 2, 0, 0, 0, 3, 0, 4]);
    d.ok("ndimage distance_transform_edt --input in --output dist");
    assert_eq!(
        read_f64(&d.p("dist/m1.npy")).1,
        vec![1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    );
}

#[test]
fn bad_input_exits_4_names_the_flag_and_writes_nothing() {
    let d = Dir::new();
    let (shape, m) = mask(PICTURE);
    write_typed(&d.p("m.npy"), &shape, m);
    write_typed(&d.p("s2.npy"), &[2, 2], vec![true; 4]);
    write_typed(
        &d.p("lop.npy"),
        &[3, 3],
        vec![true, true, false, false, true, false, false, false, false],
    );
    write_typed(&d.p("fl.npy"), &[5, 5], vec![0.5f64; 25]);
    write_typed(&d.p("mk.npy"), &[4, 4], vec![1i32; 16]);
    write_img(&d.p("rgb.png"), 2, 2, 3, vec![0.0; 12], SampleType::U8);
    for (line, needle) in [
        ("label --input m.npy", "label needs --output"),
        ("label --input m.npy --output l.txt", "unknown file extension"),
        (
            "label --input m.npy --structure s2.npy --output l.npy",
            "the structure is 3x3",
        ),
        (
            "label --input m.npy --structure lop.npy --output l.npy",
            "not centrosymmetric",
        ),
        (
            "label --input m.npy --structure lop.npy --connectivity 1 --output l.npy",
            "not both",
        ),
        (
            "label --input m.npy --connectivity 0 --output l.npy",
            "connectivity 0",
        ),
        (
            "label --input m.npy --sigma 2 --output l.npy",
            "label does not take --sigma",
        ),
        ("label --input m.npy --output l.nii", "3-D/4-D"),
        ("label --input rgb.png --output l.npy", "3 channels"),
        ("label --input missing.npy --output l.npy", "missing.npy"),
        (
            "gaussian_filter --input m.npy --sigma 1 --sampling 1 --output g.npy",
            "does not take --sampling",
        ),
        (
            "zoom --input m.npy --zoom 2 --labels m.npy --output g.npy",
            "does not take --labels",
        ),
        ("find_objects --input m.npy --output o.npy", "writes no file"),
        ("find_objects --input fl.npy", "whole numbers"),
        (
            "watershed_ift --input fl.npy --markers mk.npy --output w.npy",
            "uint8 or uint16",
        ),
        ("watershed_ift --input rgb.png --output w.npy", "3 channels"),
        (
            "distance_transform_edt --input m.npy --output e.png",
            "write .npy (float64)",
        ),
        (
            "distance_transform_edt --input m.npy --sampling 1,2,3 --output e.npy",
            "3 values for 2-D data",
        ),
        (
            "distance_transform_edt --input m.npy --sampling 0 --output e.npy",
            "finite and > 0",
        ),
        (
            "distance_transform_edt --input m.npy --metric taxicab --output e.npy",
            "does not take --metric",
        ),
        (
            "distance_transform_cdt --input m.npy --metric euclidean --output e.npy",
            "chessboard and taxicab",
        ),
        (
            "distance_transform_cdt --input m.npy --sampling 2 --output e.npy",
            "does not take --sampling",
        ),
        (
            "distance_transform_bf --input m.npy --metric hamming --output e.npy",
            "euclidean, taxicab",
        ),
        (
            "distance_transform_edt --input m.npy --output e.npy --return-indices i.png",
            "write .npy",
        ),
        (
            "distance_transform_edt --input m.npy --output e.npy --return-indices e.npy",
            "the same file",
        ),
    ] {
        d.fails(&format!("ndimage {line}"), needle);
    }
    // watershed: markers of another shape, and a missing --markers
    let x: Vec<u8> = vec![1; 25];
    write_typed(&d.p("x.npy"), &[5, 5], x);
    d.fails(
        "ndimage watershed_ift --input x.npy --markers mk.npy --output w.npy",
        "they must match",
    );
    d.fails(
        "ndimage watershed_ift --input x.npy --output w.npy",
        "needs --markers",
    );
}
