//! kiln-io: reading and writing the files kiln's users have (PNG/TIFF images, NPY arrays,
//! NIfTI volumes). No backend and no HTTP here; formats in, host arrays out.
//!
//! Design:
//! - Everything comes back as f32 in ndarray: images as [`HostImage`] (`(H, W, C)` plus the
//!   stored [`SampleType`], values in that type's units, not normalised), volumes as
//!   [`Volume`] (`[i, j, k(, t)]` plus the NIfTI header), raw arrays as [`NpyArray`] (plus the
//!   stored [`NpyDtype`]). Arrays are always in standard (C) layout.
//! - The format is chosen by the file name's ending, case-insensitively ([`Format`]):
//!   `.png .tif .tiff .npy` for images, `.nii .nii.gz .npy` for volumes.
//! - Codecs are crates (`image`, `tiff`, `ndarray-npy`, `nifti`); this crate adds the typed
//!   errors, the conversions and atomic writes. Every write goes to a temporary file in the
//!   target's directory and is renamed into place, so a failed write never leaves a partial
//!   file (and never clobbers the old one).
//! - Bad input is an [`IoError`] naming the file and what to do, never a panic.
//!
//! Conversions on write: to u8/u16 values round to nearest (halves away from zero) and clamp
//! to the type's range; NaN becomes 0 ([`to_u8`], [`to_u16`]). f32 is written as is.
//!
//! ```
//! use kiln_io::{read_image, read_volume, write_image, write_volume, HostImage, SampleType};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("frame.tif");
//! # write_image(&path, &HostImage::new(ndarray::Array3::from_elem((4, 6, 1), 700.0), SampleType::U16), SampleType::U16)?;
//! let img = read_image(&path)?; // (H, W, C) f32, values 0..=65535 for a 16-bit file
//! let smoothed = img.data.mapv(|v| v * 0.5);
//! write_image(dir.path().join("out.png"), &HostImage::new(smoothed, img.sample_type), img.sample_type)?;
//!
//! # write_volume(dir.path().join("scan.nii.gz"), &kiln_io::Volume::new(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[3, 3, 3]), 1.0)))?;
//! let mut vol = read_volume(dir.path().join("scan.nii.gz"))?; // header and affine kept
//! vol.data.mapv_inplace(|v| v.max(0.0));
//! write_volume(dir.path().join("scan_clipped.nii.gz"), &vol)?; // float32, same header
//! # Ok(())
//! # }
//! ```
//!
//! Limits of the underlying crates: PNG has no float samples (f32 goes to TIFF or NPY);
//! gray+alpha TIFF can be read but not written; TIFF reads the first page only; NIfTI
//! header/image pairs (`.hdr/.img`), NIfTI-2, RGB and complex volumes are not supported.
#![deny(missing_docs)]

mod atomic;
pub mod basket_csv;
mod error;
mod npy;
pub mod options_csv;
mod peek;
pub mod quotes_csv;
mod raster;
mod samples;
pub mod scenarios_csv;
pub mod surface_csv;
mod table;
mod volume;

use std::path::Path;

use ndarray::{ArrayBase, Axis, Data, Dimension, Ix3};

pub use atomic::{durable_writes, set_durable_writes};
pub use error::{IoError, Result};
pub use nifti::{Extender, Extension, ExtensionSequence, NiftiHeader, NiftiType};
pub use npy::{open_npy, read_npy, read_npy_f64, read_npy_mask, write_npy, NpyArray, NpyDtype, NpyFile};
pub use peek::{check_elements, peek_shape, read_image_limited, read_volume_limited, ArrayHeader};
pub use raster::{
    read_png, read_tiff, to_u16, to_u8, write_png, write_tiff, HostImage, SampleType, MAX_DECODE_BYTES,
};
pub use samples::{
    open_image_file, write_image_samples, ImageFile, ImageInfo, OwnedSamples, SamplesMut, SamplesRef,
};
pub use volume::{header_affine, read_nifti, write_nifti, Volume};

/// A file format kiln-io knows, as named by a file's ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `.png`
    Png,
    /// `.tif`, `.tiff`
    Tiff,
    /// `.npy`
    Npy,
    /// `.nii`
    Nifti,
    /// `.nii.gz`
    NiftiGz,
}

/// The endings [`read_image`] and [`write_image`] accept.
pub const IMAGE_EXTENSIONS: &str = ".png .tif .tiff .npy";
/// The endings [`read_volume`] and [`write_volume`] accept.
pub const VOLUME_EXTENSIONS: &str = ".nii .nii.gz .npy";

impl Format {
    /// The format a path names by its ending (case-insensitive), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        [
            (".nii.gz", Format::NiftiGz),
            (".nii", Format::Nifti),
            (".png", Format::Png),
            (".tiff", Format::Tiff),
            (".tif", Format::Tiff),
            (".npy", Format::Npy),
        ]
        .into_iter()
        .find(|(ext, _)| name.ends_with(ext) && name.len() > ext.len())
        .map(|(_, f)| f)
    }
}

pub(crate) fn image_format(path: &Path) -> Result<Format> {
    match Format::from_path(path) {
        Some(f @ (Format::Png | Format::Tiff | Format::Npy)) => Ok(f),
        _ => Err(IoError::UnknownExtension {
            path: path.to_owned(),
            what: "image",
            supported: IMAGE_EXTENSIONS,
        }),
    }
}

fn volume_format(path: &Path) -> Result<Format> {
    match Format::from_path(path) {
        Some(f @ (Format::Nifti | Format::NiftiGz | Format::Npy)) => Ok(f),
        _ => Err(IoError::UnknownExtension {
            path: path.to_owned(),
            what: "volume",
            supported: VOLUME_EXTENSIONS,
        }),
    }
}

const NPY_IMAGE_SHAPE: &str = "(H, W) or (H, W, C) with C in 1..=4 (use read_volume for 3-D data)";

/// Reads a 2-D image: PNG, TIFF, or an NPY array shaped `(H, W)` or `(H, W, C)` with C in
/// 1..=4 (its sample type is u8 for uint8, u16 for uint16, f32 for float32/float64).
pub fn read_image(path: impl AsRef<Path>) -> Result<HostImage> {
    let path = path.as_ref();
    let img = match image_format(path)? {
        Format::Png => read_png(path)?,
        Format::Tiff => read_tiff(path)?,
        _ => {
            let arr = read_npy(path)?;
            let data = match arr.data.ndim() {
                2 => arr.data.insert_axis(Axis(2)),
                3 if (1..=4).contains(&arr.data.shape()[2]) => arr.data,
                _ => {
                    return Err(IoError::UnsupportedDimensionality {
                        path: path.to_owned(),
                        shape: arr.data.shape().to_vec(),
                        expected: NPY_IMAGE_SHAPE,
                    })
                }
            };
            let data = data
                .into_dimensionality::<Ix3>()
                .map_err(|e| IoError::corrupt(path, "NPY", e))?;
            let sample_type = match arr.dtype {
                NpyDtype::U8 => SampleType::U8,
                NpyDtype::U16 => SampleType::U16,
                NpyDtype::F32 | NpyDtype::F64 => SampleType::F32,
            };
            HostImage::new(data, sample_type)
        }
    };
    if img.height() == 0 || img.width() == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height: img.height(),
            width: img.width(),
        });
    }
    Ok(img)
}

/// Writes an image in `sample_type` (u8/u16 quantised as [`to_u8`] / [`to_u16`] say),
/// atomically. PNG takes u8/u16 with 1-4 channels; TIFF u8/u16/f32 with 1, 3 or 4; NPY any
/// sample type, stored as uint8/uint16/float32 shaped `(H, W)` for one channel, else
/// `(H, W, C)`.
pub fn write_image(path: impl AsRef<Path>, img: &HostImage, sample_type: SampleType) -> Result<()> {
    let path = path.as_ref();
    let format = image_format(path)?;
    if img.height() == 0 || img.width() == 0 {
        return Err(IoError::EmptyImage {
            path: path.to_owned(),
            height: img.height(),
            width: img.width(),
        });
    }
    match format {
        Format::Png => write_png(path, img, sample_type),
        Format::Tiff => write_tiff(path, img, sample_type),
        _ => {
            let data = if img.channels() == 1 {
                img.data.index_axis(Axis(2), 0).into_dyn()
            } else {
                img.data.view().into_dyn()
            };
            write_npy_typed(path, &data, sample_type)
        }
    }
}

fn write_npy_typed<S, D>(path: &Path, data: &ArrayBase<S, D>, st: SampleType) -> Result<()>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    match st {
        SampleType::U8 => npy::write_npy_as(path, &data.mapv(to_u8)),
        SampleType::U16 => npy::write_npy_as(path, &data.mapv(to_u16)),
        SampleType::F32 => write_npy(path, data),
    }
}

/// Reads a 3-D or 4-D volume: NIfTI-1 (`.nii`, `.nii.gz`, see [`read_nifti`]) or an NPY
/// array with 3 or 4 dimensions (taken as `[i, j, k(, t)]` as stored, with a default
/// header).
pub fn read_volume(path: impl AsRef<Path>) -> Result<Volume> {
    let path = path.as_ref();
    match volume_format(path)? {
        Format::Nifti | Format::NiftiGz => read_nifti(path),
        _ => {
            let arr = read_npy(path)?;
            if !(3..=4).contains(&arr.data.ndim()) {
                return Err(IoError::UnsupportedDimensionality {
                    path: path.to_owned(),
                    shape: arr.data.shape().to_vec(),
                    expected: "a 3-D or 4-D array (use read_image for 2-D data)",
                });
            }
            Ok(Volume::new(arr.data))
        }
    }
}

/// Writes a volume, atomically: NIfTI-1 float32 with the volume's header (`.nii`,
/// `.nii.gz` compressed; see [`write_nifti`]) or NPY float32 (the header is dropped).
pub fn write_volume(path: impl AsRef<Path>, vol: &Volume) -> Result<()> {
    let path = path.as_ref();
    match volume_format(path)? {
        Format::Nifti => write_nifti(path, vol, false),
        Format::NiftiGz => write_nifti(path, vol, true),
        _ => write_npy(path, &vol.data),
    }
}
