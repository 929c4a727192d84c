//! NIfTI-1: 3-D / 4-D round trips through .nii and .nii.gz with a non-identity affine,
//! scaling, extensions, and bad input.
#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::*;
use kiln_io::{
    read_volume, write_volume, Extender, Extension, ExtensionSequence, IoError, NiftiHeader, NiftiType,
    Volume,
};
use ndarray::{ArrayD, IxDyn};
use nifti::IntoNdArray;
use nifti::NiftiObject;

fn oblique_header() -> NiftiHeader {
    let mut h = NiftiHeader {
        pixdim: [-1.0, 0.8, 0.9, 2.5, 1.7, 1.0, 1.0, 1.0],
        qform_code: 1,
        sform_code: 2,
        quatern_b: 0.1,
        quatern_c: -0.2,
        quatern_d: 0.3,
        quatern_x: 10.5,
        quatern_y: -20.25,
        quatern_z: 33.0,
        srow_x: [0.8, 0.05, 0.0, -90.0],
        srow_y: [-0.04, 0.9, 0.1, 126.0],
        srow_z: [0.0, -0.1, 2.5, -72.0],
        xyzt_units: 2 | 8,
        cal_min: -50.0,
        cal_max: 50.0,
        ..NiftiHeader::default()
    };
    h.set_description_str("kiln round-trip test volume").unwrap();
    h
}

fn volume(seed: u64, shape: &[usize]) -> Volume {
    Volume {
        data: float_array(seed, shape),
        header: oblique_header(),
        extensions: ExtensionSequence::new(Extender::default(), Vec::new()),
    }
}

fn assert_header_kept(a: &NiftiHeader, b: &NiftiHeader, what: &str) {
    assert_eq!(a.pixdim, b.pixdim, "{what} pixdim");
    assert_eq!(a.qform_code, b.qform_code, "{what} qform_code");
    assert_eq!(a.sform_code, b.sform_code, "{what} sform_code");
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
        ],
        "{what} quaternion"
    );
    assert_eq!(a.srow_x, b.srow_x, "{what} srow_x");
    assert_eq!(a.srow_y, b.srow_y, "{what} srow_y");
    assert_eq!(a.srow_z, b.srow_z, "{what} srow_z");
    assert_eq!(a.descrip, b.descrip, "{what} descrip");
    assert_eq!(a.xyzt_units, b.xyzt_units, "{what} units");
    assert_eq!((a.cal_min, a.cal_max), (b.cal_min, b.cal_max), "{what} cal");
}

#[test]
fn nii_and_nii_gz_round_trip_3d_and_4d_with_an_oblique_affine() {
    let dir = tempfile::tempdir().unwrap();
    for (i, shape) in [vec![6, 5, 4], vec![6, 5, 4, 3], vec![1, 5, 4], vec![7, 1, 1, 2]]
        .into_iter()
        .enumerate()
    {
        for ext in ["nii", "nii.gz", "NII.GZ"] {
            let path = dir.path().join(format!("v{i}.{ext}"));
            let vol = volume(40 + i as u64, &shape);
            write_volume(&path, &vol).unwrap_or_else(|e| panic!("{ext} {shape:?}: {e}"));
            let back = read_volume(&path).unwrap_or_else(|e| panic!("{ext} {shape:?}: {e}"));
            let what = format!("{ext} {shape:?}");
            assert_eq!(back.data, vol.data, "{what} voxels");
            assert!(back.data.is_standard_layout());
            assert_header_kept(&vol.header, &back.header, &what);
            let dims: Vec<usize> = back.header.dim().unwrap().iter().map(|&d| d as usize).collect();
            assert_eq!(dims, shape, "{what} dim");
            assert_eq!(back.stored_dtype(), Some(NiftiType::Float32));
            assert_eq!(back.header.bitpix, 32);
            assert_eq!((back.header.scl_slope, back.header.scl_inter), (1.0, 0.0));
            assert_eq!(back.affine(), vol.affine(), "{what}");
            assert_eq!(back.voxel_size(), vol.header.pixdim[1..=shape.len()].to_vec());
        }
    }
    // The gzip one really is compressed.
    let gz = std::fs::read(dir.path().join("v0.nii.gz")).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let plain = std::fs::read(dir.path().join("v0.nii")).unwrap();
    assert_eq!(&plain[344..348], b"n+1\0");
}

#[test]
fn voxel_order_matches_the_nifti_crate() {
    // Check the (i, j, k) indexing against an independent reader, not just against ourselves.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.nii");
    let vol = volume(3, &[4, 3, 2]);
    write_volume(&path, &vol).unwrap();
    let obj = nifti::ReaderOptions::new().read_file(&path).unwrap();
    let theirs = obj.into_volume().into_ndarray::<f32>().unwrap();
    assert_eq!(theirs, vol.data);
    // And the file's first voxels are x-fastest (Fortran order).
    let bytes = std::fs::read(&path).unwrap();
    let v1 = f32::from_le_bytes(bytes[356..360].try_into().unwrap());
    assert_eq!(v1, vol.data[[1, 0, 0]]);
}

#[test]
fn affine_follows_sform_then_qform_then_pixdim() {
    let mut h = oblique_header();
    let sform = kiln_io::header_affine(&h);
    assert_eq!(sform[0], [0.8f32 as f64, 0.05f32 as f64, 0.0, -90.0]);
    assert_eq!(sform[3], [0.0, 0.0, 0.0, 1.0]);

    // qform: 90 degrees about z (b = c = 0, d = sin 45), pixdim (2, 3, 4), qfac -1.
    h.sform_code = 0;
    h.quatern_b = 0.0;
    h.quatern_c = 0.0;
    h.quatern_d = std::f32::consts::FRAC_1_SQRT_2;
    h.pixdim = [-1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0];
    let q = kiln_io::header_affine(&h);
    let want = [
        [0.0, -3.0, 0.0, 10.5],
        [2.0, 0.0, 0.0, -20.25],
        [0.0, 0.0, -4.0, 33.0],
        [0.0, 0.0, 0.0, 1.0],
    ];
    for (r, w) in q.iter().zip(want) {
        for (a, b) in r.iter().zip(w) {
            assert!((a - b).abs() < 1e-6, "{q:?}");
        }
    }

    h.qform_code = 0;
    let p = kiln_io::header_affine(&h);
    assert_eq!(p[0][0], 2.0);
    assert_eq!(p[1][1], 3.0);
    assert_eq!(p[2][2], 4.0);
    assert_eq!(p[0][3], 0.0);
}

#[test]
fn scaling_is_applied_on_read_and_written_as_float32_with_unit_slope() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u8.nii");
    let mut r = rng(77);
    let raw = ArrayD::from_shape_fn(IxDyn(&[5, 4, 3]), |_| rand::Rng::random_range(&mut r, 1u8..=255));
    nifti::writer::WriterOptions::new(&path)
        .reference_header(&oblique_header())
        .write_nifti(&raw)
        .unwrap();
    // The writer forces slope 1 / inter 0; patch in a real scaling (offsets 112 and 116).
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[112..116].copy_from_slice(&2.0f32.to_le_bytes());
    bytes[116..120].copy_from_slice(&(-5.0f32).to_le_bytes());
    std::fs::write(&path, bytes).unwrap();

    let vol = read_volume(&path).unwrap();
    assert_eq!(vol.stored_dtype(), Some(NiftiType::Uint8));
    assert_eq!((vol.header.scl_slope, vol.header.scl_inter), (2.0, -5.0));
    assert_eq!(vol.data, raw.mapv(|v| f32::from(v) * 2.0 - 5.0));

    let out = dir.path().join("f32.nii.gz");
    write_volume(&out, &vol).unwrap();
    let back = read_volume(&out).unwrap();
    assert_eq!(back.stored_dtype(), Some(NiftiType::Float32));
    assert_eq!((back.header.scl_slope, back.header.scl_inter), (1.0, 0.0));
    assert_eq!(back.data, vol.data, "no double scaling");
    assert_header_kept(&vol.header, &back.header, "rescaled");
}

#[test]
fn extensions_survive_a_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ext.nii");
    let mut vol = volume(9, &[3, 3, 3]);
    vol.extensions = ExtensionSequence::new(
        Extender::from([1, 0, 0, 0]),
        vec![Extension::from_str(6, "kiln: acquisition notes")],
    );
    write_volume(&path, &vol).unwrap();
    let back = read_volume(&path).unwrap();
    assert_eq!(back.extensions, vol.extensions);
    assert_eq!(back.data, vol.data);
}

#[test]
fn npy_volumes_read_and_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.npy");
    let vol = Volume::new(float_array(4, &[3, 4, 5, 2]));
    write_volume(&path, &vol).unwrap();
    assert_eq!(read_volume(&path).unwrap().data, vol.data);
    // And into NIfTI with the default header: identity-free pixdim scaling, codes 0.
    let nii = dir.path().join("v.nii");
    write_volume(&nii, &vol).unwrap();
    let back = read_volume(&nii).unwrap();
    assert_eq!(back.data, vol.data);
    assert_eq!((back.header.qform_code, back.header.sform_code), (0, 0));

    kiln_io::write_npy(&path, &float_array(4, &[3, 4])).unwrap();
    let e = read_volume(&path).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDimensionality { .. }), "{e}");
}

#[test]
fn two_dimensional_nifti_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flat.nii");
    let v = Volume::new(float_array(1, &[4, 5]));
    kiln_io::write_nifti(&path, &v, false).unwrap();
    let e = read_volume(&path).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDimensionality { .. }), "{e}");
    assert!(e.to_string().contains("[4, 5]"), "{e}");
}

#[test]
fn rgb_volumes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rgb.nii");
    let rgb = ArrayD::from_shape_fn(IxDyn(&[2, 2, 2]), |i| [i[0] as u8 + 1, 2, 3]);
    nifti::writer::WriterOptions::new(&path)
        .write_rgb_nifti(&rgb)
        .unwrap();
    let e = read_volume(&path).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDtype { .. }), "{e}");
    assert!(e.to_string().contains("Rgb24"), "{e}");
}

#[test]
fn truncated_and_corrupt_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["nii", "nii.gz"] {
        let path = dir.path().join(format!("t.{ext}"));
        write_volume(&path, &volume(5, &[8, 8, 8])).unwrap();
        truncate_half(&path);
        let e = read_volume(&path).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{ext}: {e}");
        assert!(e.to_string().contains("truncated"), "{ext}: {e}");

        std::fs::write(&path, b"definitely not a NIfTI file").unwrap();
        let e = read_volume(&path).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{ext}: {e}");
    }
    // Gzip magic with garbage after it.
    let path = dir.path().join("bad.nii.gz");
    std::fs::write(&path, [0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
    let e = read_volume(&path).unwrap_err();
    assert!(matches!(e, IoError::Corrupt { .. }), "{e}");

    let e = read_volume(dir.path().join("none.nii.gz")).unwrap_err();
    assert!(matches!(e, IoError::NotFound { .. }), "{e}");
    let e = read_volume(dir.path().join("x.hdr")).unwrap_err();
    assert!(matches!(e, IoError::UnknownExtension { .. }), "{e}");
    assert!(e.to_string().contains(".nii .nii.gz .npy"), "{e}");
}

#[test]
fn scrambled_headers_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.nii");
    write_volume(&path, &volume(6, &[4, 4, 3, 2])).unwrap();
    for seed in 0..300u64 {
        // Damage the 352-byte header region (and sometimes the data).
        let bad = scramble(
            &path,
            seed,
            if seed % 5 == 0 { 0 } else { 40 },
            1 + (seed % 6) as usize,
        );
        let m = dir.path().join("m.nii");
        std::fs::write(&m, &bad).unwrap();
        let _ = read_volume(&m);
    }
}

#[test]
fn write_refuses_bad_shapes_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.nii");
    let v = Volume::new(ArrayD::zeros(IxDyn(&[40000, 1, 1])));
    let e = write_volume(&path, &v).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedDimensionality { .. }), "{e}");
    let mut v = volume(1, &[2, 2, 2]);
    v.header.descrip = vec![b'x'; 81];
    let e = write_volume(&path, &v).unwrap_err();
    assert!(matches!(e, IoError::Encode { .. }), "{e}");
    assert!(entries(dir.path()).is_empty());
}
