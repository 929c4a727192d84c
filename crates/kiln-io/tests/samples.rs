//! Images and arrays in their stored type: decoding into a caller's buffer and encoding from
//! borrowed samples give exactly what the f32 API reads and writes, byte for byte.
#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::*;
use kiln_io::{
    open_image_file, open_npy, read_image, read_npy, write_image, write_image_samples, HostImage, IoError,
    NpyDtype, OwnedSamples, SampleType, SamplesMut, SamplesRef,
};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use ndarray_npy::WriteNpyExt;

fn max_of(st: SampleType) -> u32 {
    st.max_value().map(|m| m as u32).unwrap_or(0)
}

/// The samples of an f32 image in `st` (the values are integers in range for u8/u16).
fn typed(img: &HostImage, st: SampleType) -> OwnedSamples {
    match st {
        SampleType::U8 => OwnedSamples::U8(img.data.iter().map(|&v| v as u8).collect()),
        SampleType::U16 => OwnedSamples::U16(img.data.iter().map(|&v| v as u16).collect()),
        SampleType::F32 => OwnedSamples::F32(img.data.iter().copied().collect()),
    }
}

#[test]
fn samples_encode_and_decode_exactly_as_the_f32_api() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("png", SampleType::U8, vec![1, 2, 3, 4]),
        ("png", SampleType::U16, vec![1, 2, 3, 4]),
        ("tif", SampleType::U8, vec![1, 3, 4]),
        ("tif", SampleType::U16, vec![1, 3, 4]),
        ("tif", SampleType::F32, vec![1, 3, 4]),
        ("npy", SampleType::U8, vec![1, 3]),
        ("npy", SampleType::U16, vec![1, 4]),
        ("npy", SampleType::F32, vec![1, 2]),
    ];
    for (i, (ext, st, channels)) in cases.into_iter().enumerate() {
        for c in channels {
            let seed = 40 + 10 * i as u64 + c as u64;
            let data = match st {
                SampleType::F32 => float_image(seed, 11, 14, c),
                _ => int_image(seed, 11, 14, c, max_of(st)),
            };
            let img = HostImage::new(data, st);
            let (a, b) = (
                dir.path().join(format!("a.{ext}")),
                dir.path().join(format!("b.{ext}")),
            );
            write_image(&a, &img, st).unwrap();
            let samples = typed(&img, st);
            write_image_samples(&b, 11, 14, c, samples.as_ref()).unwrap();
            let what = format!("{ext} {st:?} {c}ch");
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{what}: bytes"
            );
            if ext == "npy" {
                continue;
            }
            let f = open_image_file(&b).unwrap();
            let info = f.info();
            assert_eq!(
                (info.height, info.width, info.channels, info.sample_type),
                (11, 14, c, st),
                "{what}"
            );
            assert_eq!(f.decode().unwrap(), samples, "{what}: decoded samples");
            assert_eq!(read_image(&b).unwrap(), img, "{what}: read_image");
        }
    }
}

#[test]
fn decoding_into_a_wrong_buffer_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.png");
    write_image(
        &p,
        &HostImage::new(int_image(1, 4, 5, 1, 255), SampleType::U8),
        SampleType::U8,
    )
    .unwrap();
    let mut short = vec![0u8; 19];
    let e = open_image_file(&p)
        .unwrap()
        .decode_into(SamplesMut::U8(&mut short))
        .unwrap_err();
    assert!(e.to_string().contains("20 u8 samples (4x5x1)"), "{e}");
    let mut wide = vec![0u16; 20];
    let e = open_image_file(&p)
        .unwrap()
        .decode_into(SamplesMut::U16(&mut wide))
        .unwrap_err();
    assert!(matches!(e, IoError::UnsupportedPixelType { .. }), "{e}");
    // Decoding errors past the header surface in decode_into, as read_image's.
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 20]).unwrap();
    let mut buf = vec![0u8; 20];
    let e = match open_image_file(&p) {
        Ok(f) => f.decode_into(SamplesMut::U8(&mut buf)).unwrap_err(),
        Err(e) => e,
    };
    assert!(matches!(e, IoError::Corrupt { .. }), "{e}");
    let e = open_image_file(dir.path().join("g.npy")).unwrap_err();
    assert!(matches!(e, IoError::UnknownExtension { .. }), "{e}");
}

#[test]
fn samples_of_the_wrong_count_or_type_are_refused_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    for (name, c, s) in [
        ("a.png", 1, SamplesRef::U8(&[0; 11])),
        ("b.png", 1, SamplesRef::F32(&[0.0; 12])),
        ("c.tif", 2, SamplesRef::U8(&[0; 24])),
        ("d.png", 5, SamplesRef::U8(&[0; 60])),
        ("e.npy", 1, SamplesRef::U16(&[0; 13])),
    ] {
        let e = write_image_samples(dir.path().join(name), 3, 4, c, s).unwrap_err();
        assert!(
            matches!(
                e,
                IoError::UnsupportedDimensionality { .. } | IoError::UnsupportedPixelType { .. }
            ),
            "{name}: {e}"
        );
    }
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

fn read_all(p: &std::path::Path) -> OwnedSamples {
    let f = open_npy(p).unwrap();
    let n = f.len();
    match f.sample_type() {
        SampleType::U8 => {
            let mut v = vec![0u8; n];
            f.read_into(SamplesMut::U8(&mut v)).unwrap();
            OwnedSamples::U8(v)
        }
        SampleType::U16 => {
            let mut v = vec![0u16; n];
            f.read_into(SamplesMut::U16(&mut v)).unwrap();
            OwnedSamples::U16(v)
        }
        SampleType::F32 => {
            let mut v = vec![0f32; n];
            f.read_into(SamplesMut::F32(&mut v)).unwrap();
            OwnedSamples::F32(v)
        }
    }
}

#[test]
fn npy_read_into_equals_read_npy_for_every_dtype_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = float_array(3, &[3, 4, 5]);
    let write = |name: &str, f: &dyn Fn(std::fs::File)| {
        let p = dir.path().join(name);
        f(std::fs::File::create(&p).unwrap());
        p
    };
    let paths = [
        write("c.npy", &|f| a.write_npy(f).unwrap()),
        write("f.npy", &|f| {
            let mut fa = ArrayD::<f32>::zeros(IxDyn(&[3, 4, 5]).f());
            fa.assign(&a);
            fa.write_npy(f).unwrap()
        }),
        write("d.npy", &|f| a.mapv(|v| f64::from(v) / 3.0).write_npy(f).unwrap()),
        write("u8.npy", &|f| a.mapv(|v| (v + 50.0) as u8).write_npy(f).unwrap()),
        write("u16.npy", &|f| {
            a.mapv(|v| (v * 100.0 + 6000.0) as u16).write_npy(f).unwrap()
        }),
    ];
    for p in &paths {
        let want = read_npy(p).unwrap();
        let f = open_npy(p).unwrap();
        assert_eq!(f.shape(), want.data.shape(), "{}", p.display());
        assert_eq!(f.dtype(), want.dtype);
        let got = read_all(p);
        assert_eq!(
            got.to_f32(),
            want.data.iter().copied().collect::<Vec<f32>>(),
            "{}",
            p.display()
        );
        let st = match want.dtype {
            NpyDtype::U8 => SampleType::U8,
            NpyDtype::U16 => SampleType::U16,
            _ => SampleType::F32,
        };
        assert_eq!(got.as_ref().sample_type(), st);
    }
}

#[test]
fn npy_open_checks_as_read_npy_does() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    kiln_io::write_npy(&p, &float_array(4, &[6, 7])).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    // Truncated data: refused at open, with read_npy's message.
    std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
    let (a, b) = (open_npy(&p).unwrap_err(), read_npy(&p).unwrap_err());
    assert_eq!(a.to_string(), b.to_string());
    assert!(a.to_string().contains("truncated"), "{a}");
    // Extra bytes after the data: refused on read, as read_npy does.
    let mut long = bytes.clone();
    long.extend([0u8; 8]);
    std::fs::write(&p, &long).unwrap();
    let mut v = vec![0f32; 42];
    let e = open_npy(&p)
        .unwrap()
        .read_into(SamplesMut::F32(&mut v))
        .unwrap_err();
    assert!(e.to_string().contains("8 unexpected bytes"), "{e}");
    assert!(read_npy(&p).is_err());
    // A buffer of the wrong type.
    std::fs::write(&p, &bytes).unwrap();
    let mut w = vec![0u8; 42];
    assert!(open_npy(&p).unwrap().read_into(SamplesMut::U8(&mut w)).is_err());
    // Not an npy at all, and a missing file.
    std::fs::write(&p, b"hello").unwrap();
    assert!(matches!(open_npy(&p).unwrap_err(), IoError::Corrupt { .. }));
    let e = open_npy(dir.path().join("none.npy")).unwrap_err();
    assert!(matches!(e, IoError::NotFound { .. }), "{e}");
}
