//! Every kernel module compiles with NVRTC for each supported architecture, and every
//! kernel compiles alone (the program kiln loads) into a cubin that holds that kernel and no
//! other. Needs only libnvrtc (no GPU): CI fetches it and sets `KILN_REQUIRE_NVRTC=1` (see
//! .ci/run), so there a missing libnvrtc fails; elsewhere the tests skip, printed and counted
//! (`kiln_testkit`).

use kiln_cuda::{coldstart, kernels, nvrtc, Kernel, KernelCache};

fn nvrtc_or_skip(test: &str) -> bool {
    if nvrtc::available() {
        return true;
    }
    kiln_testkit::skip_unless_required(
        "KILN_REQUIRE_NVRTC",
        test,
        "libnvrtc cannot be loaded (set LD_LIBRARY_PATH to a CUDA lib dir; scripts/fetch-nvrtc.sh)",
    );
    false
}

#[test]
fn every_module_compiles_for_every_supported_arch() {
    if !nvrtc_or_skip("every_module_compiles") {
        return;
    }
    let mut failures = Vec::new();
    // sm_70 (Volta) is not a target of NVRTC 13; sm_75 is its oldest.
    for arch in ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"] {
        for m in kernels::MODULES {
            match nvrtc::compile_cubin(*m, arch) {
                Ok(cubin) => assert!(cubin.len() > 64, "{} {arch}: empty cubin", m.name),
                Err(e) => failures.push(format!("{} {arch}: {e}", m.name)),
            }
        }
    }
    assert!(failures.is_empty(), "NVRTC failures:\n{}", failures.join("\n"));
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn every_kernel_compiles_alone_into_its_own_cubin() {
    if !nvrtc_or_skip("every_kernel_compiles_alone") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(dir.path());
    let version = nvrtc::version().unwrap();
    // In parallel, through the cache, as `kiln cache warm --arch` does.
    let events = coldstart::compile_all(&cache, "sm_90", version, Kernel::ALL).unwrap();
    assert_eq!(events.len(), Kernel::ALL.len());
    for k in Kernel::ALL {
        let ev = events
            .iter()
            .find(|e| e.program == k.symbol())
            .unwrap_or_else(|| panic!("{}: no cache event", k.symbol()));
        let cubin = std::fs::read(&ev.path).unwrap();
        assert!(
            contains(&cubin, k.symbol().as_bytes()),
            "{}: symbol missing",
            k.symbol()
        );
        for o in Kernel::ALL {
            if o != k && o.module() == k.module() && !k.symbol().contains(o.symbol()) {
                assert!(
                    !contains(&cubin, o.symbol().as_bytes()),
                    "{}'s program also compiled {}",
                    k.symbol(),
                    o.symbol()
                );
            }
        }
    }
    let census = coldstart::census(&cache, "sm_90", version);
    assert_eq!(census.cached, Kernel::ALL.len(), "missing: {:?}", census.missing);
    // A second warm reads every cubin back without compiling.
    let again = coldstart::compile_all(&cache, "sm_90", version, Kernel::ALL).unwrap();
    assert!(again.iter().all(|e| e.outcome == kiln_cuda::Outcome::Hit));
}

#[test]
fn the_wgmma_gemm_compiles_for_sm_90a_without_spills() {
    use kiln_cuda::gemm_wgmma::{Fp8Format, WgmmaVariant, WGMMA_ARCH, WGMMA_SYMBOLS};
    if !nvrtc_or_skip("the_wgmma_gemm_compiles_for_sm_90a") {
        return;
    }
    let cubin = nvrtc::compile_cubin(kernels::GEMM_WGMMA, WGMMA_ARCH).unwrap();
    let report = nvrtc::ptxas_info(kernels::GEMM_WGMMA, WGMMA_ARCH).unwrap();
    let fp8 = [Fp8Format::E4m3.symbol(), Fp8Format::E5m2.symbol()];
    let default: Vec<String> = [(false, false), (false, true), (true, false), (true, true)]
        .into_iter()
        .map(|(ta, tb)| WgmmaVariant::DEFAULT.symbol(ta, tb))
        .collect();
    let fp8_and_default = fp8.iter().copied().chain(default.iter().map(String::as_str));
    for symbol in WGMMA_SYMBOLS.iter().copied().chain(fp8_and_default) {
        assert!(contains(&cubin, symbol.as_bytes()), "{symbol} is in the cubin");
        assert!(report.contains(symbol), "{report}");
    }
    // accumulators in registers: a spill would put the 128 floats a thread holds in local
    // memory; ptxas also warns when it serialises wgmma or ignores setmaxnreg
    assert!(report.contains("0 bytes spill stores"), "{report}");
    assert!(!report.to_lowercase().contains("warning"), "{report}");
    // sm_90a features only: plain sm_90 rejects wgmma
    assert!(nvrtc::compile_cubin(kernels::GEMM_WGMMA, "sm_90").is_err());
}

#[test]
fn every_wgmma_variant_compiles_for_sm_90a_without_spills() {
    use kiln_cuda::gemm_wgmma::{WgmmaVariant, WGMMA_ARCH};
    if !nvrtc_or_skip("every_wgmma_variant_compiles_for_sm_90a") {
        return;
    }
    let cubin = nvrtc::compile_cubin(kernels::GEMM_WGMMA_VARIANTS, WGMMA_ARCH).unwrap();
    let report = nvrtc::ptxas_info(kernels::GEMM_WGMMA_VARIANTS, WGMMA_ARCH).unwrap();
    let mut kernels = 0;
    // the default and `sync` are in the default module (the test above)
    let in_default = [WgmmaVariant::Sync, WgmmaVariant::DEFAULT];
    for v in WgmmaVariant::ALL.into_iter().filter(|v| !in_default.contains(v)) {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let symbol = v.symbol(ta, tb);
            assert!(contains(&cubin, symbol.as_bytes()), "{symbol} is in the cubin");
            assert!(report.contains(&symbol), "{report}");
            kernels += 1;
        }
    }
    // one "0 bytes spill stores" line a kernel: none spills its accumulators
    assert_eq!(
        report.matches("0 bytes spill stores").count(),
        kernels,
        "{report}"
    );
    assert!(!report.to_lowercase().contains("warning"), "{report}");
}
