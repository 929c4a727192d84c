//! An `.npy` output whose file is made ready while the result is still being computed.
//!
//! Why: the first time a process writes a large file, the page cache's new pages cost more
//! than the copy into them. On the development machine (ext4 in a VM) the first 256 MiB a
//! process wrote took 0.24-0.39 s by any method (one `write`, eight positioned writes, a
//! shared mapping), a later one 0.07 s; writing 256 MiB of zeros into the file first made
//! the data's own write 0.037 s. A one-file `kiln filter2d` knows its output's shape as soon
//! as it has read the input's header, and then waits ~0.3 s for the CUDA context and the
//! device. [`prepare_npy`] spends that wait writing the file's zeros on background threads;
//! [`PreparedNpy::write`] then writes the header and the data over them and renames the file
//! into place.
//!
//! The file is the same temporary file an ordinary atomic write uses (in the output's
//! directory, deleted if anything fails or the value is dropped unwritten), so the target is
//! either the complete new file or untouched. A full disk surfaces as the fill's error from
//! [`PreparedNpy::write`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::atomic::{persist, temp_for};
use crate::error::{IoError, Result};
use crate::npy::{checked_header, write_parallel};

/// Zeros written per call by a fill thread; the cancel flag is checked between calls.
const FILL_CHUNK: usize = 4 << 20;
/// Fill threads at most: enough to finish 256 MiB well inside a context's creation without
/// taking every core from the input's read.
const FILL_THREADS: usize = 4;

/// An f32 `.npy` output being prepared ([`prepare_npy`]); [`write`](Self::write) finishes it.
#[must_use = "dropping a PreparedNpy deletes its temporary file; call write"]
pub struct PreparedNpy {
    path: PathBuf,
    shape: Vec<usize>,
    header: Vec<u8>,
    tmp: tempfile::NamedTempFile,
    fills: Vec<JoinHandle<std::io::Result<()>>>,
    _cancel: CancelOnDrop,
}

/// Stops the fill threads at their next chunk when a [`PreparedNpy`] is dropped unwritten
/// (they write through their own handles to the unlinked temporary file until then).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts preparing `path` for an f32 (`<f4`, C order) array of `shape`: creates the
/// temporary file beside it and fills it with zeros on up to four background threads.
///
/// Errors now only for what is wrong before any data exists (the directory is not writable,
/// the shape needs an over-long header); errors of the fill come from
/// [`PreparedNpy::write`].
pub fn prepare_npy(path: impl AsRef<Path>, shape: &[usize]) -> Result<PreparedNpy> {
    let path = path.as_ref();
    let header = checked_header(path, "<f4", shape)?;
    let data_bytes = shape
        .iter()
        .try_fold(4usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| IoError::Encode {
            path: path.to_owned(),
            format: "NPY",
            reason: format!("shape {shape:?} overflows"),
        })?;
    let tmp = temp_for(path, ".npy")?;
    let total = (header.len() + data_bytes) as u64;
    tmp.as_file().set_len(total).map_err(|e| IoError::os(path, e))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let threads = (total as usize).div_ceil(64 << 20).clamp(1, FILL_THREADS);
    let per = total.div_ceil(threads as u64).next_multiple_of(4096);
    let mut fills = Vec::with_capacity(threads);
    for i in 0..threads as u64 {
        let (from, to) = ((i * per).min(total), ((i + 1) * per).min(total));
        let file = tmp.as_file().try_clone().map_err(|e| IoError::os(path, e))?;
        let cancel = Arc::clone(&cancel);
        fills.push(std::thread::spawn(move || fill_zeros(&file, from, to, &cancel)));
    }
    Ok(PreparedNpy {
        path: path.to_owned(),
        shape: shape.to_vec(),
        header,
        tmp,
        fills,
        _cancel: CancelOnDrop(cancel),
    })
}

/// Writes zeros over bytes `from..to` of `file`, stopping early (without error) on cancel.
fn fill_zeros(file: &std::fs::File, from: u64, to: u64, cancel: &AtomicBool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; FILL_CHUNK];
    let mut at = from;
    while at < to && !cancel.load(Ordering::Relaxed) {
        let n = ((to - at) as usize).min(FILL_CHUNK);
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl PreparedNpy {
    /// The shape the output was prepared for.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Waits for the fill, writes the header and `data` (C order) over it, and renames the
    /// file into place. `data` must hold exactly the prepared shape's element count.
    pub fn write(mut self, data: &[f32]) -> Result<()> {
        let path = self.path.clone();
        let want: usize = self.shape.iter().product();
        if data.len() != want {
            return Err(IoError::Encode {
                path,
                format: "NPY",
                reason: format!(
                    "{} values do not fill the prepared shape {:?} ({want} values)",
                    data.len(),
                    self.shape
                ),
            });
        }
        let os = |e| IoError::os(&path, e);
        // every fill is joined, then the first error is reported
        let fills: Vec<_> = std::mem::take(&mut self.fills)
            .into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a fill thread panicked")))
            })
            .collect();
        fills.into_iter().try_for_each(|r| r).map_err(os)?;
        let f = self.tmp.as_file();
        write_parallel(f, 0, &self.header).map_err(os)?;
        write_parallel(f, self.header.len() as u64, bytemuck::cast_slice(data)).map_err(os)?;
        let PreparedNpy { tmp, .. } = self;
        persist(tmp, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomic::tests::entries;

    #[test]
    fn prepared_output_equals_write_npy_bytes() {
        let dir = tempfile::tempdir().unwrap();
        // odd sizes: below one fill chunk, across chunks, across several fill threads
        for shape in [vec![1usize], vec![3, 5], vec![1023, 517], vec![4099, 4101]] {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| (i as f32).sin() * 1e3 + 0.25).collect();
            let a = dir.path().join("a.npy");
            let b = dir.path().join("b.npy");
            let p = prepare_npy(&b, &shape).unwrap();
            assert_eq!(p.shape(), &shape[..]);
            p.write(&data).unwrap();
            let view = ndarray::ArrayViewD::from_shape(ndarray::IxDyn(&shape), &data).unwrap();
            crate::write_npy(&a, &view).unwrap();
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{shape:?}"
            );
            let back = crate::read_npy(&b).unwrap();
            assert_eq!(back.data.shape(), &shape[..]);
            assert_eq!(back.data.as_slice().unwrap(), &data[..]);
        }
        assert_eq!(entries(dir.path()), vec!["a.npy", "b.npy"]);
    }

    #[test]
    fn wrong_length_is_an_error_and_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.npy");
        std::fs::write(&out, b"old").unwrap();
        let err = prepare_npy(&out, &[4, 4]).unwrap().write(&[0.0; 15]).unwrap_err();
        assert!(err.to_string().contains("prepared shape [4, 4]"), "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(entries(dir.path()), vec!["out.npy"]);
    }

    #[test]
    fn dropped_unwritten_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = prepare_npy(dir.path().join("x.npy"), &[2048, 2048]).unwrap();
        drop(p);
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }

    #[test]
    fn missing_directory_is_an_error_at_prepare() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare_npy(dir.path().join("no/such/x.npy"), &[2, 2])
            .err()
            .unwrap();
        assert!(matches!(err, IoError::Io { .. }), "{err}");
    }
}
