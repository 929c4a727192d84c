//! PNG / TIFF / NPY image round trips, quantisation on write, and bad input.
#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::*;
use kiln_io::{read_image, write_image, HostImage, IoError, SampleType};
use ndarray::Array3;

fn max_of(st: SampleType) -> u32 {
    st.max_value().map(|m| m as u32).unwrap_or(0)
}

/// Writes integer-valued random pixels and checks they come back exactly, in the same type.
fn round_trip(ext: &str, st: SampleType, channels: usize, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("img.{ext}"));
    let data = match st {
        SampleType::F32 => float_image(seed, 13, 17, channels),
        _ => int_image(seed, 13, 17, channels, max_of(st)),
    };
    let img = HostImage::new(data.clone(), st);
    write_image(&path, &img, st).unwrap_or_else(|e| panic!("{ext} {st:?} {channels}: {e}"));
    let back = read_image(&path).unwrap_or_else(|e| panic!("{ext} {st:?} {channels}: {e}"));
    assert_eq!(back.sample_type, st, "{ext} {channels}ch");
    assert_eq!(back.data.dim(), (13, 17, channels), "{ext} {st:?}");
    assert_eq!(back.data, data, "{ext} {st:?} {channels}ch values");
    assert_eq!(common::entries(dir.path()), vec![format!("img.{ext}")]);
}

#[test]
fn png_round_trips_8_and_16_bit_all_channel_counts() {
    for (i, st) in [SampleType::U8, SampleType::U16].into_iter().enumerate() {
        for c in 1..=4 {
            round_trip("png", st, c, 100 + 10 * i as u64 + c as u64);
        }
    }
}

#[test]
fn tiff_round_trips_8_and_16_bit_gray_rgb_rgba() {
    for (i, st) in [SampleType::U8, SampleType::U16].into_iter().enumerate() {
        for c in [1, 3, 4] {
            round_trip("tif", st, c, 200 + 10 * i as u64 + c as u64);
            round_trip("tiff", st, c, 300 + 10 * i as u64 + c as u64);
        }
    }
}

#[test]
fn tiff_round_trips_f32_gray_rgb_rgba() {
    for c in [1, 3, 4] {
        round_trip("tif", SampleType::F32, c, 400 + c as u64);
    }
}

#[test]
fn npy_images_round_trip_in_every_sample_type() {
    for c in [1, 3] {
        round_trip("npy", SampleType::U8, c, 500 + c as u64);
        round_trip("npy", SampleType::U16, c, 510 + c as u64);
        round_trip("npy", SampleType::F32, c, 520 + c as u64);
    }
}

#[test]
fn a_single_channel_npy_image_is_stored_2d() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.npy");
    let img = HostImage::new(float_image(1, 4, 5, 1), SampleType::F32);
    write_image(&path, &img, SampleType::F32).unwrap();
    let arr = kiln_io::read_npy(&path).unwrap();
    assert_eq!(arr.data.shape(), &[4, 5]);
    assert_eq!(arr.dtype, kiln_io::NpyDtype::F32);
}

#[test]
fn upper_case_extensions_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["A.PNG", "B.TiF", "C.NPY"] {
        let path = dir.path().join(name);
        let img = HostImage::new(int_image(7, 3, 4, 3, 255), SampleType::U8);
        write_image(&path, &img, SampleType::U8).unwrap();
        assert_eq!(read_image(&path).unwrap(), img, "{name}");
    }
}

#[test]
fn writing_quantises_round_to_nearest_and_clamps() {
    let dir = tempfile::tempdir().unwrap();
    let vals = [-3.2f32, 255.6, 12.5, 12.49, f32::NAN, 1e9, 0.5, 254.5];
    let want_u8 = [0.0f32, 255.0, 13.0, 12.0, 0.0, 255.0, 1.0, 255.0];
    let data = Array3::from_shape_vec((1, vals.len(), 1), vals.to_vec()).unwrap();
    let img = HostImage::new(data, SampleType::F32);
    for ext in ["png", "tif", "npy"] {
        let path = dir.path().join(format!("q8.{ext}"));
        write_image(&path, &img, SampleType::U8).unwrap();
        let back = read_image(&path).unwrap();
        assert_eq!(back.sample_type, SampleType::U8);
        assert_eq!(back.data.as_slice().unwrap(), &want_u8, "{ext}");

        let path = dir.path().join(format!("q16.{ext}"));
        write_image(&path, &img, SampleType::U16).unwrap();
        let back = read_image(&path).unwrap();
        let want_u16 = [0.0f32, 256.0, 13.0, 12.0, 0.0, 65535.0, 1.0, 255.0];
        assert_eq!(back.data.as_slice().unwrap(), &want_u16, "{ext}");
    }
}

#[test]
fn writing_f32_to_png_or_gray_alpha_tiff_is_refused_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let img = HostImage::new(float_image(3, 4, 4, 1), SampleType::F32);
    let e = write_image(dir.path().join("f.png"), &img, SampleType::F32).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedPixelType { .. }), "{e}");
    assert!(e.to_string().contains(".tif"), "{e}");

    let ga = HostImage::new(int_image(3, 4, 4, 2, 255), SampleType::U8);
    let e = write_image(dir.path().join("ga.tif"), &ga, SampleType::U8).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedPixelType { .. }), "{e}");

    let five = HostImage::new(int_image(3, 4, 4, 5, 255), SampleType::U8);
    let e = write_image(dir.path().join("five.png"), &five, SampleType::U8).unwrap_err();
    assert!(matches!(e, IoError::UnsupportedPixelType { .. }), "{e}");
    assert!(common::entries(dir.path()).is_empty());
}

#[test]
fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.png");
    let good = HostImage::new(int_image(9, 6, 6, 3, 255), SampleType::U8);
    write_image(&path, &good, SampleType::U8).unwrap();
    let before = std::fs::read(&path).unwrap();
    let bad = HostImage::new(float_image(9, 6, 6, 1), SampleType::F32);
    assert!(write_image(&path, &bad, SampleType::F32).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(common::entries(dir.path()), vec!["keep.png".to_string()]);
}

#[test]
fn empty_images_are_refused_on_write_and_read() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "tif", "npy"] {
        let img = HostImage::new(Array3::zeros((0, 5, 1)), SampleType::U8);
        let e = write_image(dir.path().join(format!("e.{ext}")), &img, SampleType::U8).unwrap_err();
        assert!(
            matches!(
                e,
                IoError::EmptyImage {
                    height: 0,
                    width: 5,
                    ..
                }
            ),
            "{e}"
        );
    }
    // An NPY with a zero dimension is a valid file but an empty image.
    let path = dir.path().join("empty.npy");
    kiln_io::write_npy(&path, &ndarray::Array2::<f32>::zeros((3, 0))).unwrap();
    let e = read_image(&path).unwrap_err();
    assert!(matches!(e, IoError::EmptyImage { width: 0, .. }), "{e}");
    assert!(e.to_string().contains("empty image"), "{e}");
}

#[test]
fn unknown_extension_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["x.jpg", "x", "x.png.bak", ".png"] {
        let e = read_image(dir.path().join(name)).unwrap_err();
        assert!(matches!(e, IoError::UnknownExtension { .. }), "{name}: {e}");
        assert!(e.to_string().contains(".png .tif .tiff .npy"), "{e}");
    }
    let img = HostImage::new(int_image(1, 2, 2, 1, 255), SampleType::U8);
    let e = write_image(dir.path().join("x.nii"), &img, SampleType::U8).unwrap_err();
    assert!(matches!(e, IoError::UnknownExtension { .. }), "{e}");
}

#[test]
fn missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "tif", "npy"] {
        let p = dir.path().join(format!("nope.{ext}"));
        let e = read_image(&p).unwrap_err();
        assert!(matches!(e, IoError::NotFound { .. }), "{e}");
        assert_eq!(e.path(), p);
        let core: kiln_core::Error = e.into();
        assert!(matches!(core, kiln_core::Error::Io { .. }), "{core}");
    }
}

fn write_sample(ext: &str, st: SampleType, c: usize, path: &std::path::Path) {
    let data = match st {
        SampleType::F32 => float_image(11, 40, 30, c),
        _ => int_image(11, 40, 30, c, max_of(st)),
    };
    write_image(path, &HostImage::new(data, st), st).unwrap_or_else(|e| panic!("{ext}: {e}"));
}

#[test]
fn truncated_files_give_a_corrupt_error() {
    let dir = tempfile::tempdir().unwrap();
    for (ext, st, c) in [
        ("png", SampleType::U8, 3),
        ("png", SampleType::U16, 1),
        ("tif", SampleType::U8, 3),
        ("tif", SampleType::U16, 1),
        ("tif", SampleType::F32, 1),
        ("tif", SampleType::F32, 3),
        ("npy", SampleType::F32, 3),
    ] {
        let path = dir.path().join(format!("t.{ext}"));
        write_sample(ext, st, c, &path);
        truncate_half(&path);
        let e = read_image(&path).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{ext} {st:?}: {e}");
        assert!(e.to_string().contains("truncated or corrupt"), "{e}");
        let core: kiln_core::Error = e.into();
        assert!(matches!(core, kiln_core::Error::InvalidArgument { .. }));
    }
}

#[test]
fn garbage_and_wrong_content_give_a_corrupt_error() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "tif", "npy"] {
        let path = dir.path().join(format!("g.{ext}"));
        std::fs::write(&path, b"this is not an image at all, just some text").unwrap();
        let e = read_image(&path).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{ext}: {e}");
        std::fs::write(&path, b"").unwrap();
        let e = read_image(&path).unwrap_err();
        assert!(matches!(e, IoError::Corrupt { .. }), "{ext} empty: {e}");
    }
}

/// Random byte damage anywhere (header included) must give a result or an error, never a
/// panic. Damaged pixel data may well decode; that is fine.
#[test]
fn scrambled_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    for (ext, st, c) in [
        ("png", SampleType::U8, 4),
        ("png", SampleType::U16, 2),
        ("tif", SampleType::U16, 3),
        ("tif", SampleType::F32, 1),
        ("npy", SampleType::U8, 1),
    ] {
        let path = dir.path().join(format!("s.{ext}"));
        write_sample(ext, st, c, &path);
        let original = std::fs::read(&path).unwrap();
        for seed in 0..150u64 {
            let bad = scramble(&path, seed, 0, 1 + (seed % 8) as usize);
            let mangled = dir.path().join(format!("m.{ext}"));
            std::fs::write(&mangled, &bad).unwrap();
            if let Ok(img) = read_image(&mangled) {
                assert!(img.height() > 0 && img.width() > 0);
            }
        }
        std::fs::write(&path, &original).unwrap();
    }
}
