//! The kernel table: every kernel kiln launches is one [`Kernel`] value, declared once (in
//! `kernels/table/*.rs`, a file per family) with the module (one `kernels/*.cu` file) it lives
//! in, its `extern "C"` name (`{op}_{dtype}`), its parameters ([`KernelParam`]: pointers with
//! their element type and access, scalars, by-value structs; a test checks them against the
//! source's declaration), what it computes, the launch shape its launcher uses and an
//! estimate of its compile time. Launchers, `kiln kernels`, `kiln cache
//! warm`, the cold-start estimate and `docs/kernels.md` all read these values; nothing
//! restates them in a `match`.
//!
//! kiln compiles and caches each kernel as its own NVRTC [`Program`]: the module's source
//! with `-DKILN_ONLY -DKILN_K_<symbol>`, which every `.cu` file turns into "this kernel
//! alone" (each kernel sits in an `#if !defined(KILN_ONLY) || defined(KILN_K_<symbol>)`
//! block). So a process compiles only the kernels it launches: a cold `kiln filter2d`
//! compiles its one or two kernels, not the 26 the imaging module held (measured
//! 2026-12-03, sm_90, NVRTC 13.0 on the 2-core build machine: that module whole 9.3 s,
//! `sep2d_vh_r8_f32` alone 0.16 s). A whole module is still one program for the compile
//! test and `examples/ptxas_info.rs`. The imaging families share `kernels/imaging.cuh`,
//! prepended to each file's source (both start with a `#line` directive, so NVRTC's
//! messages and `-lineinfo` name the right file and line).

mod params;
mod sources;
mod table;

pub(crate) use params::decl;
pub use params::{Access, KernelParam, ScalarType};
pub use sources::*;

/// What NVRTC compiles as one program and the cache stores as one cubin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// One kernel alone: its module's source with `-DKILN_ONLY -DKILN_K_<symbol>`. What
    /// kiln loads and launches.
    Kernel(Kernel),
    /// A whole module, every kernel of the file.
    Module(Module),
}

impl Program {
    /// The kernel's symbol, or the module's name: the cache file's prefix.
    pub fn name(self) -> &'static str {
        match self {
            Program::Kernel(k) => k.symbol(),
            Program::Module(m) => m.name,
        }
    }

    /// The module whose source it compiles.
    pub fn module(self) -> Module {
        match self {
            Program::Kernel(k) => k.module(),
            Program::Module(m) => m,
        }
    }

    /// The preprocessor definitions that select its kernels (none for a whole module).
    pub fn defines(self) -> Vec<String> {
        match self {
            Program::Kernel(k) => vec!["-DKILN_ONLY".into(), format!("-DKILN_K_{}", k.symbol())],
            Program::Module(_) => Vec::new(),
        }
    }
}

impl From<Kernel> for Program {
    fn from(k: Kernel) -> Self {
        Program::Kernel(k)
    }
}

impl From<Module> for Program {
    fn from(m: Module) -> Self {
        Program::Module(m)
    }
}

/// One kernel kiln launches: everything about it that does not need a device. Declared
/// once, as an associated constant (`Kernel::MAP_F32`), in `kernels/table/*.rs`; [`Kernel::ALL`]
/// lists them. Two kernels are equal when their symbols are (symbols are unique: a test
/// checks), which keeps hashing one a short string hash, not a hash of its module's source.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    symbol: &'static str,
    module: Module,
    compile_ms: u32,
    computes: &'static str,
    block: [u32; 3],
    grid: &'static str,
    dynamic_shared_bytes: u32,
    dynamic_shared_note: &'static str,
    params: &'static [KernelParam],
}

impl PartialEq for Kernel {
    fn eq(&self, other: &Self) -> bool {
        self.symbol == other.symbol
    }
}

impl Eq for Kernel {}

impl std::hash::Hash for Kernel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.symbol.hash(state);
    }
}

impl Kernel {
    /// Every kernel, family by family.
    pub const ALL: &'static [Kernel] = &table::ALL;

    /// The kernel whose `extern "C"` name is `symbol`.
    pub fn by_symbol(symbol: &str) -> Option<Kernel> {
        Self::ALL.iter().find(|k| k.symbol == symbol).copied()
    }

    /// Its `extern "C"` symbol.
    pub fn symbol(self) -> &'static str {
        self.symbol
    }

    /// The module that defines it.
    pub fn module(self) -> Module {
        self.module
    }

    /// What it computes, in a sentence.
    pub fn computes(self) -> &'static str {
        self.computes
    }

    /// Threads per block (x, y, z) at launch.
    pub fn block(self) -> [u32; 3] {
        self.block
    }

    /// Threads per block.
    pub fn threads(self) -> u32 {
        self.block.iter().product()
    }

    /// The grid, as its launcher computes it.
    pub fn grid(self) -> &'static str {
        self.grid
    }

    /// Dynamic shared memory at the representative launch occupancy is computed for.
    pub fn dynamic_shared_bytes(self) -> u32 {
        self.dynamic_shared_bytes
    }

    /// What [`Self::dynamic_shared_bytes`] depends on (empty when it is always 0).
    pub fn dynamic_shared_note(self) -> &'static str {
        self.dynamic_shared_note
    }

    /// Its parameters, in the order of its `extern "C"` declaration (checked against the
    /// source by a test; every launch's arguments are checked against them).
    pub fn params(self) -> &'static [KernelParam] {
        self.params
    }

    /// An estimate of NVRTC's milliseconds to compile this kernel alone for sm_90: measured
    /// with NVRTC 13.0 on one core of a 2-core build machine (best of three, `-lineinfo`,
    /// other builds running), or a guess from a similar kernel where the table says so. A
    /// cold start pays about this for each kernel it launches; other CPUs and archs differ
    /// (an H200 host compiled the gemm, finance and map modules whole 1.1-1.3x slower), so
    /// it serves `kiln doctor`'s estimate and the longest-first order of parallel compiles,
    /// never as a measurement.
    pub fn compile_ms_estimate(self) -> u32 {
        self.compile_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_symbol_is_defined_in_its_module() {
        for k in Kernel::ALL {
            assert!(
                k.module().source.contains(k.symbol()),
                "{} missing from {}",
                k.symbol(),
                k.module().name
            );
            assert!(MODULES.contains(&k.module()));
        }
    }

    #[test]
    fn every_kernel_has_one_selection_guard_and_every_guard_a_kernel() {
        for k in Kernel::ALL {
            let guard = format!("#if !defined(KILN_ONLY) || defined(KILN_K_{})\n", k.symbol());
            assert_eq!(
                k.module().source.matches(&guard).count(),
                1,
                "{}: its definition must sit in exactly one `{}`",
                k.symbol(),
                guard.trim_end()
            );
        }
        for m in MODULES {
            for (i, _) in m.source.match_indices("defined(KILN_K_") {
                let rest = &m.source[i + "defined(KILN_K_".len()..];
                let sym = &rest[..rest.find(')').unwrap_or(0)];
                assert!(
                    Kernel::ALL.iter().any(|k| k.symbol() == sym && k.module() == *m),
                    "{}.cu guards `{sym}`, which is not a kernel of the module",
                    m.name
                );
            }
        }
    }

    #[test]
    fn a_kernel_program_selects_it_and_a_module_program_compiles_all() {
        let p = Program::from(Kernel::SEP2D_VH_R8_F32);
        assert_eq!(p.name(), "sep2d_vh_r8_f32");
        assert_eq!(p.module(), SEPARABLE);
        assert_eq!(p.defines(), ["-DKILN_ONLY", "-DKILN_K_sep2d_vh_r8_f32"]);
        let m = Program::from(SEPARABLE);
        assert_eq!(m.name(), "separable");
        assert!(m.defines().is_empty());
        // Program names are the cache files' prefixes: no two alike.
        let mut names: Vec<&str> = Kernel::ALL.iter().map(|&k| Program::from(k).name()).collect();
        names.extend(MODULES.iter().map(|&m| Program::from(m).name()));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(Kernel::ALL.iter().all(|k| k.compile_ms_estimate() > 0));
    }

    #[test]
    fn every_launch_shape_is_launchable() {
        for k in Kernel::ALL {
            assert!(k.threads() >= 32 && k.threads() <= 1024, "{}", k.symbol());
            assert!(k.dynamic_shared_bytes() <= 48 * 1024, "{}", k.symbol());
            assert!(!k.computes().is_empty() && !k.grid().is_empty(), "{}", k.symbol());
            assert_eq!(
                k.dynamic_shared_bytes() == 0,
                k.dynamic_shared_note().is_empty(),
                "{}: dynamic shared memory and its note go together",
                k.symbol()
            );
            assert_eq!(Kernel::by_symbol(k.symbol()), Some(*k));
        }
        assert_eq!(Kernel::by_symbol("no_such_kernel"), None);
    }
}
