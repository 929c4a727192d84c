//! PNG and TIFF images through the `image` crate (and the `tiff` crate for gray f32 TIFF,
//! which `image` 0.25 neither decodes nor encodes).
//!
//! Pixels are kept in the units of the stored sample type: a u8 image holds 0..=255, a u16
//! image 0..=65535, an f32 image whatever the file holds. Nothing is normalised, so reading
//! and writing back in the same sample type is lossless.

use std::io::{Seek, Write};
use std::path::Path;

use image::ImageError;
use ndarray::Array3;

use crate::error::{IoError, Result};
use crate::samples::{encode_png, encode_tiff, open_bytes, ImageFile, OwnedSamples, SamplesRef};

/// The most bytes a decoder may allocate for one image (the `image` crate's default is
/// 512 MiB, too small for large 16-bit microscopy or inspection frames).
pub const MAX_DECODE_BYTES: u64 = 4 << 30;

/// The type of the samples an image is stored with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleType {
    /// 8-bit unsigned, 0..=255.
    U8,
    /// 16-bit unsigned, 0..=65535.
    U16,
    /// 32-bit float, any value.
    F32,
}

impl SampleType {
    /// The largest value the type holds, or `None` for f32 (unbounded).
    pub fn max_value(self) -> Option<f32> {
        match self {
            SampleType::U8 => Some(f32::from(u8::MAX)),
            SampleType::U16 => Some(f32::from(u16::MAX)),
            SampleType::F32 => None,
        }
    }

    /// The name used in messages: `u8`, `u16`, `f32`.
    pub fn name(self) -> &'static str {
        match self {
            SampleType::U8 => "u8",
            SampleType::U16 => "u16",
            SampleType::F32 => "f32",
        }
    }
}

/// An image in host memory.
///
/// `data` is shaped `(H, W, C)`: rows, columns, channels. Channels are kept as stored: 1 gray,
/// 2 gray+alpha, 3 RGB, 4 RGBA (alpha is neither dropped nor premultiplied). Values are in the
/// units of [`HostImage::sample_type`] (no normalisation to 0..1).
#[derive(Clone, Debug, PartialEq)]
pub struct HostImage {
    /// Pixels, `(H, W, C)`.
    pub data: Array3<f32>,
    /// The sample type the file stored (what a caller writes back to keep the file's type).
    pub sample_type: SampleType,
}

impl HostImage {
    /// Wraps pixels `(H, W, C)` with the sample type they are meant to be stored as.
    pub fn new(data: Array3<f32>, sample_type: SampleType) -> Self {
        HostImage { data, sample_type }
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.data.dim().0
    }

    /// Columns.
    pub fn width(&self) -> usize {
        self.data.dim().1
    }

    /// Channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).
    pub fn channels(&self) -> usize {
        self.data.dim().2
    }
}

/// Converts to u8: NaN becomes 0, others round to nearest (halves away from zero) and clamp
/// to 0..=255.
pub fn to_u8(v: f32) -> u8 {
    if v.is_nan() {
        return 0;
    }
    // `as` saturates; clamp first anyway so the intent does not hide in the cast's semantics.
    v.round().clamp(0.0, 255.0) as u8
}

/// Converts to u16: NaN becomes 0, others round to nearest (halves away from zero) and clamp
/// to 0..=65535.
pub fn to_u16(v: f32) -> u16 {
    if v.is_nan() {
        return 0;
    }
    v.round().clamp(0.0, 65535.0) as u16
}

/// Reads a PNG: 1/2/4/8/16-bit gray, gray+alpha, RGB, RGBA, palette (expanded to RGB(A)).
/// Bit depths below 8 come back as u8.
pub fn read_png(path: impl AsRef<Path>) -> Result<HostImage> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    to_host_image(open_bytes(path, "PNG", bytes)?)
}

/// Reads the first page of a TIFF: 8/16-bit gray, gray+alpha, RGB, RGBA (CMYK is converted
/// to RGB by `image`), 32-bit float gray, RGB and RGBA.
pub fn read_tiff(path: impl AsRef<Path>) -> Result<HostImage> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    to_host_image(open_bytes(path, "TIFF", bytes)?)
}

/// The pixels of an opened file as f32 in their type's units.
pub(crate) fn to_host_image(file: ImageFile) -> Result<HostImage> {
    let info = file.info();
    let path = file.path().to_owned();
    let v = file.decode()?.to_f32();
    let (h, w, c) = (info.height, info.width, info.channels);
    let data = Array3::from_shape_vec((h, w, c), v).map_err(|e| {
        IoError::corrupt(
            &path,
            "image",
            format!("decoded pixel count does not match {h}x{w}x{c}: {e}"),
        )
    })?;
    Ok(HostImage::new(data, info.sample_type))
}

pub(crate) const TIFF_READ: &str = "8/16-bit gray, gray+alpha, RGB, RGBA; f32 gray, RGB, RGBA";

/// The samples of `img` quantised to `st` (see [`to_u8`], [`to_u16`]), in logical
/// (row-major, channel-interleaved) order whatever the array's layout.
fn quantised(img: &HostImage, st: SampleType) -> OwnedSamples {
    match st {
        SampleType::U8 => OwnedSamples::U8(img.data.iter().map(|&v| to_u8(v)).collect()),
        SampleType::U16 => OwnedSamples::U16(img.data.iter().map(|&v| to_u16(v)).collect()),
        SampleType::F32 => OwnedSamples::F32(img.data.iter().copied().collect()),
    }
}

fn hwc(img: &HostImage) -> [usize; 3] {
    let (h, w, c) = img.data.dim();
    [h, w, c]
}

/// Writes a PNG in u8 or u16 with the image's channels (1 to 4). PNG has no float samples:
/// `SampleType::F32` is refused (write TIFF or NPY instead).
pub fn write_png(path: impl AsRef<Path>, img: &HostImage, sample_type: SampleType) -> Result<()> {
    let path = path.as_ref();
    if sample_type == SampleType::F32 || img.height() == 0 || img.width() == 0 {
        // the refusal (or the empty-image error) without quantising anything
        return encode_png(path, hwc(img), SamplesRef::F32(&[]));
    }
    encode_png(path, hwc(img), quantised(img, sample_type).as_ref())
}

/// Writes a TIFF (uncompressed) in u8, u16 or f32. Channels: u8/u16 take 1, 3 or 4; f32
/// takes 1, 3 or 4. Gray+alpha TIFF is refused: neither the `image` nor the `tiff` encoder
/// writes it (write PNG instead).
pub fn write_tiff(path: impl AsRef<Path>, img: &HostImage, sample_type: SampleType) -> Result<()> {
    let path = path.as_ref();
    if img.channels() == 2 || img.height() == 0 || img.width() == 0 {
        let none = match sample_type {
            SampleType::U8 => SamplesRef::U8(&[]),
            SampleType::U16 => SamplesRef::U16(&[]),
            SampleType::F32 => SamplesRef::F32(&[]),
        };
        return encode_tiff(path, hwc(img), none);
    }
    encode_tiff(path, hwc(img), quantised(img, sample_type).as_ref())
}

pub(crate) fn write_gray_f32_tiff<W: Write + Seek>(
    w: W,
    width: u32,
    height: u32,
    v: &[f32],
) -> tiff::TiffResult<()> {
    tiff::encoder::TiffEncoder::new(w)?.write_image::<tiff::encoder::colortype::Gray32Float>(width, height, v)
}

pub(crate) fn image_read_error(path: &Path, name: &'static str, e: ImageError) -> IoError {
    match e {
        ImageError::Limits(_) => IoError::TooLarge {
            path: path.to_owned(),
            limit: MAX_DECODE_BYTES,
        },
        ImageError::Unsupported(u) => IoError::UnsupportedPixelType {
            path: path.to_owned(),
            format: name,
            found: u.to_string(),
            supported: if name == "TIFF" {
                TIFF_READ.into()
            } else {
                "8/16-bit gray, gray+alpha, RGB, RGBA, palette".into()
            },
        },
        // The bytes are in memory, so an I/O error from the decoder is running out of them.
        ImageError::IoError(io) => IoError::corrupt(path, name, eof_reason(&io)),
        other => IoError::corrupt(path, name, other),
    }
}

fn eof_reason(io: &std::io::Error) -> String {
    if io.kind() == std::io::ErrorKind::UnexpectedEof {
        "truncated: the file ends early".into()
    } else {
        io.to_string()
    }
}

pub(crate) fn image_write_error(path: &Path, name: &'static str, e: ImageError) -> IoError {
    match e {
        ImageError::IoError(source) => IoError::Io {
            path: path.to_owned(),
            source,
        },
        other => IoError::Encode {
            path: path.to_owned(),
            format: name,
            reason: other.to_string(),
        },
    }
}

pub(crate) fn tiff_read_error(path: &Path, e: tiff::TiffError) -> IoError {
    match e {
        tiff::TiffError::LimitsExceeded => IoError::TooLarge {
            path: path.to_owned(),
            limit: MAX_DECODE_BYTES,
        },
        tiff::TiffError::UnsupportedError(u) => IoError::UnsupportedPixelType {
            path: path.to_owned(),
            format: "TIFF",
            found: u.to_string(),
            supported: TIFF_READ.into(),
        },
        tiff::TiffError::IoError(io) => IoError::corrupt(path, "TIFF", eof_reason(&io)),
        other => IoError::corrupt(path, "TIFF", other),
    }
}

pub(crate) fn tiff_write_error(path: &Path, e: tiff::TiffError) -> IoError {
    match e {
        tiff::TiffError::IoError(source) => IoError::Io {
            path: path.to_owned(),
            source,
        },
        other => IoError::Encode {
            path: path.to_owned(),
            format: "TIFF",
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantisation_rounds_clamps_and_zeroes_nan() {
        assert_eq!(to_u8(-3.2), 0);
        assert_eq!(to_u8(255.6), 255);
        assert_eq!(to_u8(12.5), 13);
        assert_eq!(to_u8(12.49), 12);
        assert_eq!(to_u8(f32::NAN), 0);
        assert_eq!(to_u8(f32::INFINITY), 255);
        assert_eq!(to_u8(f32::NEG_INFINITY), 0);
        assert_eq!(to_u16(-0.6), 0);
        assert_eq!(to_u16(65535.7), 65535);
        assert_eq!(to_u16(1000.5), 1001);
        assert_eq!(to_u16(f32::NAN), 0);
        assert_eq!(to_u16(1e9), 65535);
    }
}
