//! `kiln filter3d` end to end: NPY and NIfTI volumes made here (headers and affines kept, 4-D
//! series filtered volume by volume), the outputs checked against the naive float64
//! correlation of filter_support, and bad 3-D input checked for its exit code, its message
//! and the absence of any output.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod filter_support;
use filter_support::*;

#[test]
fn box3_on_a_9x7x5_nifti_keeps_the_header_and_affine() {
    let d = Dir::new();
    let shape = [9, 7, 5];
    let x = f32s(9 * 7 * 5, 12, -50.0, 50.0);
    write_nifti(&d.p("in.nii.gz"), &shape, x.clone());
    let json = d.ok("filter3d --input in.nii.gz --kernel box:3 --output out.nii.gz --json");
    assert_eq!(json["input_shape"], serde_json::json!([9, 7, 5]));
    assert_eq!(
        (json["mode"].as_str(), json["path"].as_str()),
        (Some("reflect"), Some("separable"))
    );
    assert!(json["device"].is_string() && json["seconds"].as_f64().is_some());
    let input = kiln_io::read_volume(d.p("in.nii.gz")).unwrap();
    let out = kiln_io::read_volume(d.p("out.nii.gz")).unwrap();
    assert_eq!(out.data.shape(), &shape);
    let (k, ks) = preset("box:3", 3);
    let want = correlate(&as_f64(&x), &shape, &k, ks, "reflect", 0.0);
    assert_close(&flat(&out.data), &want, &k, 50.0, "box:3 9x7x5");
    let (a, b) = (&input.header, &out.header);
    assert_eq!(out.affine(), input.affine());
    assert_eq!(
        (a.pixdim, a.qform_code, a.sform_code),
        (b.pixdim, b.qform_code, b.sform_code)
    );
    assert_eq!((a.srow_x, a.srow_y, a.srow_z), (b.srow_x, b.srow_y, b.srow_z));
    assert_eq!(
        [
            a.quatern_b,
            a.quatern_c,
            a.quatern_d,
            a.quatern_x,
            a.quatern_y,
            a.quatern_z
        ],
        [
            b.quatern_b,
            b.quatern_c,
            b.quatern_d,
            b.quatern_x,
            b.quatern_y,
            b.quatern_z
        ]
    );
    assert_eq!(
        (a.descrip.clone(), a.xyzt_units),
        (b.descrip.clone(), b.xyzt_units)
    );
    assert_eq!(out.stored_dtype(), Some(kiln_io::NiftiType::Float32));
}

#[test]
fn every_3d_preset_and_a_user_kernel_equal_the_reference() {
    let d = Dir::new();
    let shape = [6, 8, 7];
    let x = f32s(6 * 8 * 7, 13, -3.0, 3.0);
    write_npy(&d.p("v.npy"), &shape, x.clone());
    for name in [
        "box:3",
        "box:5",
        "box:7",
        "gaussian:0.5",
        "gaussian:0.8",
        "laplacian",
    ] {
        d.ok(&format!(
            "filter3d --input v.npy --kernel {name} --mode nearest --output o.npy"
        ));
        let (s, got, _) = read_npy(&d.p("o.npy"));
        assert_eq!(s, shape.to_vec());
        let (k, ks) = preset(name, 3);
        assert_close(
            &got,
            &correlate(&as_f64(&x), &shape, &k, ks, "nearest", 0.0),
            &k,
            3.0,
            name,
        );
    }
    let k = values(27, 14, -1.0, 1.0);
    write_npy_f64(&d.p("k.npy"), &[3, 3, 3], &k);
    // An .npy volume written as NIfTI gets a default header.
    d.ok("filter3d --input v.npy --kernel k.npy --mode constant --cval 1.5 --output o.nii");
    let out = kiln_io::read_volume(d.p("o.nii")).unwrap();
    assert_eq!(out.data.shape(), &shape);
    let want = correlate(&as_f64(&x), &shape, &k, 3, "constant", 1.5);
    assert_close(&flat(&out.data), &want, &k, 3.0, "user 3x3x3 constant 1.5");
}

#[test]
fn a_4d_nifti_is_filtered_volume_by_volume() {
    let d = Dir::new();
    let (s3, t) = ([6, 5, 4], 3);
    let x = f32s(6 * 5 * 4 * t, 15, -10.0, 10.0);
    write_nifti(&d.p("in.nii"), &[6, 5, 4, t], x.clone());
    let json = d.ok("filter3d --input in.nii --kernel gaussian:0.6 --mode wrap --output out.nii --json");
    assert_eq!(
        (json["items"].as_u64(), json["layout"].as_str()),
        (Some(t as u64), Some("volumes"))
    );
    let out = kiln_io::read_volume(d.p("out.nii")).unwrap();
    assert_eq!(out.data.shape(), &[6, 5, 4, t]);
    let input = kiln_io::read_volume(d.p("in.nii")).unwrap();
    assert_eq!(out.affine(), input.affine());
    let (k, ks) = preset("gaussian:0.6", 3);
    for ti in 0..t {
        let vin: Vec<f64> = input
            .data
            .index_axis(ndarray::Axis(3), ti)
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let vout: Vec<f32> = out
            .data
            .index_axis(ndarray::Axis(3), ti)
            .iter()
            .copied()
            .collect();
        assert_close(
            &vout,
            &correlate(&vin, &s3, &k, ks, "wrap", 0.0),
            &k,
            10.0,
            &format!("t={ti}"),
        );
    }
    // The volumes differ, so mixing them up would fail.
    assert!(max_abs(&x) > 0.0);
}

// ---- bad input ---------------------------------------------------------------------------

#[test]
fn bad_3d_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    write_nifti(&d.p("v.nii"), &[5, 4, 3], f32s(60, 18, 0.0, 1.0));
    write_nifti(&d.p("v.nii.gz"), &[5, 4, 3], f32s(60, 19, 0.0, 1.0));
    let nii = std::fs::read(d.p("v.nii")).unwrap();
    std::fs::write(d.p("trunc.nii"), &nii[..nii.len() - 40]).unwrap();
    let gz = std::fs::read(d.p("v.nii.gz")).unwrap();
    std::fs::write(d.p("trunc.nii.gz"), &gz[..gz.len() / 2]).unwrap();
    std::fs::write(d.p("junk.nii"), vec![7u8; 400]).unwrap();
    write_npy(&d.p("img.npy"), &[4, 4], vec![1.0; 16]);
    write_npy(&d.p("empty.npy"), &[3, 0, 2], vec![]);
    write_npy(&d.p("k2d.npy"), &[3, 3], vec![0.1; 9]);
    write_npy(&d.p("k9.npy"), &[9, 9, 9], vec![0.001; 729]);
    write_npy(&d.p("k4.npy"), &[4, 4, 4], vec![0.01; 64]);
    let mut inf = vec![0.1f32; 27];
    inf[26] = f32::INFINITY;
    write_npy(&d.p("kinf.npy"), &[3, 3, 3], inf);
    write_img(&d.p("i.png"), 3, 3, 1, vec![1.0; 9], SampleType::U8);
    // Each case: the arguments => what stderr must say.
    for case in [
        "--input i.png --kernel box:3 --output o.nii => use kiln filter2d",
        "--input v.nii --kernel box:3 --output o.tif => volume files must end in one of: .nii .nii.gz .npy",
        "--input trunc.nii --kernel box:3 --output o.nii => truncated",
        "--input trunc.nii.gz --kernel box:3 --output o.nii => not a valid NIfTI file",
        "--input junk.nii --kernel box:3 --output o.nii => not a valid NIfTI file",
        "--input img.npy --kernel box:3 --output o.npy => use kiln filter2d",
        "--input empty.npy --kernel box:3 --output o.npy => empty",
        "--input v.nii --kernel k2d.npy --output o.nii => rank 2",
        "--input v.nii --kernel kinf.npy --output o.nii => weight [2, 2, 2] is inf",
        "--input v.nii --kernel sobel-x --output o.nii => unknown kernel `sobel-x`",
        "--input v.nii --kernel box:3 --mode clamp --output o.nii => unknown mode `clamp`",
        "--input v.nii --kernel box:3 --mode constant:2 --cval 3 --output o.nii => disagree",
        "--input v.nii --kernel box:3 --output v.nii => is the input file",
        "--input v.nii.gz --kernel box:3 --output v.nii.gz => is the input file",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(&format!("filter3d {args}"), needle);
    }
    // Refused before issue 19, now scipy's correlate / uniform_filter / gaussian_filter.
    for k in ["k9.npy", "k4.npy", "box:9", "gaussian:1.0"] {
        let j = d.ok(&format!(
            "filter3d --input v.nii --kernel {k} --output ok.nii --json"
        ));
        assert_eq!(j["path"], "ndimage", "{k}: {j}");
    }
}
