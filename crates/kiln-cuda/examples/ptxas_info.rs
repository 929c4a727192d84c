//! Registers, spills and shared memory of every kernel as ptxas reports them, without a GPU
//! (needs libnvrtc: `export LD_LIBRARY_PATH=$(bash scripts/fetch-nvrtc.sh)`).
//!
//! `cargo run -p kiln-cuda --example ptxas_info [-- ARCH [MODULE|KERNEL]]` (default sm_90,
//! every module compiled whole; a kernel's symbol compiles that kernel alone, as kiln does,
//! and prints NVRTC's time; the sm_90a-only wgmma modules only when named). With `KILN_CUBIN_OUT=DIR` it also writes each program's cubin
//! to `DIR/NAME.ARCH.cubin`, for `cuobjdump -sass` / `nvdisasm` (PyPI: nvidia-cuda-cuobjdump,
//! nvidia-cuda-nvdisasm).

use kiln_cuda::{kernels, nvrtc, Kernel, Program};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arch = args.first().map(String::as_str).unwrap_or("sm_90");
    let only = args.get(1).map(String::as_str);
    let programs: Vec<Program> = match Kernel::ALL.iter().find(|k| Some(k.symbol()) == only) {
        Some(&k) => vec![k.into()],
        // the wgmma modules (sm_90a only) by name: `-- sm_90a gemm_wgmma_variants`
        None => kernels::MODULES
            .iter()
            .chain([&kernels::GEMM_WGMMA, &kernels::GEMM_WGMMA_VARIANTS])
            .filter(|m| only.map_or(!m.name.starts_with("gemm_wgmma"), |o| o == m.name))
            .map(|&m| m.into())
            .collect(),
    };
    if programs.is_empty() {
        eprintln!("no module or kernel named {}", only.unwrap_or_default());
        std::process::exit(1);
    }
    for p in programs {
        let name = p.name();
        if let Ok(dir) = std::env::var("KILN_CUBIN_OUT") {
            match nvrtc::compile_cubin(p, arch) {
                Ok(cubin) => {
                    let path = std::path::Path::new(&dir).join(format!("{name}.{arch}.cubin"));
                    if let Err(e) = std::fs::write(&path, cubin) {
                        eprintln!("{}: {e}", path.display());
                        std::process::exit(1);
                    }
                }
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            }
        }
        let t0 = std::time::Instant::now();
        match nvrtc::ptxas_info(p, arch) {
            Ok(log) => {
                println!(
                    "== {name} ({arch}, NVRTC {:.0} ms)",
                    t0.elapsed().as_secs_f64() * 1e3
                );
                // ptxas prints, per kernel: "Function properties for NAME", then the
                // stack frame and spill line, then "Used N registers, ...".
                for line in log.lines() {
                    let line = line.trim_start_matches("ptxas info    : ").trim();
                    if let Some(name) = line.strip_prefix("Function properties for ") {
                        println!("  {name}");
                    } else if line.contains("spill") || line.starts_with("Used ") {
                        println!("    {line}");
                    }
                }
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        }
    }
}
