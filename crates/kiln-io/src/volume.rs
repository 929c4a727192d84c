//! NIfTI-1 volumes (`.nii`, `.nii.gz`) through the `nifti` crate.
//!
//! Reading applies the header's `scl_slope`/`scl_inter` (the nifti crate does, when the
//! slope is non-zero), so [`Volume::data`] holds real-world values in f32. The header is kept
//! as read: its `datatype`, `bitpix`, `scl_slope` and `scl_inter` describe the file that was
//! read, not `data`. Writing stores float32 with `scl_slope = 1`, `scl_inter = 0` (the data
//! is already scaled) and every other header field (dims from `data`, pixdim, qform/sform
//! codes and matrices, units, intent, descrip, aux_file, ...) and the extensions unchanged.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use ndarray::ArrayD;
use nifti::{
    ExtensionSequence, InMemNiftiObject, IntoNdArray, NiftiError, NiftiHeader, NiftiObject, NiftiType,
};

use crate::atomic::write_atomic_path;
use crate::error::{IoError, Result};

const SUPPORTED: &str = "uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64";

/// A 3-D or 4-D volume in host memory with its NIfTI header.
#[derive(Clone, Debug, PartialEq)]
pub struct Volume {
    /// Voxels indexed `[i, j, k]` or `[i, j, k, t]` (NIfTI's axis order, as nibabel returns
    /// them), in standard (C) layout.
    pub data: ArrayD<f32>,
    /// The NIfTI header. For a volume not read from NIfTI, a default one (unit pixdim,
    /// qform/sform codes 0, so the affine is the pixdim scaling).
    pub header: NiftiHeader,
    /// NIfTI header extensions, written back as read.
    pub extensions: ExtensionSequence,
}

impl Volume {
    /// Wraps voxels with a default header (see [`Volume::header`]).
    pub fn new(data: ArrayD<f32>) -> Self {
        let header = NiftiHeader {
            qform_code: 0,
            sform_code: 0,
            ..NiftiHeader::default()
        };
        Volume {
            data,
            header,
            extensions: ExtensionSequence::new(Default::default(), Vec::new()),
        }
    }

    /// The voxel-to-world affine (row-major 4x4), chosen as the NIfTI-1 standard says: the
    /// sform if `sform_code > 0`, else the qform if `qform_code > 0`, else the pixdim scaling.
    pub fn affine(&self) -> [[f64; 4]; 4] {
        header_affine(&self.header)
    }

    /// Voxel sizes along each axis of `data` (`pixdim[1..=ndim]`).
    pub fn voxel_size(&self) -> Vec<f32> {
        let n = self.data.ndim().min(7);
        self.header.pixdim[1..=n].to_vec()
    }

    /// The header after resampling the first three axes onto a new grid where output voxel
    /// `o` lies at input voxel `o * scale[a] + start[a]` along axis `a` (scipy's `zoom`:
    /// `scale` its factors, `start` 0, or `0.5 * scale - 0.5` with `grid_mode`): the voxel
    /// sizes (`pixdim[1..=3]`) scale, and the sform rows and the qform offset move so that
    /// every output voxel keeps the world position of the point it was sampled from. The
    /// qform's rotation, the codes, the units and the fourth axis stay as they are.
    pub fn resample_grid(&mut self, scale: [f64; 3], start: [f64; 3]) {
        let h = &mut self.header;
        // the qform's affine, before pixdim changes
        let qform = header_affine(&NiftiHeader {
            sform_code: 0,
            ..h.clone()
        });
        for row in [&mut h.srow_x, &mut h.srow_y, &mut h.srow_z] {
            let m: [f64; 4] = row.map(f64::from);
            let t = m[3] + (0..3).map(|j| m[j] * start[j]).sum::<f64>();
            for j in 0..3 {
                row[j] = (m[j] * scale[j]) as f32;
            }
            row[3] = t as f32;
        }
        let q: Vec<f64> = (0..3)
            .map(|r| qform[r][3] + (0..3).map(|j| qform[r][j] * start[j]).sum::<f64>())
            .collect();
        if h.qform_code > 0 {
            h.quatern_x = q[0] as f32;
            h.quatern_y = q[1] as f32;
            h.quatern_z = q[2] as f32;
        }
        for (p, s) in h.pixdim[1..4].iter_mut().zip(scale) {
            *p = (f64::from(*p) * s) as f32;
        }
    }

    /// The element type of the file the volume was read from (`None` for a header that
    /// names no valid type, e.g. one made by [`Volume::new`]).
    pub fn stored_dtype(&self) -> Option<NiftiType> {
        self.header.data_type().ok()
    }
}

/// The affine of a header (see [`Volume::affine`]).
///
/// Computed here rather than through nifti's `nalgebra_affine` feature, which would pull in
/// nalgebra for one 4x4 matrix. The quaternion formula is NIfTI-1's "method 2".
pub fn header_affine(h: &NiftiHeader) -> [[f64; 4]; 4] {
    let p = |i: usize| f64::from(h.pixdim[i]);
    if h.sform_code > 0 {
        let r = |row: &[f32; 4]| row.map(f64::from);
        return [r(&h.srow_x), r(&h.srow_y), r(&h.srow_z), [0.0, 0.0, 0.0, 1.0]];
    }
    if h.qform_code > 0 {
        let (b, c, d) = (
            f64::from(h.quatern_b),
            f64::from(h.quatern_c),
            f64::from(h.quatern_d),
        );
        let a = (1.0 - (b * b + c * c + d * d)).max(0.0).sqrt();
        let qfac = if h.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
        let rot = [
            [
                a * a + b * b - c * c - d * d,
                2.0 * (b * c - a * d),
                2.0 * (b * d + a * c),
            ],
            [
                2.0 * (b * c + a * d),
                a * a + c * c - b * b - d * d,
                2.0 * (c * d - a * b),
            ],
            [
                2.0 * (b * d - a * c),
                2.0 * (c * d + a * b),
                a * a + d * d - c * c - b * b,
            ],
        ];
        let scale = [p(1), p(2), p(3) * qfac];
        let t = [
            f64::from(h.quatern_x),
            f64::from(h.quatern_y),
            f64::from(h.quatern_z),
        ];
        let mut m = [[0.0; 4]; 4];
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] = rot[i][j] * scale[j];
            }
            m[i][3] = t[i];
        }
        m[3][3] = 1.0;
        return m;
    }
    [
        [p(1), 0.0, 0.0, 0.0],
        [0.0, p(2), 0.0, 0.0],
        [0.0, 0.0, p(3), 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
}

/// Reads a single-file NIfTI-1 volume (`.nii`, or gzip-compressed `.nii.gz`: compression is
/// detected from the content), 3-D or 4-D, of any integer or float type, into f32 with the
/// header's scaling applied. Header/image pairs (`.hdr`/`.img`), RGB and complex volumes are
/// refused.
pub fn read_nifti(path: impl AsRef<Path>) -> Result<Volume> {
    read_nifti_capped(path.as_ref(), u64::MAX)
}

/// [`read_nifti`] with the decompressed stream of a `.nii.gz` cut after `max_bytes` (a
/// caller that checked the header's shape passes the bytes that shape needs).
pub(crate) fn read_nifti_capped(path: &Path, max_bytes: u64) -> Result<Volume> {
    let mut file = BufReader::new(File::open(path).map_err(|e| IoError::os(path, e))?);
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut file, &mut magic).map_err(|e| IoError::os(path, e))?;
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    let obj = if n == 2 && magic == [0x1f, 0x8b] {
        InMemNiftiObject::from_reader(flate2::read::GzDecoder::new(head).take(max_bytes))
    } else {
        InMemNiftiObject::from_reader(head)
    }
    .map_err(|e| nifti_read_error(path, e))?;

    let header = obj.header().clone();
    let shape: Vec<usize> = header
        .dim()
        .map_err(|e| nifti_read_error(path, e))?
        .iter()
        .map(|&d| usize::from(d))
        .collect();
    if !(3..=4).contains(&shape.len()) {
        return Err(IoError::UnsupportedDimensionality {
            path: path.to_owned(),
            shape,
            expected: "a 3-D (x, y, z) or 4-D (x, y, z, t) volume",
        });
    }
    let dtype = header.data_type().map_err(|e| nifti_read_error(path, e))?;
    use NiftiType as T;
    if !matches!(
        dtype,
        T::Uint8
            | T::Int8
            | T::Uint16
            | T::Int16
            | T::Uint32
            | T::Int32
            | T::Uint64
            | T::Int64
            | T::Float32
            | T::Float64
    ) {
        return Err(IoError::UnsupportedDtype {
            path: path.to_owned(),
            format: "NIfTI",
            found: format!("{dtype:?}"),
            supported: SUPPORTED,
        });
    }
    let extensions = obj.extensions().clone();
    let data = obj
        .into_volume()
        .into_ndarray::<f32>()
        .map_err(|e| nifti_read_error(path, e))?;
    // NIfTI is Fortran order on disk and the crate keeps it; kiln works in C layout.
    let data = data.as_standard_layout().into_owned();
    Ok(Volume {
        data,
        header,
        extensions,
    })
}

/// Writes a volume as float32 NIfTI-1, gzip-compressed when `gzip` is true, atomically.
///
/// `data` must have 1 to 7 dimensions of at most 32767 voxels each (NIfTI-1 stores them as
/// 16-bit signed integers).
pub fn write_nifti(path: impl AsRef<Path>, vol: &Volume, gzip: bool) -> Result<()> {
    let path = path.as_ref();
    let shape = vol.data.shape();
    if shape.is_empty() || shape.len() > 7 || shape.iter().any(|&d| d == 0 || d > 32767) {
        return Err(IoError::UnsupportedDimensionality {
            path: path.to_owned(),
            shape: shape.to_vec(),
            expected: "1 to 7 dimensions, each of 1..=32767 voxels",
        });
    }
    if vol.header.descrip.len() > 80 {
        return Err(IoError::Encode {
            path: path.to_owned(),
            format: "NIfTI",
            reason: format!("descrip is {} bytes, NIfTI-1 allows 80", vol.header.descrip.len()),
        });
    }
    // The nifti writer opens the path itself and chooses compression by the name's ending,
    // so the temporary file carries the ending.
    let suffix = if gzip { ".nii.gz" } else { ".nii" };
    write_atomic_path(path, suffix, |tmp| {
        let mut opts = nifti::writer::WriterOptions::new(tmp.path()).reference_header(&vol.header);
        if !vol.extensions.is_empty() {
            opts = opts.with_extensions(vol.extensions.clone());
        }
        opts.write_nifti(&vol.data).map_err(|e| match e {
            NiftiError::Io(source) => IoError::Io {
                path: path.to_owned(),
                source,
            },
            other => IoError::Encode {
                path: path.to_owned(),
                format: "NIfTI",
                reason: other.to_string(),
            },
        })?;
        // The nifti writer drops its BufWriter without checking the final flush; check that
        // everything reached the file rather than rename a short one into place.
        let written = tmp.as_file().metadata().map_err(|e| IoError::os(path, e))?.len();
        let expected = 352 + vol.extensions.bytes_on_disk() as u64 + 4 * vol.data.len() as u64;
        let short = if gzip { written == 0 } else { written != expected };
        if short {
            return Err(IoError::Io {
                path: path.to_owned(),
                source: std::io::Error::other(format!(
                    "the NIfTI writer left {written} bytes in the temporary file (expected {})",
                    if gzip {
                        "more than 0".to_string()
                    } else {
                        expected.to_string()
                    }
                )),
            });
        }
        Ok(())
    })
}

/// Reads into `buf` until it is full or the input ends; returns the bytes read.
pub(crate) fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

pub(crate) fn nifti_read_error(path: &Path, e: NiftiError) -> IoError {
    use std::io::ErrorKind as K;
    let reason = match e {
        NiftiError::Io(io) => match io.kind() {
            K::UnexpectedEof => "truncated: the file ends early".to_string(),
            K::InvalidData | K::InvalidInput => io.to_string(),
            _ => {
                return IoError::Io {
                    path: path.to_owned(),
                    source: io,
                }
            }
        },
        NiftiError::UnsupportedDataType(t) => {
            return IoError::UnsupportedDtype {
                path: path.to_owned(),
                format: "NIfTI",
                found: format!("{t:?}"),
                supported: SUPPORTED,
            }
        }
        NiftiError::IncompatibleLength(got, expected) => {
            format!("truncated: {got} of the {expected} voxel bytes the header announces")
        }
        NiftiError::NoVolumeData => {
            "the header says the voxels are in a separate .img file (a .hdr/.img pair), which kiln does not read; convert it to .nii".to_string()
        }
        NiftiError::ReserveVolume(bytes, _) => {
            format!("the header announces {bytes} bytes of voxels, more than can be allocated")
        }
        other => other.to_string(),
    };
    IoError::corrupt(path, "NIfTI", reason)
}
