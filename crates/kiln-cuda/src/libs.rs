//! Whether each CUDA library loads, asked once per process, with the library kept loaded.
//!
//! cudarc's `is_culib_present` opens a library and closes it again, and cudarc's first call
//! into it opens it once more; libnvrtc alone is 110 MB. kiln asked for NVRTC's presence
//! twice and its version once before creating a context, so a warm `kiln filter2d` loaded
//! libnvrtc three times (about 10 ms a load warm on the development machine, 157 ms with a
//! cold page cache) and libcuda twice. Here each library is opened once, by cudarc's own
//! candidate names in cudarc's order, and the handle is kept for the process's life: when
//! cudarc then opens the same name, the dynamic loader finds it loaded and only counts a
//! reference. Written by hand because cudarc keeps its handles private.
#![allow(unsafe_code)]

use std::sync::OnceLock;

/// A CUDA library kiln loads at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    /// The driver, `libcuda`.
    Cuda,
    /// The runtime compiler, `libnvrtc`.
    Nvrtc,
    /// `libcublas`.
    Cublas,
    /// `libcublasLt`.
    CublasLt,
    /// `libcurand`.
    Curand,
    /// `libnccl`.
    Nccl,
}

impl Lib {
    /// cudarc's name for the library (the stem its candidate file names are made from).
    fn stem(self) -> &'static str {
        match self {
            Lib::Cuda => "cuda",
            Lib::Nvrtc => "nvrtc",
            Lib::Cublas => "cublas",
            Lib::CublasLt => "cublasLt",
            Lib::Curand => "curand",
            Lib::Nccl => "nccl",
        }
    }
}

static LOADED: [OnceLock<Option<libloading::Library>>; 6] = [const { OnceLock::new() }; 6];

/// Whether `lib` loads here. The first call opens it (by cudarc's candidate names, in its
/// order) and keeps it open; later calls, from any thread, answer at once (a call made while
/// another thread is opening it waits for that open).
pub fn present(lib: Lib) -> bool {
    LOADED[lib as usize]
        .get_or_init(|| {
            cudarc::get_lib_name_candidates(lib.stem())
                .into_iter()
                // SAFETY: loading a CUDA library runs only its own initialisers, which have
                // no preconditions; the handle is kept (never closed) for the process's life.
                .find_map(|name| unsafe { libloading::Library::new(name) }.ok())
        })
        .is_some()
}

/// Opens `lib` on a thread of its own and returns at once, so a later [`present`] (or the
/// first cudarc call into it) finds it loaded: libnvrtc's load overlaps the driver's
/// initialisation and the context's creation.
pub fn preload(lib: Lib) {
    if LOADED[lib as usize].get().is_none() {
        let _ = std::thread::Builder::new()
            .name("kiln-preload".into())
            .spawn(move || present(lib));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asking_twice_gives_the_same_answer_and_never_panics() {
        for lib in [
            Lib::Cuda,
            Lib::Nvrtc,
            Lib::Cublas,
            Lib::CublasLt,
            Lib::Curand,
            Lib::Nccl,
        ] {
            let a = present(lib);
            preload(lib);
            assert_eq!(present(lib), a, "{lib:?}");
        }
    }
}
