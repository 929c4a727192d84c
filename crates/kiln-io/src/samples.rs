//! Images in their stored sample type: PNG and TIFF decoded into a caller's buffer (which
//! may be pinned memory, or one reused from file to file) and encoded from a borrowed one,
//! with no conversion to f32 on the way.
//!
//! [`open_image_file`] reads the file and its header; [`ImageFile::info`] says what the
//! pixels are (so the caller can size its buffer); [`ImageFile::decode_into`] decodes them.
//! [`write_image_samples`] encodes samples of u8, u16 or f32 to PNG, TIFF or NPY. The f32
//! API ([`crate::read_image`], [`crate::write_image`]) is built on these, so both decode and
//! encode the same bytes: a u8 image written from its u8 samples is the file `write_image`
//! writes from the same values in f32.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::codecs::png::{PngDecoder, PngEncoder};
use image::codecs::tiff::{TiffDecoder, TiffEncoder};
use image::{ColorType, ExtendedColorType, ImageDecoder, ImageEncoder, Limits};

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};
use crate::raster::{
    image_read_error, image_write_error, tiff_read_error, tiff_write_error, SampleType, TIFF_READ,
};
use crate::{Format, MAX_DECODE_BYTES};

/// Samples of one stored type, borrowed: row-major, channels interleaved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SamplesRef<'a> {
    /// 8-bit samples.
    U8(&'a [u8]),
    /// 16-bit samples.
    U16(&'a [u16]),
    /// f32 samples.
    F32(&'a [f32]),
}

/// Samples of one stored type, borrowed mutably (a buffer to decode into).
#[derive(Debug, PartialEq)]
pub enum SamplesMut<'a> {
    /// 8-bit samples.
    U8(&'a mut [u8]),
    /// 16-bit samples.
    U16(&'a mut [u16]),
    /// f32 samples.
    F32(&'a mut [f32]),
}

impl SamplesRef<'_> {
    /// The stored type.
    pub fn sample_type(&self) -> SampleType {
        match self {
            SamplesRef::U8(_) => SampleType::U8,
            SamplesRef::U16(_) => SampleType::U16,
            SamplesRef::F32(_) => SampleType::F32,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        match self {
            SamplesRef::U8(v) => v.len(),
            SamplesRef::U16(v) => v.len(),
            SamplesRef::F32(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples as native-endian bytes.
    fn bytes(&self) -> &[u8] {
        match self {
            SamplesRef::U8(v) => v,
            SamplesRef::U16(v) => bytemuck::cast_slice(v),
            SamplesRef::F32(v) => bytemuck::cast_slice(v),
        }
    }
}

impl SamplesMut<'_> {
    /// The stored type.
    pub fn sample_type(&self) -> SampleType {
        match self {
            SamplesMut::U8(_) => SampleType::U8,
            SamplesMut::U16(_) => SampleType::U16,
            SamplesMut::F32(_) => SampleType::F32,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        match self {
            SamplesMut::U8(v) => v.len(),
            SamplesMut::U16(v) => v.len(),
            SamplesMut::F32(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer as native-endian bytes.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            SamplesMut::U8(v) => v,
            SamplesMut::U16(v) => bytemuck::cast_slice_mut(v),
            SamplesMut::F32(v) => bytemuck::cast_slice_mut(v),
        }
    }
}

/// What an image holds, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
    pub channels: usize,
    /// The stored sample type.
    pub sample_type: SampleType,
}

impl ImageInfo {
    /// Samples (height x width x channels).
    pub fn len(&self) -> usize {
        self.height * self.width * self.channels
    }

    /// Whether the image has no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

enum Decoder {
    Png(Box<PngDecoder<Cursor<Vec<u8>>>>),
    Tiff(Box<TiffDecoder<Cursor<Vec<u8>>>>),
    /// Gray f32 TIFF, which `image` does not decode.
    TiffF32(Box<tiff::decoder::Decoder<Cursor<Vec<u8>>>>),
}

/// A PNG or TIFF file whose header has been read (see the [module docs](self)).
pub struct ImageFile {
    path: PathBuf,
    info: ImageInfo,
    decoder: Decoder,
}

impl std::fmt::Debug for ImageFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageFile")
            .field("path", &self.path)
            .field("info", &self.info)
            .finish()
    }
}

/// The channels and sample type of a decoder's colour type, or why kiln does not read it.
fn layout_of(path: &Path, name: &'static str, c: ColorType) -> Result<(usize, SampleType)> {
    use SampleType as S;
    Ok(match c {
        ColorType::L8 => (1, S::U8),
        ColorType::La8 => (2, S::U8),
        ColorType::Rgb8 => (3, S::U8),
        ColorType::Rgba8 => (4, S::U8),
        ColorType::L16 => (1, S::U16),
        ColorType::La16 => (2, S::U16),
        ColorType::Rgb16 => (3, S::U16),
        ColorType::Rgba16 => (4, S::U16),
        ColorType::Rgb32F => (3, S::F32),
        ColorType::Rgba32F => (4, S::F32),
        other => {
            return Err(IoError::UnsupportedPixelType {
                path: path.to_owned(),
                format: name,
                found: format!("{other:?}"),
                supported: "8/16-bit and f32 gray, gray+alpha, RGB, RGBA".into(),
            })
        }
    })
}

fn empty_check(path: &Path, height: usize, width: usize) -> Result<()> {
    if height == 0 || width == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height,
            width,
        });
    }
    Ok(())
}

/// Reads a PNG or TIFF file (by extension) and its header. The pixels are decoded by
/// [`ImageFile::decode_into`]; decoding errors not seen in the header surface there.
pub fn open_image_file(path: impl AsRef<Path>) -> Result<ImageFile> {
    let path = path.as_ref();
    let format = Format::from_path(path);
    let name = match format {
        Some(Format::Png) => "PNG",
        Some(Format::Tiff) => "TIFF",
        _ => {
            return Err(IoError::UnknownExtension {
                path: path.to_owned(),
                what: "PNG or TIFF image",
                supported: ".png .tif .tiff",
            })
        }
    };
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    open_bytes(path, name, bytes)
}

pub(crate) fn open_bytes(path: &Path, name: &'static str, bytes: Vec<u8>) -> Result<ImageFile> {
    open_bytes_capped(path, name, bytes, MAX_DECODE_BYTES)
}

/// [`open_bytes`] with the decoder's allocations capped at `max_bytes`.
pub(crate) fn open_bytes_capped(
    path: &Path,
    name: &'static str,
    bytes: Vec<u8>,
    max_bytes: u64,
) -> Result<ImageFile> {
    let mut limits = Limits::default();
    limits.max_alloc = Some(max_bytes);
    let rerr = |e| image_read_error(path, name, e);
    let (decoder, (w, h), color) = if name == "PNG" {
        let mut d = PngDecoder::with_limits(Cursor::new(bytes), limits.clone()).map_err(rerr)?;
        // As `image::ImageReader::decode` does: the whole image must fit the limit.
        limits.reserve(d.total_bytes()).map_err(rerr)?;
        d.set_limits(limits).map_err(rerr)?;
        let (dims, color) = (d.dimensions(), d.color_type());
        (Decoder::Png(Box::new(d)), dims, color)
    } else {
        // `image` rejects gray f32, so look at the first IFD and take that one case ourselves.
        let mut tl = tiff::decoder::Limits::default();
        tl.decoding_buffer_size = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        let mut dec = tiff::decoder::Decoder::new(Cursor::new(&bytes[..]))
            .map_err(|e| tiff_read_error(path, e))?
            .with_limits(tl.clone());
        if dec.colortype().map_err(|e| tiff_read_error(path, e))? == tiff::ColorType::Gray(32) {
            let (w, h) = dec.dimensions().map_err(|e| tiff_read_error(path, e))?;
            let (h, w) = (h as usize, w as usize);
            empty_check(path, h, w)?;
            let dec = tiff::decoder::Decoder::new(Cursor::new(bytes))
                .map_err(|e| tiff_read_error(path, e))?
                .with_limits(tl);
            return Ok(ImageFile {
                path: path.to_owned(),
                info: ImageInfo {
                    height: h,
                    width: w,
                    channels: 1,
                    sample_type: SampleType::F32,
                },
                decoder: Decoder::TiffF32(Box::new(dec)),
            });
        }
        let mut d = TiffDecoder::new(Cursor::new(bytes)).map_err(rerr)?;
        limits.reserve(d.total_bytes()).map_err(rerr)?;
        d.set_limits(limits).map_err(rerr)?;
        let (dims, color) = (d.dimensions(), d.color_type());
        (Decoder::Tiff(Box::new(d)), dims, color)
    };
    let (channels, sample_type) = layout_of(path, name, color)?;
    let (height, width) = (h as usize, w as usize);
    empty_check(path, height, width)?;
    Ok(ImageFile {
        path: path.to_owned(),
        info: ImageInfo {
            height,
            width,
            channels,
            sample_type,
        },
        decoder,
    })
}

impl ImageFile {
    /// What the pixels are.
    pub fn info(&self) -> ImageInfo {
        self.info
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Decodes the pixels into `dst`, which must be of the image's sample type and hold
    /// exactly [`ImageInfo::len`] samples (row-major, channels interleaved).
    pub fn decode_into(self, mut dst: SamplesMut<'_>) -> Result<()> {
        let path = self.path;
        let info = self.info;
        if dst.sample_type() != info.sample_type || dst.len() != info.len() {
            return Err(IoError::UnsupportedPixelType {
                path: path.clone(),
                format: "image buffer",
                found: format!("a buffer of {} {} samples", dst.len(), dst.sample_type().name()),
                supported: format!(
                    "{} {} samples ({}x{}x{})",
                    info.len(),
                    info.sample_type.name(),
                    info.height,
                    info.width,
                    info.channels
                ),
            });
        }
        match self.decoder {
            Decoder::Png(d) => d
                .read_image(dst.bytes_mut())
                .map_err(|e| image_read_error(&path, "PNG", e)),
            Decoder::Tiff(d) => d
                .read_image(dst.bytes_mut())
                .map_err(|e| image_read_error(&path, "TIFF", e)),
            Decoder::TiffF32(mut d) => match d.read_image().map_err(|e| tiff_read_error(&path, e))? {
                tiff::decoder::DecodingResult::F32(v) if v.len() == info.len() => {
                    if let SamplesMut::F32(out) = dst {
                        out.copy_from_slice(&v);
                    }
                    Ok(())
                }
                tiff::decoder::DecodingResult::F32(v) => Err(IoError::corrupt(
                    &path,
                    "TIFF",
                    format!(
                        "decoded pixel count {} does not match {}x{}x1",
                        v.len(),
                        info.height,
                        info.width
                    ),
                )),
                _ => Err(IoError::UnsupportedPixelType {
                    path: path.clone(),
                    format: "TIFF",
                    found: "32-bit integer gray".into(),
                    supported: TIFF_READ.into(),
                }),
            },
        }
    }

    /// Decodes the pixels into a new vector of their type.
    pub fn decode(self) -> Result<OwnedSamples> {
        let n = self.info.len();
        Ok(match self.info.sample_type {
            SampleType::U8 => {
                let mut v = vec![0u8; n];
                self.decode_into(SamplesMut::U8(&mut v))?;
                OwnedSamples::U8(v)
            }
            SampleType::U16 => {
                let mut v = vec![0u16; n];
                self.decode_into(SamplesMut::U16(&mut v))?;
                OwnedSamples::U16(v)
            }
            SampleType::F32 => {
                let mut v = vec![0f32; n];
                self.decode_into(SamplesMut::F32(&mut v))?;
                OwnedSamples::F32(v)
            }
        })
    }
}

/// Samples of one stored type, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnedSamples {
    /// 8-bit samples.
    U8(Vec<u8>),
    /// 16-bit samples.
    U16(Vec<u16>),
    /// f32 samples.
    F32(Vec<f32>),
}

impl OwnedSamples {
    /// Borrowed.
    pub fn as_ref(&self) -> SamplesRef<'_> {
        match self {
            OwnedSamples::U8(v) => SamplesRef::U8(v),
            OwnedSamples::U16(v) => SamplesRef::U16(v),
            OwnedSamples::F32(v) => SamplesRef::F32(v),
        }
    }

    /// Every sample as f32 (exact for u8 and u16).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            OwnedSamples::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
            OwnedSamples::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
            OwnedSamples::F32(v) => v.clone(),
        }
    }
}

fn color_of(path: &Path, format: &'static str, st: SampleType, c: usize) -> Result<ExtendedColorType> {
    use ExtendedColorType as E;
    use SampleType as S;
    Ok(match (st, c) {
        (S::U8, 1) => E::L8,
        (S::U8, 2) => E::La8,
        (S::U8, 3) => E::Rgb8,
        (S::U8, 4) => E::Rgba8,
        (S::U16, 1) => E::L16,
        (S::U16, 2) => E::La16,
        (S::U16, 3) => E::Rgb16,
        (S::U16, 4) => E::Rgba16,
        (S::F32, 3) => E::Rgb32F,
        (S::F32, 4) => E::Rgba32F,
        _ => {
            return Err(IoError::UnsupportedPixelType {
                path: path.to_owned(),
                format,
                found: format!("{c}-channel {}", st.name()),
                supported: "1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels".into(),
            })
        }
    })
}

/// Writes an `(height, width, channels)` image from samples in their stored type,
/// atomically, by the path's extension: PNG (u8/u16, 1-4 channels), TIFF (u8/u16/f32 with 1,
/// 3 or 4 channels) or NPY (the samples' dtype, `(H, W)` for one channel, else `(H, W, C)`).
/// No conversion: the values are written as they are.
pub fn write_image_samples(
    path: impl AsRef<Path>,
    height: usize,
    width: usize,
    channels: usize,
    samples: SamplesRef<'_>,
) -> Result<()> {
    let path = path.as_ref();
    match crate::image_format(path)? {
        Format::Png => encode_png(path, [height, width, channels], samples),
        Format::Tiff => encode_tiff(path, [height, width, channels], samples),
        _ => {
            empty_check(path, height, width)?;
            check_len(path, [height, width, channels], &samples)?;
            let shape: Vec<usize> = if channels == 1 {
                vec![height, width]
            } else {
                vec![height, width, channels]
            };
            crate::npy::write_npy_samples(path, &shape, samples)
        }
    }
}

fn shape_error(path: &Path, [h, w, c]: [usize; 3], expected: &'static str) -> IoError {
    IoError::UnsupportedDimensionality {
        path: path.to_owned(),
        shape: vec![h, w, c],
        expected,
    }
}

fn check_len(path: &Path, [h, w, c]: [usize; 3], samples: &SamplesRef<'_>) -> Result<()> {
    if h.checked_mul(w).and_then(|n| n.checked_mul(c)) != Some(samples.len()) {
        return Err(shape_error(
            path,
            [h, w, c],
            "as many samples as height x width x channels",
        ));
    }
    Ok(())
}

fn dims_u32(path: &Path, hwc: [usize; 3]) -> Result<(u32, u32)> {
    match (u32::try_from(hwc[1]), u32::try_from(hwc[0])) {
        (Ok(w), Ok(h)) => Ok((w, h)),
        _ => Err(shape_error(path, hwc, "width and height below 2^32")),
    }
}

fn refused(path: &Path, format: &'static str, c: usize, st: SampleType, supported: &str) -> IoError {
    IoError::UnsupportedPixelType {
        path: path.to_owned(),
        format,
        found: format!("{c}-channel {}", st.name()),
        supported: supported.into(),
    }
}

/// Encodes a PNG (whatever the path's extension), atomically.
pub(crate) fn encode_png(path: &Path, hwc: [usize; 3], samples: SamplesRef<'_>) -> Result<()> {
    let [h, w, c] = hwc;
    empty_check(path, h, w)?;
    let st = samples.sample_type();
    if st == SampleType::F32 {
        return Err(refused(
            path,
            "PNG",
            c,
            st,
            "u8 or u16 with 1-4 channels (PNG has no float samples; write .tif or .npy for f32)",
        ));
    }
    let (w32, h32) = dims_u32(path, hwc)?;
    let color = color_of(path, "PNG", st, c)?;
    check_len(path, hwc, &samples)?;
    write_atomic(path, ".png", |out| {
        PngEncoder::new(out)
            .write_image(samples.bytes(), w32, h32, color)
            .map_err(|e| image_write_error(path, "PNG", e))
    })
}

/// Encodes an uncompressed TIFF (whatever the path's extension), atomically.
pub(crate) fn encode_tiff(path: &Path, hwc: [usize; 3], samples: SamplesRef<'_>) -> Result<()> {
    let [h, w, c] = hwc;
    empty_check(path, h, w)?;
    let st = samples.sample_type();
    if c == 2 {
        return Err(refused(
            path,
            "TIFF",
            c,
            st,
            "1, 3 or 4 channels (gray+alpha TIFF cannot be encoded; write .png instead)",
        ));
    }
    let (w32, h32) = dims_u32(path, hwc)?;
    if let (SamplesRef::F32(v), 1) = (samples, c) {
        check_len(path, hwc, &samples)?;
        return write_atomic(path, ".tif", |out| {
            crate::raster::write_gray_f32_tiff(out, w32, h32, v).map_err(|e| tiff_write_error(path, e))
        });
    }
    let color = color_of(path, "TIFF", st, c)?;
    check_len(path, hwc, &samples)?;
    write_atomic(path, ".tif", |out| {
        TiffEncoder::new(out)
            .write_image(samples.bytes(), w32, h32, color)
            .map_err(|e| image_write_error(path, "TIFF", e))
    })
}
