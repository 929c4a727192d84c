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

/// Monte Carlo option pricing: Philox, GBM paths and payoffs fused, many options a launch.
pub const FINANCE: Module = Module {
    name: "finance",
    source: include_str!("../kernels/finance.cu"),
};

/// Every module, for `kiln cache warm` and `kiln kernels`.
pub const MODULES: &[Module] = &[ELEMENTWISE, FINANCE];

/// Every kernel kiln launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelId {
    /// Element-wise sigmoid on f32, float4-vectorised.
    SigmoidF32,
    /// Monte Carlo, European options: per-(option, 1024-sample block) f64 sums, a warp each.
    McEuropeanF64,
    /// Monte Carlo, arithmetic-average Asian options (block sums as above).
    McAsianArithmeticF64,
    /// Monte Carlo, geometric-average Asian options.
    McAsianGeometricF64,
    /// Monte Carlo, up-and-out barriers.
    McBarrierUpOutF64,
    /// Monte Carlo, up-and-in barriers.
    McBarrierUpInF64,
    /// Monte Carlo, down-and-out barriers.
    McBarrierDownOutF64,
    /// Monte Carlo, down-and-in barriers.
    McBarrierDownInF64,
    /// Monte Carlo: adds each option's block sums in block order onto running totals.
    McCombineF64,
    /// Monte Carlo: the portable f32 math and Philox words, for bitwise tests.
    FinanceSelftestF32,
}

impl KernelId {
    /// Every kernel.
    pub const ALL: &'static [KernelId] = &[KernelId::SigmoidF32, KernelId::McEuropeanF64,
        KernelId::McAsianArithmeticF64,
        KernelId::McAsianGeometricF64,
        KernelId::McBarrierUpOutF64,
        KernelId::McBarrierUpInF64,
        KernelId::McBarrierDownOutF64,
        KernelId::McBarrierDownInF64,
        KernelId::McCombineF64, KernelId::FinanceSelftestF32];

    /// The module that defines it.
    pub fn module(self) -> Module {
        match self {
            KernelId::SigmoidF32 => ELEMENTWISE,
            KernelId::McEuropeanF64
            | KernelId::McAsianArithmeticF64
            | KernelId::McAsianGeometricF64
            | KernelId::McBarrierUpOutF64
            | KernelId::McBarrierUpInF64
            | KernelId::McBarrierDownOutF64
            | KernelId::McBarrierDownInF64
            | KernelId::McCombineF64
            | KernelId::FinanceSelftestF32 => FINANCE,
        }
    }

    /// Its `extern "C"` symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            KernelId::SigmoidF32 => "sigmoid_f32",
            KernelId::McEuropeanF64 => "mc_european_f64",
            KernelId::McAsianArithmeticF64 => "mc_asian_arithmetic_f64",
            KernelId::McAsianGeometricF64 => "mc_asian_geometric_f64",
            KernelId::McBarrierUpOutF64 => "mc_barrier_up_out_f64",
            KernelId::McBarrierUpInF64 => "mc_barrier_up_in_f64",
            KernelId::McBarrierDownOutF64 => "mc_barrier_down_out_f64",
            KernelId::McBarrierDownInF64 => "mc_barrier_down_in_f64",
            KernelId::McCombineF64 => "mc_combine_f64",
            KernelId::FinanceSelftestF32 => "finance_selftest_f32",
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
