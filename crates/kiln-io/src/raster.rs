//! PNG and TIFF images through the `image` crate (and the `tiff` crate for gray f32 TIFF,
//! which `image` 0.25 neither decodes nor encodes).
//!
//! Pixels are kept in the units of the stored sample type: a u8 image holds 0..=255, a u16
//! image 0..=65535, an f32 image whatever the file holds. Nothing is normalised, so reading
//! and writing back in the same sample type is lossless.

use std::io::{Cursor, Seek, Write};
use std::path::Path;

use image::{
    DynamicImage, ImageBuffer, ImageError, ImageFormat, ImageReader, Limits, Luma, LumaA, Pixel, Rgb, Rgba,
};
use ndarray::Array3;

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};

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
    decode_with_image(path, &bytes, ImageFormat::Png, "PNG")
}

/// Reads the first page of a TIFF: 8/16-bit gray, gray+alpha, RGB, RGBA (CMYK is converted
/// to RGB by `image`), 32-bit float gray, RGB and RGBA.
pub fn read_tiff(path: impl AsRef<Path>) -> Result<HostImage> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    // `image` rejects gray f32, so look at the first IFD and take that one case ourselves.
    let mut limits = tiff::decoder::Limits::default();
    limits.decoding_buffer_size = usize::try_from(MAX_DECODE_BYTES).unwrap_or(usize::MAX);
    let mut dec = tiff::decoder::Decoder::new(Cursor::new(&bytes[..]))
        .map_err(|e| tiff_read_error(path, e))?
        .with_limits(limits);
    if dec.colortype().map_err(|e| tiff_read_error(path, e))? == tiff::ColorType::Gray(32) {
        let (w, h) = dec.dimensions().map_err(|e| tiff_read_error(path, e))?;
        let (h, w) = (h as usize, w as usize);
        if h == 0 || w == 0 {
            return Err(IoError::EmptyImage {
                path: path.to_owned(),
                height: h,
                width: w,
            });
        }
        return match dec.read_image().map_err(|e| tiff_read_error(path, e))? {
            tiff::decoder::DecodingResult::F32(v) => {
                Ok(HostImage::new(shaped(path, "TIFF", h, w, 1, v)?, SampleType::F32))
            }
            _ => Err(IoError::UnsupportedPixelType {
                path: path.to_owned(),
                format: "TIFF",
                found: "32-bit integer gray".into(),
                supported: TIFF_READ.into(),
            }),
        };
    }
    decode_with_image(path, &bytes, ImageFormat::Tiff, "TIFF")
}

const TIFF_READ: &str = "8/16-bit gray, gray+alpha, RGB, RGBA; f32 gray, RGB, RGBA";

/// Writes a PNG in u8 or u16 with the image's channels (1 to 4). PNG has no float samples:
/// `SampleType::F32` is refused (write TIFF or NPY instead).
pub fn write_png(path: impl AsRef<Path>, img: &HostImage, sample_type: SampleType) -> Result<()> {
    let path = path.as_ref();
    check_writable(path, img)?;
    if sample_type == SampleType::F32 {
        return Err(unsupported_write(
            path,
            "PNG",
            img,
            sample_type,
            "u8 or u16 with 1-4 channels (PNG has no float samples; write .tif or .npy for f32)",
        ));
    }
    let dynimg = to_dynamic(path, "PNG", img, sample_type)?;
    write_atomic(path, ".png", |w| {
        dynimg
            .write_with_encoder(image::codecs::png::PngEncoder::new(w))
            .map_err(|e| image_write_error(path, "PNG", e))
    })
}

/// Writes a TIFF (uncompressed) in u8, u16 or f32. Channels: u8/u16 take 1, 3 or 4; f32
/// takes 1, 3 or 4. Gray+alpha TIFF is refused: neither the `image` nor the `tiff` encoder
/// writes it (write PNG instead).
pub fn write_tiff(path: impl AsRef<Path>, img: &HostImage, sample_type: SampleType) -> Result<()> {
    let path = path.as_ref();
    check_writable(path, img)?;
    if img.channels() == 2 {
        return Err(unsupported_write(
            path,
            "TIFF",
            img,
            sample_type,
            "1, 3 or 4 channels (gray+alpha TIFF cannot be encoded; write .png instead)",
        ));
    }
    if sample_type == SampleType::F32 && img.channels() == 1 {
        let (h, w, _) = img.data.dim();
        let (w32, h32) = dims_u32(path, img)?;
        let v: Vec<f32> = img.data.iter().copied().collect();
        debug_assert_eq!(v.len(), h * w);
        return write_atomic(path, ".tif", |out| {
            write_gray_f32_tiff(out, w32, h32, &v).map_err(|e| tiff_write_error(path, e))
        });
    }
    let dynimg = to_dynamic(path, "TIFF", img, sample_type)?;
    write_atomic(path, ".tif", |w| {
        dynimg
            .write_with_encoder(image::codecs::tiff::TiffEncoder::new(w))
            .map_err(|e| image_write_error(path, "TIFF", e))
    })
}

fn write_gray_f32_tiff<W: Write + Seek>(w: W, width: u32, height: u32, v: &[f32]) -> tiff::TiffResult<()> {
    tiff::encoder::TiffEncoder::new(w)?.write_image::<tiff::encoder::colortype::Gray32Float>(width, height, v)
}

fn decode_with_image(
    path: &Path,
    bytes: &[u8],
    format: ImageFormat,
    name: &'static str,
) -> Result<HostImage> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| image_read_error(path, name, e))?;
    from_dynamic(path, name, img)
}

fn from_dynamic(path: &Path, name: &'static str, img: DynamicImage) -> Result<HostImage> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    if w == 0 || h == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height: h,
            width: w,
        });
    }
    fn f<T: Into<f32>>(v: Vec<T>) -> Vec<f32> {
        v.into_iter().map(Into::into).collect()
    }
    use DynamicImage as D;
    use SampleType as S;
    let (c, st, v) = match img {
        D::ImageLuma8(b) => (1, S::U8, f(b.into_raw())),
        D::ImageLumaA8(b) => (2, S::U8, f(b.into_raw())),
        D::ImageRgb8(b) => (3, S::U8, f(b.into_raw())),
        D::ImageRgba8(b) => (4, S::U8, f(b.into_raw())),
        D::ImageLuma16(b) => (1, S::U16, f(b.into_raw())),
        D::ImageLumaA16(b) => (2, S::U16, f(b.into_raw())),
        D::ImageRgb16(b) => (3, S::U16, f(b.into_raw())),
        D::ImageRgba16(b) => (4, S::U16, f(b.into_raw())),
        D::ImageRgb32F(b) => (3, S::F32, b.into_raw()),
        D::ImageRgba32F(b) => (4, S::F32, b.into_raw()),
        other => {
            return Err(IoError::UnsupportedPixelType {
                path: path.to_owned(),
                format: name,
                found: format!("{:?}", other.color()),
                supported: "8/16-bit and f32 gray, gray+alpha, RGB, RGBA".into(),
            })
        }
    };
    Ok(HostImage::new(shaped(path, name, h, w, c, v)?, st))
}

fn shaped(path: &Path, name: &'static str, h: usize, w: usize, c: usize, v: Vec<f32>) -> Result<Array3<f32>> {
    Array3::from_shape_vec((h, w, c), v).map_err(|e| {
        IoError::corrupt(
            path,
            name,
            format!("decoded pixel count does not match {h}x{w}x{c}: {e}"),
        )
    })
}

fn check_writable(path: &Path, img: &HostImage) -> Result<()> {
    let (h, w, _) = img.data.dim();
    if h == 0 || w == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height: h,
            width: w,
        });
    }
    Ok(())
}

fn dims_u32(path: &Path, img: &HostImage) -> Result<(u32, u32)> {
    match (u32::try_from(img.width()), u32::try_from(img.height())) {
        (Ok(w), Ok(h)) => Ok((w, h)),
        _ => Err(IoError::UnsupportedDimensionality {
            path: path.to_owned(),
            shape: img.data.shape().to_vec(),
            expected: "width and height below 2^32",
        }),
    }
}

fn unsupported_write(
    path: &Path,
    format: &'static str,
    img: &HostImage,
    st: SampleType,
    supported: &str,
) -> IoError {
    IoError::UnsupportedPixelType {
        path: path.to_owned(),
        format,
        found: format!("{}-channel {}", img.channels(), st.name()),
        supported: supported.into(),
    }
}

/// Builds the `image` crate's buffer for the requested sample type, quantising as documented
/// on [`to_u8`] / [`to_u16`].
fn to_dynamic(path: &Path, format: &'static str, img: &HostImage, st: SampleType) -> Result<DynamicImage> {
    let (w, h) = dims_u32(path, img)?;
    fn buf<P: Pixel>(w: u32, h: u32, v: Vec<P::Subpixel>) -> Option<ImageBuffer<P, Vec<P::Subpixel>>> {
        ImageBuffer::from_raw(w, h, v)
    }
    // `iter()` walks in logical (row-major, channel-interleaved) order whatever the layout.
    let u8s = || img.data.iter().map(|&v| to_u8(v)).collect::<Vec<u8>>();
    let u16s = || img.data.iter().map(|&v| to_u16(v)).collect::<Vec<u16>>();
    let f32s = || img.data.iter().copied().collect::<Vec<f32>>();
    use DynamicImage as D;
    use SampleType as S;
    let out = match (st, img.channels()) {
        (S::U8, 1) => buf::<Luma<u8>>(w, h, u8s()).map(D::ImageLuma8),
        (S::U8, 2) => buf::<LumaA<u8>>(w, h, u8s()).map(D::ImageLumaA8),
        (S::U8, 3) => buf::<Rgb<u8>>(w, h, u8s()).map(D::ImageRgb8),
        (S::U8, 4) => buf::<Rgba<u8>>(w, h, u8s()).map(D::ImageRgba8),
        (S::U16, 1) => buf::<Luma<u16>>(w, h, u16s()).map(D::ImageLuma16),
        (S::U16, 2) => buf::<LumaA<u16>>(w, h, u16s()).map(D::ImageLumaA16),
        (S::U16, 3) => buf::<Rgb<u16>>(w, h, u16s()).map(D::ImageRgb16),
        (S::U16, 4) => buf::<Rgba<u16>>(w, h, u16s()).map(D::ImageRgba16),
        (S::F32, 3) => buf::<Rgb<f32>>(w, h, f32s()).map(D::ImageRgb32F),
        (S::F32, 4) => buf::<Rgba<f32>>(w, h, f32s()).map(D::ImageRgba32F),
        _ => None,
    };
    out.ok_or_else(|| {
        unsupported_write(
            path,
            format,
            img,
            st,
            "1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels",
        )
    })
}

fn image_read_error(path: &Path, name: &'static str, e: ImageError) -> IoError {
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

fn image_write_error(path: &Path, name: &'static str, e: ImageError) -> IoError {
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

fn tiff_read_error(path: &Path, e: tiff::TiffError) -> IoError {
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

fn tiff_write_error(path: &Path, e: tiff::TiffError) -> IoError {
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
