//! n-D arrays in and out of files for `kiln ndimage`'s labelling, distance, measurement and
//! `map_coordinates` functions, which work on one whole array (not plane by plane) and write
//! types the filters do not: int32 labels, float64 distances.
//!
//! Reading: PNG and TIFF (one channel: a colour image is refused, these functions take one
//! value per pixel), `.npy` of any rank and of bool, int8..int64, uint8..uint64, float32 or
//! float64 (through ndarray-npy; kiln-io reads only the image types), NIfTI (3-D or 4-D,
//! `[i, j, k(, t)]` as stored, scaled by `scl_slope`/`scl_inter`; the header is kept for the
//! output). Values come back as f64, exact for every stored type but 64-bit integers beyond
//! 2^53, which are refused rather than rounded.
//!
//! Writing is atomic (a temporary file renamed into place): `.npy` int32 or float64 as
//! scipy returns them; NIfTI float32 (kiln-io writes NIfTI as float32 only: integers up to
//! 2^24 are exact, larger ones are refused), the input's header kept when the input was
//! NIfTI; PNG and TIFF 16-bit for integers in 0..=65535 (refused otherwise), TIFF float32
//! for float results.

use crate::filter_cmd::{invalid, io_error, is_same_file};
use kiln_io::{Format, SamplesRef, Volume};
use ndarray::{ArrayD, IxDyn};
use ndarray_npy::{ReadNpyError, ReadNpyExt, WritableElement, WriteNpyExt};
use std::path::Path;

/// An array read from a file, row-major.
pub(crate) struct NdData {
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
    /// The file's type (numpy's name; `float32` for NIfTI, which kiln-io reads as float32).
    pub dtype: &'static str,
    /// The NIfTI header and extensions of a NIfTI input (its data emptied).
    pub volume: Option<Volume>,
}

impl NdData {
    /// The values as integers, each checked to be whole (labels, markers).
    pub(crate) fn integers(&self, flag: &str, path: &Path) -> anyhow::Result<Vec<i64>> {
        self.values
            .iter()
            .map(|&v| {
                if v.fract() == 0.0 && v.abs() <= (1u64 << 53) as f64 {
                    Ok(v as i64)
                } else {
                    Err(invalid(
                        flag,
                        format!(
                            "{} holds {v}; {flag} takes whole numbers (an integer or bool array, \
                             or floats with whole values)",
                            path.display()
                        ),
                    ))
                }
            })
            .collect()
    }
}

/// An array's shape and its values as f64.
type Parsed = (Vec<usize>, Vec<f64>);

/// Every element type tried in turn (the file names one); values that f64 does not hold
/// exactly are refused.
fn read_npy_any(flag: &'static str, path: &Path) -> anyhow::Result<NdData> {
    let bytes = std::fs::read(path).map_err(|e| invalid(flag, format!("{}: {e}", path.display())))?;
    fn try_as<T: ndarray_npy::ReadableElement>(
        bytes: &[u8],
        to: impl Fn(&T) -> Option<f64>,
    ) -> Result<Option<Parsed>, ReadNpyError> {
        match ArrayD::<T>::read_npy(bytes) {
            Ok(a) => Ok(Some((
                a.shape().to_vec(),
                a.iter().map(to).collect::<Option<Vec<f64>>>().unwrap_or_default(),
            ))),
            Err(ReadNpyError::WrongDescriptor(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
    // 64-bit integers beyond 2^53 are not exact in f64: refused (None) instead of rounded
    const EXACT: u64 = 1 << 53;
    macro_rules! attempt {
        ($($t:ty => $name:literal, $conv:expr);* $(;)?) => {$(
            match try_as::<$t>(&bytes, $conv) {
                Ok(Some((shape, values))) => {
                    let n: usize = shape.iter().product();
                    if values.len() != n {
                        return Err(invalid(
                            flag,
                            format!("{}: an {} value is beyond 2^53, which f64 does not hold exactly", path.display(), $name),
                        ));
                    }
                    return Ok(NdData { shape, values, dtype: $name, volume: None });
                }
                Ok(None) => {}
                Err(e) => return Err(invalid(flag, format!("{}: {e}", path.display()))),
            }
        )*};
    }
    attempt! {
        f64 => "float64", |v: &f64| Some(*v);
        f32 => "float32", |v: &f32| Some(f64::from(*v));
        u8 => "uint8", |v: &u8| Some(f64::from(*v));
        u16 => "uint16", |v: &u16| Some(f64::from(*v));
        i32 => "int32", |v: &i32| Some(f64::from(*v));
        i64 => "int64", |v: &i64| (v.unsigned_abs() <= EXACT).then_some(*v as f64);
        bool => "bool", |v: &bool| Some(f64::from(u8::from(*v)));
        i8 => "int8", |v: &i8| Some(f64::from(*v));
        i16 => "int16", |v: &i16| Some(f64::from(*v));
        u32 => "uint32", |v: &u32| Some(f64::from(*v));
        u64 => "uint64", |v: &u64| (*v <= EXACT).then_some(*v as f64);
    }
    Err(invalid(
        flag,
        format!(
            "{}: an .npy of a type kiln does not read here (bool, int8..int64, uint8..uint64, \
             float32, float64 are read; complex and structured arrays are not)",
            path.display()
        ),
    ))
}

/// Reads `path` (the file of `flag`) as an n-D array; see the module docs.
pub(crate) fn read_nd(flag: &'static str, path: &Path) -> anyhow::Result<NdData> {
    match Format::from_path(path) {
        Some(Format::Npy) => read_npy_any(flag, path),
        Some(Format::Png | Format::Tiff) => {
            let img = kiln_io::read_image(path).map_err(io_error(flag))?;
            if img.channels() != 1 {
                return Err(invalid(
                    flag,
                    format!(
                        "{}: an image of {} channels; this function takes one value per pixel \
                         (save a gray image, or one channel as .npy)",
                        path.display(),
                        img.channels()
                    ),
                ));
            }
            Ok(NdData {
                shape: vec![img.height(), img.width()],
                values: img.data.iter().map(|&v| f64::from(v)).collect(),
                dtype: img.sample_type.name(),
                volume: None,
            })
        }
        Some(Format::Nifti | Format::NiftiGz) => {
            let mut vol = kiln_io::read_volume(path).map_err(io_error(flag))?;
            let shape = vol.data.shape().to_vec();
            let values = vol.data.iter().map(|&v| f64::from(v)).collect();
            vol.data = ArrayD::zeros(IxDyn(&[0, 0, 0]));
            Ok(NdData {
                shape,
                values,
                dtype: "float32",
                volume: Some(vol),
            })
        }
        None => Err(invalid(
            flag,
            format!(
                "{}: unknown file extension (.png .tif .tiff .npy .nii .nii.gz)",
                path.display()
            ),
        )),
    }
}

/// What an output file may hold, checked before any work is done.
pub(crate) fn check_output(flag: &'static str, out: &Path, input: &Path) -> anyhow::Result<Format> {
    let f = Format::from_path(out).ok_or_else(|| {
        invalid(
            flag,
            format!(
                "{}: unknown file extension (.npy .nii .nii.gz .png .tif .tiff)",
                out.display()
            ),
        )
    })?;
    if is_same_file(input, out) {
        return Err(invalid(
            flag,
            format!("{} is the input file; write the result elsewhere", out.display()),
        ));
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(invalid(
            flag,
            format!(
                "{}: the directory {} does not exist",
                out.display(),
                dir.display()
            ),
        ));
    }
    Ok(f)
}

/// Writes an `.npy` of any element type ndarray-npy writes, atomically.
pub(crate) fn write_npy_typed<T: WritableElement>(
    flag: &'static str,
    path: &Path,
    shape: &[usize],
    values: Vec<T>,
) -> anyhow::Result<()> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), values)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fail = |e: &dyn std::fmt::Display| invalid(flag, format!("{}: {e}", path.display()));
    let mut tmp = tempfile::Builder::new()
        .prefix(".kiln-tmp-")
        .suffix(".npy")
        .tempfile_in(dir)
        .map_err(|e| fail(&e))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        a.write_npy(&mut w).map_err(|e| fail(&e))?;
        std::io::Write::flush(&mut w).map_err(|e| fail(&e))?;
    }
    if kiln_io::durable_writes() {
        tmp.as_file().sync_all().map_err(|e| fail(&e))?;
    }
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// A NIfTI volume of `values` (3-D or 4-D), with `like`'s header when the input was NIfTI.
fn write_nifti(
    flag: &'static str,
    path: &Path,
    shape: &[usize],
    values: Vec<f32>,
    like: Option<&Volume>,
) -> anyhow::Result<()> {
    if !(3..=4).contains(&shape.len()) {
        return Err(invalid(
            flag,
            format!(
                "{}: NIfTI holds 3-D or 4-D data, the result is {}-D (write .npy)",
                path.display(),
                shape.len()
            ),
        ));
    }
    let data = ArrayD::from_shape_vec(IxDyn(shape), values)?;
    let vol = match like {
        Some(v) => Volume {
            data,
            header: v.header.clone(),
            extensions: v.extensions.clone(),
        },
        None => Volume::new(data),
    };
    Ok(kiln_io::write_volume(path, &vol).map_err(io_error(flag))?)
}

/// Integers (labels, chamfer distances): int32 `.npy`; NIfTI float32 (exact to 2^24); PNG
/// or TIFF 16-bit for 2-D data in 0..=65535. `what` names the values in errors.
pub(crate) fn write_ints(
    flag: &'static str,
    path: &Path,
    shape: &[usize],
    values: Vec<i32>,
    like: Option<&Volume>,
    what: &str,
) -> anyhow::Result<()> {
    let (lo, hi) = values
        .iter()
        .fold((0i32, 0i32), |(l, h), &v| (l.min(v), h.max(v)));
    match Format::from_path(path) {
        Some(Format::Npy) => write_npy_typed(flag, path, shape, values),
        Some(Format::Nifti | Format::NiftiGz) => {
            if lo < -(1 << 24) || hi > 1 << 24 {
                return Err(invalid(
                    flag,
                    format!(
                        "{}: {what} reach {}, beyond 2^24, which NIfTI's float32 does not hold \
                         exactly (write .npy: int32)",
                        path.display(),
                        if hi > 1 << 24 { hi } else { lo }
                    ),
                ));
            }
            write_nifti(
                flag,
                path,
                shape,
                values.iter().map(|&v| v as f32).collect(),
                like,
            )
        }
        Some(Format::Png | Format::Tiff) => {
            let [h, w] = shape[..] else {
                return Err(invalid(
                    flag,
                    format!(
                        "{}: an image file holds 2-D data, the result is {}-D (write .npy)",
                        path.display(),
                        shape.len()
                    ),
                ));
            };
            if lo < 0 || hi > i32::from(u16::MAX) {
                return Err(invalid(
                    flag,
                    format!(
                        "{}: {what} reach {}; a 16-bit image holds 0 to 65535 (write .npy: int32)",
                        path.display(),
                        if lo < 0 { lo } else { hi }
                    ),
                ));
            }
            let v: Vec<u16> = values.iter().map(|&x| x as u16).collect();
            Ok(kiln_io::write_image_samples(path, h, w, 1, SamplesRef::U16(&v)).map_err(io_error(flag))?)
        }
        None => Err(invalid(
            flag,
            format!("{}: unknown file extension", path.display()),
        )),
    }
}

/// Floats (distances, interpolated values): float64 `.npy` (or float32 where `f32_npy`: the
/// type scipy returns for a float32 input), NIfTI and TIFF float32; PNG refused.
pub(crate) fn write_floats(
    flag: &'static str,
    path: &Path,
    shape: &[usize],
    values: Vec<f64>,
    like: Option<&Volume>,
    f32_npy: bool,
) -> anyhow::Result<()> {
    match Format::from_path(path) {
        Some(Format::Npy) if f32_npy => {
            write_npy_typed(flag, path, shape, values.iter().map(|&v| v as f32).collect())
        }
        Some(Format::Npy) => write_npy_typed(flag, path, shape, values),
        Some(Format::Nifti | Format::NiftiGz) => write_nifti(
            flag,
            path,
            shape,
            values.iter().map(|&v| v as f32).collect(),
            like,
        ),
        Some(Format::Tiff) if shape.len() == 2 => {
            let v: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            Ok(
                kiln_io::write_image_samples(path, shape[0], shape[1], 1, SamplesRef::F32(&v))
                    .map_err(io_error(flag))?,
            )
        }
        _ => Err(invalid(
            flag,
            format!(
                "{}: the result is {}-D float data; write .npy (float64), .tif (2-D float32) or \
                 .nii/.nii.gz (3-D/4-D float32)",
                path.display(),
                shape.len()
            ),
        )),
    }
}

/// The file extension check of a float result, before the work.
pub(crate) fn check_float_output(flag: &'static str, path: &Path, ndim: usize) -> anyhow::Result<()> {
    let ok = match Format::from_path(path) {
        Some(Format::Npy) => true,
        Some(Format::Tiff) => ndim == 2,
        Some(Format::Nifti | Format::NiftiGz) => (3..=4).contains(&ndim),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(invalid(
        flag,
        format!(
            "{}: the result is {ndim}-D float data; write .npy (float64), .tif (2-D float32) or \
             .nii/.nii.gz (3-D/4-D float32)",
            path.display()
        ),
    ))
}

/// The file extension check of an integer result, before the work.
pub(crate) fn check_int_output(flag: &'static str, path: &Path, ndim: usize) -> anyhow::Result<()> {
    let ok = match Format::from_path(path) {
        Some(Format::Npy) => true,
        Some(Format::Png | Format::Tiff) => ndim == 2,
        Some(Format::Nifti | Format::NiftiGz) => (3..=4).contains(&ndim),
        None => false,
    };
    if ok {
        return Ok(());
    }
    Err(invalid(
        flag,
        format!(
            "{}: the result is {ndim}-D integer data; write .npy (int32), .png/.tif (2-D, \
             16-bit) or .nii/.nii.gz (3-D/4-D, float32)",
            path.display()
        ),
    ))
}
