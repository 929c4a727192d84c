//! What a file will decode to, from its header alone: [`peek_shape`] reads the PNG IHDR (and
//! the chunks before the image data), the first TIFF IFD, the NPY header or the NIfTI-1
//! header (through gzip for `.nii.gz`) and returns the decoded shape and element type
//! without decoding, so a caller can refuse a file whose pixels or voxels are past its limit
//! before any buffer is sized by it (a 64 KiB PNG of zeros may claim 8192x8192 pixels).
//!
//! The readers with a limit ([`read_image_limited`], [`read_volume_limited`]) check the
//! header first and then decode with the decoders' own allocations capped at the limit's
//! bytes (the `image` and `tiff` crates' limits; for gzip, the decompressed stream cut at the
//! header's size), so a header that lies still cannot make a decoder allocate past the cap.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use image::codecs::png::PngDecoder;
use image::codecs::tiff::TiffDecoder;
use image::{ImageDecoder, Limits};

use crate::error::{IoError, Result};
use crate::{Format, HostImage, Volume};

/// What a file holds by its header: the decoded shape and the stored element type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayHeader {
    /// The format, as the file's name says.
    pub format: Format,
    /// The decoded shape: `(H, W, C)` for PNG and TIFF (channels after palette and
    /// transparency expansion), the stored shape for NPY, `(x, y, z(, t))` for NIfTI.
    pub shape: Vec<usize>,
    /// The stored element type as the format names it (`u8`, `u16`, `f32`, `Int16`, `<f8`).
    pub dtype: String,
    /// Bytes of one stored element.
    pub bytes_per_element: u64,
}

impl ArrayHeader {
    /// Elements of the decoded array (the product of the shape; saturating).
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64))
    }

    /// The shape as `8192x8192x1`.
    pub fn shape_text(&self) -> String {
        self.shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x")
    }
}

/// Small allocations a header reader may make (chunk and IFD tables), never the pixels.
const HEADER_ALLOC: u64 = 16 << 20;

/// The shape and element type `path` decodes to, read from its header only (see the
/// [module docs](self)); the format is chosen by the file's ending as [`Format`] says.
pub fn peek_shape(path: impl AsRef<Path>) -> Result<ArrayHeader> {
    let path = path.as_ref();
    let format = Format::from_path(path).ok_or_else(|| IoError::UnknownExtension {
        path: path.to_owned(),
        what: "array",
        supported: ".png .tif .tiff .npy .nii .nii.gz",
    })?;
    let open = || {
        File::open(path)
            .map(BufReader::new)
            .map_err(|e| IoError::os(path, e))
    };
    let (shape, dtype, bytes) = match format {
        Format::Png => {
            let mut limits = Limits::default();
            limits.max_alloc = Some(HEADER_ALLOC);
            let d = PngDecoder::with_limits(open()?, limits)
                .map_err(|e| crate::raster::image_read_error(path, "PNG", e))?;
            image_shape(path, d.dimensions(), d.color_type())?
        }
        Format::Tiff => {
            let mut d =
                tiff::decoder::Decoder::new(open()?).map_err(|e| crate::raster::tiff_read_error(path, e))?;
            let (w, h) = d
                .dimensions()
                .map_err(|e| crate::raster::tiff_read_error(path, e))?;
            let ct = d
                .colortype()
                .map_err(|e| crate::raster::tiff_read_error(path, e))?;
            if ct == tiff::ColorType::Gray(32) {
                (vec![h as usize, w as usize, 1], "f32".to_string(), 4)
            } else {
                let d = TiffDecoder::new(open()?)
                    .map_err(|e| crate::raster::image_read_error(path, "TIFF", e))?;
                image_shape(path, d.dimensions(), d.color_type())?
            }
        }
        Format::Npy => {
            let f = crate::open_npy(path)?;
            let (name, bytes) = match f.dtype() {
                crate::NpyDtype::U8 => ("u8", 1),
                crate::NpyDtype::U16 => ("u16", 2),
                crate::NpyDtype::F32 => ("f32", 4),
                crate::NpyDtype::F64 => ("f64", 8),
            };
            (f.shape().to_vec(), name.to_string(), bytes)
        }
        Format::Nifti | Format::NiftiGz => {
            let mut file = open()?;
            let mut magic = [0u8; 2];
            let n = crate::volume::read_up_to(&mut file, &mut magic).map_err(|e| IoError::os(path, e))?;
            let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
            let header = if n == 2 && magic == [0x1f, 0x8b] {
                // the header is the first 348 bytes of the stream: read no more than that
                nifti::NiftiHeader::from_reader(flate2::read::GzDecoder::new(head).take(348))
            } else {
                nifti::NiftiHeader::from_reader(head.take(348))
            }
            .map_err(|e| crate::volume::nifti_read_error(path, e))?;
            let dims: Vec<usize> = header
                .dim()
                .map_err(|e| crate::volume::nifti_read_error(path, e))?
                .iter()
                .map(|&d| usize::from(d))
                .collect();
            let (name, bytes) = match header.data_type() {
                Ok(t) => (format!("{t:?}"), t.size_of() as u64),
                Err(_) => (format!("datatype {}", header.datatype), 8),
            };
            (dims, name, bytes)
        }
    };
    Ok(ArrayHeader {
        format,
        shape,
        dtype,
        bytes_per_element: bytes,
    })
}

/// `(H, W, C)`, the sample type's name and bytes of an image decoder's header.
fn image_shape(
    path: &Path,
    (w, h): (u32, u32),
    color: image::ColorType,
) -> Result<(Vec<usize>, String, u64)> {
    let channels = usize::from(color.channel_count());
    let bytes = u64::from(color.bytes_per_pixel()) / u64::from(color.channel_count().max(1));
    let dtype = match bytes {
        1 => "u8",
        2 => "u16",
        _ => "f32",
    };
    if h == 0 || w == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height: h as usize,
            width: w as usize,
        });
    }
    Ok((vec![h as usize, w as usize, channels], dtype.to_string(), bytes))
}

/// [`peek_shape`], refused with [`IoError::TooManyElements`] when the file decodes to more
/// than `max_elements` elements.
pub fn check_elements(path: impl AsRef<Path>, max_elements: u64) -> Result<ArrayHeader> {
    let path = path.as_ref();
    let h = peek_shape(path)?;
    if h.elements() > max_elements {
        return Err(IoError::TooManyElements {
            path: path.to_owned(),
            shape: h.shape.clone(),
            elements: h.elements(),
            limit: max_elements,
        });
    }
    Ok(h)
}

/// Bytes a decoder may allocate for at most `max_elements` elements of at most 4 bytes
/// (u8, u16 or f32 samples), with room for its tables.
fn image_cap(max_elements: u64) -> u64 {
    max_elements.saturating_mul(4).saturating_add(HEADER_ALLOC)
}

/// [`crate::read_image`] of a file that decodes to at most `max_elements` samples (H x W x
/// C): the header is checked first ([`check_elements`]) and the decoder's allocations are
/// capped at that many samples' bytes.
pub fn read_image_limited(path: impl AsRef<Path>, max_elements: u64) -> Result<HostImage> {
    let path = path.as_ref();
    check_elements(path, max_elements)?;
    match crate::image_format(path)? {
        Format::Png | Format::Tiff => {
            let name = if Format::from_path(path) == Some(Format::Png) {
                "PNG"
            } else {
                "TIFF"
            };
            let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
            let file = crate::samples::open_bytes_capped(path, name, bytes, image_cap(max_elements))?;
            crate::raster::to_host_image(file)
        }
        _ => crate::read_image(path),
    }
}

/// [`crate::read_volume`] of a file that decodes to at most `max_elements` voxels: the
/// header is checked first ([`check_elements`]); a gzip stream is cut after the bytes the
/// header's shape needs, so a lying header cannot inflate past the cap.
pub fn read_volume_limited(path: impl AsRef<Path>, max_elements: u64) -> Result<Volume> {
    let path = path.as_ref();
    let h = check_elements(path, max_elements)?;
    match Format::from_path(path) {
        Some(Format::Nifti | Format::NiftiGz) => {
            // the stream holds the header, the extensions (up to vox_offset) and the data:
            // 16 MiB for the header and extensions (more reads as truncated) plus the
            // bytes the checked shape needs
            let cap = h
                .elements()
                .saturating_mul(h.bytes_per_element)
                .saturating_add(HEADER_ALLOC);
            crate::volume::read_nifti_capped(path, cap)
        }
        _ => crate::read_volume(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{write_image_samples, write_volume, SamplesRef};

    fn zeros_png(dir: &Path, h: usize, w: usize) -> std::path::PathBuf {
        let p = dir.join(format!("z{h}x{w}.png"));
        write_image_samples(&p, h, w, 1, SamplesRef::U8(&vec![0u8; h * w])).unwrap();
        p
    }

    /// Every format's header gives the decoded shape and type without decoding.
    #[test]
    fn headers_give_shape_and_type() {
        let t = tempfile::tempdir().unwrap();
        let png = zeros_png(t.path(), 300, 200);
        let h = peek_shape(&png).unwrap();
        assert_eq!(
            (h.shape.as_slice(), h.dtype.as_str(), h.elements()),
            (&[300, 200, 1][..], "u8", 60_000)
        );
        let tif = t.path().join("rgb16.tif");
        write_image_samples(&tif, 5, 7, 3, SamplesRef::U16(&[1u16; 105])).unwrap();
        let h = peek_shape(&tif).unwrap();
        assert_eq!(
            (h.shape, h.dtype.as_str(), h.bytes_per_element),
            (vec![5, 7, 3], "u16", 2)
        );
        let tif = t.path().join("f.tif");
        write_image_samples(&tif, 4, 6, 1, SamplesRef::F32(&[0.5f32; 24])).unwrap();
        assert_eq!(peek_shape(&tif).unwrap().shape, [4, 6, 1]);
        let npy = t.path().join("u8.npy");
        write_image_samples(&npy, 11, 13, 1, SamplesRef::U8(&[1u8; 143])).unwrap();
        let h = peek_shape(&npy).unwrap();
        assert_eq!(
            (h.shape.clone(), h.dtype.as_str(), h.elements()),
            (vec![11, 13], "u8", 143)
        );
        for name in ["v.nii", "v.nii.gz"] {
            let p = t.path().join(name);
            let v = Volume::new(ndarray::ArrayD::zeros(ndarray::IxDyn(&[9, 8, 7])));
            write_volume(&p, &v).unwrap();
            let h = peek_shape(&p).unwrap();
            assert_eq!((h.shape, h.bytes_per_element), (vec![9, 8, 7], 4), "{name}");
        }
        assert!(matches!(
            peek_shape(t.path().join("x.bmp")),
            Err(IoError::UnknownExtension { .. })
        ));
    }

    /// A file past the limit is refused by its header, naming the count and the limit; one
    /// within it reads as the unlimited reader does.
    #[test]
    fn limited_readers_refuse_by_header() {
        let t = tempfile::tempdir().unwrap();
        let png = zeros_png(t.path(), 2048, 2048);
        let e = read_image_limited(&png, 1_000_000).unwrap_err();
        assert!(
            matches!(
                e,
                IoError::TooManyElements {
                    elements: 4_194_304,
                    limit: 1_000_000,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("4194304") && e.to_string().contains("1000000"),
            "{e}"
        );
        assert_eq!(
            read_image_limited(&png, 1 << 22).unwrap(),
            crate::read_image(&png).unwrap()
        );
        let gz = t.path().join("v.nii.gz");
        write_volume(
            &gz,
            &Volume::new(ndarray::ArrayD::zeros(ndarray::IxDyn(&[64, 64, 64]))),
        )
        .unwrap();
        assert!(matches!(
            read_volume_limited(&gz, 100_000),
            Err(IoError::TooManyElements {
                elements: 262_144,
                ..
            })
        ));
        assert_eq!(
            read_volume_limited(&gz, 262_144).unwrap().data.shape(),
            [64, 64, 64]
        );
    }

    /// The decoders' own caps hold even where the header was not checked: PNG's allocation
    /// limit, and gzip output cut at the cap (a header that understates the data).
    #[test]
    fn decoders_are_capped_at_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let png = zeros_png(t.path(), 1024, 1024);
        let bytes = std::fs::read(&png).unwrap();
        let e = crate::samples::open_bytes_capped(&png, "PNG", bytes, 1 << 16).unwrap_err();
        assert!(
            e.to_string().contains("65536") || matches!(e, IoError::TooLarge { .. }),
            "{e}"
        );
        let gz = t.path().join("v.nii.gz");
        write_volume(
            &gz,
            &Volume::new(ndarray::ArrayD::zeros(ndarray::IxDyn(&[32, 32, 32]))),
        )
        .unwrap();
        let e = crate::volume::read_nifti_capped(&gz, 4096).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }
}
