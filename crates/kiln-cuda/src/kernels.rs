//! The kernel table: every kernel kiln launches, the module (one `kernels/*.cu` file) it
//! lives in, and its `extern "C"` name (`{op}_{dtype}`).

/// One CUDA source file, compiled by NVRTC as a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    /// The file's stem, e.g. `elementwise`.
    pub name: &'static str,
    /// The CUDA C++ source.
    pub source: &'static str,
}

/// The element-wise family.
pub const ELEMENTWISE: Module = Module {
    name: "elementwise",
    source: include_str!("../kernels/elementwise.cu"),
};

/// Every module, for `kiln cache warm` and `kiln kernels`.
pub const MODULES: &[Module] = &[ELEMENTWISE];

/// Every kernel kiln launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelId {
    /// Element-wise sigmoid on f32, float4-vectorised.
    SigmoidF32,
}

impl KernelId {
    /// Every kernel.
    pub const ALL: &'static [KernelId] = &[KernelId::SigmoidF32];

    /// The module that defines it.
    pub fn module(self) -> Module {
        match self {
            KernelId::SigmoidF32 => ELEMENTWISE,
        }
    }

    /// Its `extern "C"` symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            KernelId::SigmoidF32 => "sigmoid_f32",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_symbol_is_defined_in_its_module() {
        for k in KernelId::ALL {
            assert!(
                k.module().source.contains(k.symbol()),
                "{} missing from {}",
                k.symbol(),
                k.module().name
            );
            assert!(MODULES.contains(&k.module()));
        }
    }
}
