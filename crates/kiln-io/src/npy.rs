//! NPY arrays through `ndarray-npy`: f32, f64, u8 and u16 of any dimension (C or Fortran
//! order, either byte order) read into f32; f32 (and, for images, u8/u16) written.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};
use ndarray_npy::{ReadNpyError, ReadNpyExt, WritableElement, WriteNpyError, WriteNpyExt};

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};
use crate::raster::SampleType;
use crate::samples::{SamplesMut, SamplesRef};

/// The element type an NPY file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NpyDtype {
    /// `float32` (`<f4` / `>f4`).
    F32,
    /// `float64` (`<f8` / `>f8`); read into f32 with rounding (values beyond f32's range
    /// become infinite).
    F64,
    /// `uint8` (`|u1`).
    U8,
    /// `uint16` (`<u2` / `>u2`).
    U16,
}

impl NpyDtype {
    /// NumPy's name for it: `float32`, `float64`, `uint8`, `uint16`.
    pub fn name(self) -> &'static str {
        match self {
            NpyDtype::F32 => "float32",
            NpyDtype::F64 => "float64",
            NpyDtype::U8 => "uint8",
            NpyDtype::U16 => "uint16",
        }
    }

    fn item_size(self) -> usize {
        match self {
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
            NpyDtype::U8 => 1,
            NpyDtype::U16 => 2,
        }
    }

    /// The descriptors `ndarray-npy` accepts for each type.
    fn from_descr(d: &str) -> Option<Self> {
        match d {
            "<f4" | ">f4" => Some(NpyDtype::F32),
            "<f8" | ">f8" => Some(NpyDtype::F64),
            "|u1" | "u1" | "B" => Some(NpyDtype::U8),
            "<u2" | ">u2" => Some(NpyDtype::U16),
            _ => None,
        }
    }
}

const SUPPORTED: &str = "float32, float64, uint8, uint16";

/// An NPY array read into f32, with the type the file stored.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The values, in the file's shape, in standard (C) layout whatever the file's order.
    pub data: ArrayD<f32>,
    /// The stored element type.
    pub dtype: NpyDtype,
}

/// Reads an `.npy` file of f32, f64, u8 or u16, any dimension, C or Fortran order.
///
/// Other dtypes (ints, bool, complex, structured) are refused with
/// [`IoError::UnsupportedDtype`] naming the file's descriptor.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray> {
    let path = path.as_ref();
    let file = open_npy(path)?;
    if file.dtype() == NpyDtype::F32 {
        // straight into the array's buffer, by several threads (NpyFile::read_into): before,
        // the whole file was read into a Vec and then copied into the array, two passes over
        // fresh memory (an 8192^2 f32 file took 0.35 s on the GPU host, 2026-12-05)
        let shape = file.shape().to_vec();
        let mut v = vec![0f32; file.len()];
        file.read_into(SamplesMut::F32(&mut v))?;
        let data = ArrayD::from_shape_vec(IxDyn(&shape), v)
            .map_err(|e| IoError::corrupt(path, "NPY", e.to_string()))?;
        return Ok(NpyArray {
            data,
            dtype: NpyDtype::F32,
        });
    }
    let (bytes, dtype) = open(path)?;
    let data = match dtype {
        NpyDtype::F32 => read_as::<f32>(path, &bytes)?,
        NpyDtype::F64 => read_as::<f64>(path, &bytes)?.mapv(|v| v as f32),
        NpyDtype::U8 => read_as::<u8>(path, &bytes)?.mapv(f32::from),
        NpyDtype::U16 => read_as::<u16>(path, &bytes)?.mapv(f32::from),
    };
    Ok(NpyArray {
        data: standard(data),
        dtype,
    })
}

/// Reads an `.npy` file as [`read_npy`] does, into f64 without rounding (for filter kernels,
/// whose weights kiln keeps in f64 as scipy does). Returns the stored type too.
pub fn read_npy_f64(path: impl AsRef<Path>) -> Result<(ArrayD<f64>, NpyDtype)> {
    let path = path.as_ref();
    let (bytes, dtype) = open(path)?;
    let data = match dtype {
        NpyDtype::F32 => read_as::<f32>(path, &bytes)?.mapv(f64::from),
        NpyDtype::F64 => read_as::<f64>(path, &bytes)?,
        NpyDtype::U8 => read_as::<u8>(path, &bytes)?.mapv(f64::from),
        NpyDtype::U16 => read_as::<u16>(path, &bytes)?.mapv(f64::from),
    };
    Ok((standard(data), dtype))
}

/// Reads an `.npy` file as a mask (a footprint or structuring element): `bool` (`|b1`, as
/// NumPy saves masks) or any type [`read_npy_f64`] reads, non-zero meaning true. Returns
/// the shape and the values in C order.
pub fn read_npy_mask(path: impl AsRef<Path>) -> Result<(Vec<usize>, Vec<bool>)> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    let header = parse_header(&bytes).map_err(|r| IoError::corrupt(path, "NPY", r))?;
    if header.descr == "|b1" {
        let a = standard(read_as::<bool>(path, &bytes)?);
        return Ok((a.shape().to_vec(), a.iter().copied().collect()));
    }
    let (a, _) = read_npy_f64(path)?;
    Ok((a.shape().to_vec(), a.iter().map(|&v| v != 0.0).collect()))
}

/// Fortran-order files come back with Fortran strides; callers expect C layout.
fn standard<T: Clone>(data: ArrayD<T>) -> ArrayD<T> {
    if data.is_standard_layout() {
        data
    } else {
        data.as_standard_layout().into_owned()
    }
}

/// The file's bytes and dtype, after checking the header and that the data is all there.
fn open(path: &Path) -> Result<(Vec<u8>, NpyDtype)> {
    let bytes = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    let header = parse_header(&bytes).map_err(|r| IoError::corrupt(path, "NPY", r))?;
    let dtype = check_header(path, &header, bytes.len() as u64)?;
    Ok((bytes, dtype))
}

/// The dtype, after checking that the header names one kiln reads and that the file (of
/// `file_len` bytes) holds all the data.
fn check_header(path: &Path, header: &Header, file_len: u64) -> Result<NpyDtype> {
    let dtype = NpyDtype::from_descr(&header.descr).ok_or_else(|| IoError::UnsupportedDtype {
        path: path.to_owned(),
        format: "NPY",
        found: format!("'{}'", header.descr),
        supported: SUPPORTED,
    })?;
    // Check the size before allocating: a corrupt shape must not ask for terabytes.
    let have = usize::try_from(file_len).unwrap_or(usize::MAX) - header.data_offset;
    let need = header
        .shape
        .iter()
        .try_fold(dtype.item_size(), |acc, &d| acc.checked_mul(d));
    match need {
        Some(n) if n <= have => Ok(dtype),
        Some(n) => Err(IoError::corrupt(
            path,
            "NPY",
            format!(
                "truncated: shape {:?} of {} needs {n} data bytes, the file has {have}",
                header.shape,
                dtype.name()
            ),
        )),
        None => Err(IoError::corrupt(
            path,
            "NPY",
            format!("shape {:?} overflows", header.shape),
        )),
    }
}

/// Writes an f32 array of any dimension to `.npy` (`<f4`, C order), atomically.
pub fn write_npy<S, D>(path: impl AsRef<Path>, array: &ArrayBase<S, D>) -> Result<()>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    let path = path.as_ref();
    match array.as_slice() {
        Some(s) => write_npy_raw(path, "<f4", array.shape(), bytes_of(s)),
        None => write_npy_as(path, array),
    }
}

/// The bytes of a slice of plain numbers, in the host's order (little-endian: the only
/// targets kiln builds for; NPY's `<` descriptors say so).
fn bytes_of<T: bytemuck::Pod>(s: &[T]) -> &[u8] {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "NPY writing assumes a little-endian host"
        )
    };
    bytemuck::cast_slice(s)
}

/// The NPY v1.0 header for C-ordered `descr` data of `shape`, padded with spaces to a
/// multiple of 64 bytes and ending in a newline: byte for byte what ndarray-npy writes.
fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}}}");
    let unpadded = 10 + dict.len() + 1;
    let len = unpadded.next_multiple_of(64);
    let mut h = Vec::with_capacity(len);
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    h.extend_from_slice(&((len - 10) as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(len - 1, b' ');
    h.push(b'\n');
    h
}

/// Writes an `.npy` of C-ordered little-endian `data` atomically, the data by several
/// threads at once (positioned writes into the preallocated temporary file). Written by hand
/// rather than through ndarray-npy, whose writer streams through one `Write`: on the H200
/// machine writing a 256 MiB result that way took 0.26 s of a 0.64 s `kiln filter2d`.
fn write_npy_raw(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> Result<()> {
    let header = checked_header(path, descr, shape)?;
    crate::atomic::write_atomic_path(path, ".npy", |tmp| {
        let f = tmp.as_file();
        let os = |e| IoError::os(path, e);
        crate::atomic::reserve(f, (header.len() + data.len()) as u64).map_err(os)?;
        write_parallel(f, 0, &header).map_err(os)?;
        write_parallel(f, header.len() as u64, data).map_err(os)
    })
}

/// [`npy_header`], refused where NPY v1.0's 16-bit header length cannot hold it.
fn checked_header(path: &Path, descr: &str, shape: &[usize]) -> Result<Vec<u8>> {
    let header = npy_header(descr, shape);
    if header.len() >= 1 << 16 {
        return Err(IoError::Encode {
            path: path.to_owned(),
            format: "NPY",
            reason: format!("shape {shape:?} needs a header over 64 KiB"),
        });
    }
    Ok(header)
}

/// Reads `dst.len()` bytes from byte `base` of `f` into `dst` by up to 8 threads, as
/// [`write_parallel`] writes: a page-cached file is copied (and `dst`'s fresh pages faulted
/// in) on several cores at once.
fn read_parallel(f: &File, base: u64, dst: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let per = piece_bytes(dst.len());
    in_pieces(dst.chunks_mut(per), per, base, |c, at| f.read_exact_at(c, at))
}

/// Writes `data` at byte `base` of `f` by up to 8 threads, each a contiguous piece of at
/// least 8 MiB (one thread below that).
fn write_parallel(f: &File, base: u64, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let per = piece_bytes(data.len());
    in_pieces(data.chunks(per), per, base, |c, at| f.write_all_at(c, at))
}

/// The piece each thread of a parallel read or write of `len` bytes takes: `len` split over
/// one thread per 8 MiB (1 to 8 threads), rounded up to whole pages.
fn piece_bytes(len: usize) -> usize {
    const PIECE: usize = 8 << 20;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(len.div_ceil(PIECE))
        .clamp(1, 8);
    len.div_ceil(threads).next_multiple_of(4096).max(1)
}

/// Runs `op(piece, file offset)` for every piece of `pieces` (the i-th at `base + i * per`),
/// the first on this thread and the others on their own; every thread is joined (no early
/// exit), then the first error is returned.
fn in_pieces<C: Send>(
    pieces: impl Iterator<Item = C>,
    per: usize,
    base: u64,
    op: impl Fn(C, u64) -> std::io::Result<()> + Sync,
) -> std::io::Result<()> {
    let mut pieces = pieces.enumerate().map(|(i, c)| (c, base + (i * per) as u64));
    let Some((first, at)) = pieces.next() else {
        return Ok(());
    };
    let op = &op;
    std::thread::scope(|s| {
        let jobs: Vec<_> = pieces.map(|(c, at)| s.spawn(move || op(c, at))).collect();
        let mine = op(first, at);
        let results: Vec<std::io::Result<()>> = jobs
            .into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("an I/O thread panicked")))
            })
            .collect();
        std::iter::once(mine).chain(results).try_for_each(|r| r)
    })
}

/// Writes any element type `ndarray-npy` can write (used for u8/u16 images).
pub(crate) fn write_npy_as<A, S, D>(path: &Path, array: &ArrayBase<S, D>) -> Result<()>
where
    A: WritableElement,
    S: Data<Elem = A>,
    D: Dimension,
{
    write_atomic(path, ".npy", |w| {
        array.write_npy(w).map_err(|e| match e {
            WriteNpyError::Io(source) => IoError::Io {
                path: path.to_owned(),
                source,
            },
            other => IoError::Encode {
                path: path.to_owned(),
                format: "NPY",
                reason: other.to_string(),
            },
        })
    })
}

/// Writes samples of u8, u16 or f32 as an `.npy` of `shape` (C order, the samples' dtype),
/// atomically.
pub(crate) fn write_npy_samples(path: &Path, shape: &[usize], samples: SamplesRef<'_>) -> Result<()> {
    let bad = |e: ndarray::ShapeError| IoError::Encode {
        path: path.to_owned(),
        format: "NPY",
        reason: format!("{} samples do not fill shape {shape:?}: {e}", samples.len()),
    };
    let dims = shape;
    let shape = IxDyn(shape);
    match samples {
        SamplesRef::U8(v) => write_npy_raw(
            path,
            "|u1",
            dims,
            bytes_of(
                ArrayViewD::from_shape(shape, v)
                    .map_err(bad)?
                    .as_slice()
                    .unwrap_or(v),
            ),
        ),
        SamplesRef::U16(v) => write_npy_raw(
            path,
            "<u2",
            dims,
            bytes_of(
                ArrayViewD::from_shape(shape, v)
                    .map_err(bad)?
                    .as_slice()
                    .unwrap_or(v),
            ),
        ),
        SamplesRef::F32(v) => write_npy_raw(
            path,
            "<f4",
            dims,
            bytes_of(
                ArrayViewD::from_shape(shape, v)
                    .map_err(bad)?
                    .as_slice()
                    .unwrap_or(v),
            ),
        ),
    }
}

/// The most header bytes [`open_npy`] reads (NumPy writes headers of a few hundred bytes).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// An `.npy` file whose header has been read and checked: its data is read by
/// [`NpyFile::read_into`], straight into the caller's buffer when the file is C-ordered
/// little-endian data of the buffer's type.
#[derive(Debug)]
pub struct NpyFile {
    path: PathBuf,
    file: File,
    header: Header,
    dtype: NpyDtype,
    file_len: u64,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("descr", &self.descr)
            .field("shape", &self.shape)
            .finish()
    }
}

/// Opens an `.npy` file of f32, f64, u8 or u16 and reads its header, checking what
/// [`read_npy`] checks (dtype, that the file holds all the data) without reading the data.
pub fn open_npy(path: impl AsRef<Path>) -> Result<NpyFile> {
    let path = path.as_ref();
    let mut file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let file_len = file.metadata().map_err(|e| IoError::os(path, e))?.len();
    let mut head = vec![0u8; file_len.min(MAX_HEADER_BYTES).min(4096) as usize];
    file.read_exact(&mut head).map_err(|e| IoError::os(path, e))?;
    // The header may be longer than the first read: read up to its stated end.
    let header = match parse_header(&head) {
        Err(r) if r.starts_with("truncated") && file_len > head.len() as u64 => {
            let more = file_len.min(MAX_HEADER_BYTES) as usize - head.len();
            let at = head.len();
            head.resize(at + more, 0);
            file.read_exact(&mut head[at..])
                .map_err(|e| IoError::os(path, e))?;
            parse_header(&head)
        }
        other => other,
    }
    .map_err(|r| IoError::corrupt(path, "NPY", r))?;
    let dtype = check_header(path, &header, file_len)?;
    Ok(NpyFile {
        path: path.to_owned(),
        file,
        header,
        dtype,
        file_len,
    })
}

impl NpyFile {
    /// The shape as stored.
    pub fn shape(&self) -> &[usize] {
        &self.header.shape
    }

    /// The stored element type.
    pub fn dtype(&self) -> NpyDtype {
        self.dtype
    }

    /// The sample type the data is read as: u8, u16, or f32 (for float32 and float64).
    pub fn sample_type(&self) -> SampleType {
        match self.dtype {
            NpyDtype::U8 => SampleType::U8,
            NpyDtype::U16 => SampleType::U16,
            NpyDtype::F32 | NpyDtype::F64 => SampleType::F32,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.header.shape.iter().product()
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the data in C order into `dst`, which must be of [`NpyFile::sample_type`] and
    /// hold [`NpyFile::len`] elements (float64 is rounded to f32 as [`read_npy`] does).
    pub fn read_into(mut self, mut dst: SamplesMut<'_>) -> Result<()> {
        let path = self.path.clone();
        if dst.sample_type() != self.sample_type() || dst.len() != self.len() {
            return Err(IoError::UnsupportedDtype {
                path,
                format: "NPY buffer",
                found: format!("a buffer of {} {} elements", dst.len(), dst.sample_type().name()),
                supported: "as many elements as the array, of its sample type",
            });
        }
        let need = (self.len() * self.dtype.item_size()) as u64;
        let native = cfg!(target_endian = "little") && !self.header.descr.starts_with('>');
        let direct = native && !self.header.fortran_order && self.dtype != NpyDtype::F64;
        if direct {
            let extra = self.file_len - self.header.data_offset as u64 - need;
            if extra > 0 {
                // as ndarray-npy refuses it in read_npy
                return Err(IoError::corrupt(
                    &path,
                    "NPY",
                    format!("{extra} unexpected bytes after the data"),
                ));
            }
            return read_parallel(&self.file, self.header.data_offset as u64, dst.bytes_mut()).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    IoError::corrupt(&path, "NPY", "truncated: the file ends early")
                } else {
                    IoError::os(&path, e)
                }
            });
        }
        let mut bytes = Vec::with_capacity(self.file_len as usize);
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_end(&mut bytes))
            .map_err(|e| IoError::os(&path, e))?;
        fn fill<T: Copy>(dst: &mut [T], a: ArrayD<T>) {
            for (d, s) in dst.iter_mut().zip(a.iter()) {
                *d = *s;
            }
        }
        match (self.dtype, dst) {
            (NpyDtype::U8, SamplesMut::U8(d)) => fill(d, read_as::<u8>(&path, &bytes)?),
            (NpyDtype::U16, SamplesMut::U16(d)) => fill(d, read_as::<u16>(&path, &bytes)?),
            (NpyDtype::F32, SamplesMut::F32(d)) => fill(d, read_as::<f32>(&path, &bytes)?),
            (NpyDtype::F64, SamplesMut::F32(d)) => fill(d, read_as::<f64>(&path, &bytes)?.mapv(|v| v as f32)),
            (_, d) => {
                return Err(IoError::UnsupportedDtype {
                    path,
                    format: "NPY buffer",
                    found: format!("a buffer of {}", d.sample_type().name()),
                    supported: "a buffer of the array's sample type",
                })
            }
        }
        Ok(())
    }
}

fn read_as<T: ndarray_npy::ReadableElement>(path: &Path, bytes: &[u8]) -> Result<ArrayD<T>> {
    ArrayD::<T>::read_npy(bytes).map_err(|e| {
        let reason = match e {
            ReadNpyError::MissingData => "truncated: the file ends before all data".to_string(),
            ReadNpyError::ExtraBytes(n) => format!("{n} unexpected bytes after the data"),
            ReadNpyError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                "truncated: the file ends early".to_string()
            }
            other => other.to_string(),
        };
        IoError::corrupt(path, "NPY", reason)
    })
}

/// What the header says.
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
    data_offset: usize,
}

/// Parses the NPY header (magic, version, length, dict literal).
///
/// Written here because ndarray-npy 0.9 keeps its header parser private, and kiln needs the
/// dtype (to pick the element type to read) and the shape (to bound the allocation) before
/// reading. The dict itself is parsed by `py_literal`, as ndarray-npy does.
fn parse_header(bytes: &[u8]) -> std::result::Result<Header, String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("missing the NPY magic string `\\x93NUMPY`".into());
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => {
            let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (usize::try_from(n).map_err(|e| e.to_string())?, 12)
        }
        v => return Err(format!("unknown NPY format version {v}.{}", bytes[7])),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated: the file ends inside the header")?;
    let text = std::str::from_utf8(&bytes[start..end]).map_err(|e| format!("header: {e}"))?;
    let dict = match text.trim_end().parse::<py_literal::Value>() {
        Ok(py_literal::Value::Dict(d)) => d,
        Ok(other) => return Err(format!("header is not a dict: {other}")),
        Err(e) => return Err(format!("header does not parse: {e}")),
    };
    let get = |key: &str| {
        dict.iter()
            .find(|(k, _)| matches!(k, py_literal::Value::String(s) if s == key))
            .map(|(_, v)| v)
    };
    let descr = match get("descr") {
        Some(py_literal::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => return Err("header has no 'descr'".into()),
    };
    let shape = match get("shape") {
        Some(py_literal::Value::Tuple(t)) => t
            .iter()
            .map(|v| match v {
                py_literal::Value::Integer(i) => i.to_string().parse::<usize>().ok(),
                _ => None,
            })
            .collect::<Option<Vec<usize>>>()
            .ok_or("header 'shape' is not a tuple of non-negative integers")?,
        _ => return Err("header has no 'shape' tuple".into()),
    };
    let fortran_order = matches!(get("fortran_order"), Some(py_literal::Value::Boolean(true)));
    Ok(Header {
        descr,
        fortran_order,
        shape,
        data_offset: end,
    })
}

#[cfg(test)]
mod parallel_write_tests {
    use super::*;
    use ndarray_npy::ReadNpyExt;

    /// The hand-written header and the threaded data writes give files NumPy's readers take:
    /// ndarray-npy reads them back equal, at sizes with 1, 2 and 3 dimensions, odd lengths,
    /// and a payload over one writer thread's piece; kiln's threaded reader agrees; each file
    /// replaces the last (larger or smaller) and is exactly as long as its header and data.
    #[test]
    fn parallel_npy_files_read_back_with_ndarray_npy() {
        let dir = tempfile::tempdir().unwrap();
        for shape in [
            vec![1531usize, 2053],
            vec![7],
            vec![3, 5],
            vec![2, 3, 5],
            vec![4099, 2051],
        ] {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|i| (i as f32).sin()).collect();
            let a = ndarray::ArrayD::from_shape_vec(IxDyn(&shape), v).unwrap();
            let p = dir.path().join("a.npy");
            write_npy(&p, &a).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize + 10;
            assert_eq!(header_len % 64, 0, "header padded to 64 bytes");
            assert_eq!(bytes.len(), header_len + 4 * n, "shape {shape:?}: file length");
            let back = ndarray::ArrayD::<f32>::read_npy(std::fs::File::open(&p).unwrap()).unwrap();
            assert_eq!(back, a, "shape {shape:?}");
            let ours = read_npy(&p).unwrap();
            assert_eq!((ours.data, ours.dtype), (a, NpyDtype::F32), "shape {shape:?}");
            let u: Vec<u16> = (0..n).map(|i| (i * 7 % 65536) as u16).collect();
            write_npy_samples(&p, &shape, SamplesRef::U16(&u)).unwrap();
            let back = ndarray::ArrayD::<u16>::read_npy(std::fs::File::open(&p).unwrap()).unwrap();
            assert_eq!(back.as_slice().unwrap(), &u[..]);
        }
    }
}
