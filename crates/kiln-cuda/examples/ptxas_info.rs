//! Registers, spills and shared memory of every kernel as ptxas reports them, without a GPU
//! (needs libnvrtc: `export LD_LIBRARY_PATH=$(bash scripts/fetch-nvrtc.sh)`).
//!
//! `cargo run -p kiln-cuda --example ptxas_info [-- ARCH [MODULE]]` (default sm_90, every module).
//! With `KILN_CUBIN_OUT=DIR` it also writes each module's cubin to `DIR/MODULE.ARCH.cubin`, for
//! `cuobjdump -sass` / `nvdisasm` (PyPI: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm).

use kiln_cuda::{kernels, nvrtc};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arch = args.first().map(String::as_str).unwrap_or("sm_90");
    let only = args.get(1).map(String::as_str);
    for m in kernels::MODULES {
        if only.is_some_and(|o| o != m.name) {
            continue;
        }
        if let Ok(dir) = std::env::var("KILN_CUBIN_OUT") {
            match nvrtc::compile_cubin(m, arch) {
                Ok(cubin) => {
                    let path = std::path::Path::new(&dir).join(format!("{}.{arch}.cubin", m.name));
                    if let Err(e) = std::fs::write(&path, cubin) {
                        eprintln!("{}: {e}", path.display());
                        std::process::exit(1);
                    }
                }
                Err(e) => {
                    eprintln!("{}: {e}", m.name);
                    std::process::exit(1);
                }
            }
        }
        match nvrtc::ptxas_info(m, arch) {
            Ok(log) => {
                println!("== {} ({arch})", m.name);
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
                eprintln!("{}: {e}", m.name);
                std::process::exit(1);
            }
        }
    }
}
