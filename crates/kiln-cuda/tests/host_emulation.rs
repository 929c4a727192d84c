//! The rank module's median kernels run on the host: a C++ compiler builds
//! `kernels/rank.cu` + `rank_med_net.cuh` + `rank_med.cu` (after `imaging.cuh`, as the
//! module is assembled) over `tests/emu/cuda_host_stub.h`, and `tests/emu/rank_med_check.cpp`
//! runs the one-output and the packed four-outputs-a-thread medians over a simulated grid,
//! comparing every output with a naive median (every mode, 3×3 and 5×5, border-only rows
//! and words, ties), for both `KILN_MEDPACK` variants. This checks the kernels' indexing and
//! selection logic on every CI run; the GPU's own compile and bits are checked by the
//! `rank` tests on the H200. Skips, saying so, where no C++ compiler is found (`CXX`, `c++`,
//! `g++`, `clang++`).
//!
//! The basket module (`kernels/finance.cuh` + `basket.cu`) runs the same way, its CTAs'
//! threads as host threads with `__syncwarp` a barrier (`emu/cuda_host_stub.h`), and
//! `emu/basket_check.cpp` writes what its two kernels compute for baskets of 1 to 17
//! assets: every sample's payoff and control, and every canonical block's seven sums (a
//! whole launch and one from block 1), which must equal kiln-core's `basket_sample` and
//! `BlockSums::push` in sample order bit for bit, as the H200 test `basket_gpu` demands.
//! The `_rn` intrinsics are the host's IEEE operations there (no contraction), so this checks
//! the kernel's indexing, staging and arithmetic order before a GPU sees it.
//!
//! The implied-volatility kernels (`kernels/implied_vol.cuh` + `implied_vol.cu`) run on a
//! random book and the edge cases of `kiln_core::finance::implied::sample`
//! (`emu/implied_vol_check.cpp`): the one-pass kernel over a grid smaller than the book, and
//! the grouped launches (classify, the counting sort by way, whose lists must hold each
//! way's quotes in book order, and the four solves) on the whole book and on its first 1,
//! 31, 257 and 4099 quotes (which must give the one-pass outputs bit for bit); compiled
//! without contraction and calling the host's libm (as Rust's `f64::exp`/`ln`/`powf` do),
//! both ways' every volatility must equal kiln-core's `implied_volatility_book` bit for bit
//! and every reason code its `NoVolatility::index`.
//!
//! The interpolation kernels (`kernels/interp.cu`: resampling and the spline prefilter) run
//! on the launcher's own argument structs against kiln-core's loops, bit for bit
//! (`emu/interp.rs`).
//!
//! The labelling kernels (`kernels/label.cu`) run as the launcher runs them, their threads
//! racing on real atomics, against kiln-core's labels (`emu/label.rs`).
//!
//! The distance-transform kernels (`kernels/distance.cu`) run pass by pass against
//! kiln-core's `edt`, distances and indices bit for bit (`emu/edt.rs`).
//!
//! The uniform filters' running-sum kernel (`nd_uniform_f64` of `kernels/ndimage.cu`) runs
//! pass by pass against kiln-core's `scipy_cpu` running sum (`emu/uniform.rs`).
//!
//! The Longstaff-Schwartz barrier kernels (`kernels/american.cu` + `american_barrier.cu`)
//! run step by step under kiln-core's driver, as the launcher runs them, and price every
//! option of a grid to the CPU engine's bits (`emu/american_barrier.rs`).
#![allow(clippy::unwrap_used)]

use kiln_core::finance::basket::{basket_sample, BasketAsset, BasketAverage, BasketPathParams, BasketSpec};
use kiln_core::finance::{BlockSums, McParams, OptionType, Rng, BLOCK_SAMPLES};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "emu/american_barrier.rs"]
mod american_barrier;
#[path = "emu/edt.rs"]
mod edt;
#[path = "emu/interp.rs"]
mod interp;
#[path = "emu/label.rs"]
mod label;
#[path = "emu/uniform.rs"]
mod uniform;

const SOURCES: [&str; 4] = [
    include_str!("../kernels/imaging.cuh"),
    include_str!("../kernels/rank.cu"),
    include_str!("../kernels/rank_med_net.cuh"),
    include_str!("../kernels/rank_med.cu"),
];

#[test]
fn median_kernels_match_a_naive_median_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("median_kernels_match_a_naive_median_on_the_host") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for pack in [4, 2] {
        let medpack = format!("-DKILN_MEDPACK={pack}");
        let exe = build(
            &cxx,
            dir.path(),
            &format!("check{pack}"),
            &SOURCES,
            include_str!("emu/rank_med_check.cpp"),
            &[
                "-DKILN_ONLY",
                "-DKILN_K_rank_med9",
                "-DKILN_K_rank_med25",
                "-DKILN_K_rank_med9_u8x4",
                "-DKILN_K_rank_med25_u8x4",
                &medpack,
            ],
        );
        let run = Command::new(&exe).output().unwrap();
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && text.contains(" 0 bad"),
            "MEDPACK {pack}:\n{text}"
        );
        eprintln!("MEDPACK {pack}: {}", text.trim());
    }
}

/// Writes the stub, `sources` and the driver into one translation unit in `dir` and
/// compiles it with `flags`.
fn build(cxx: &str, dir: &Path, name: &str, sources: &[&str], driver: &str, flags: &[&str]) -> PathBuf {
    let mut tu = String::from(include_str!("emu/cuda_host_stub.h"));
    for s in sources {
        tu.push_str(&host_asm(s));
        tu.push('\n');
    }
    tu.push_str(driver);
    let src = dir.join(format!("{name}.cpp"));
    std::fs::write(&src, tu).unwrap();
    let exe = dir.join(name);
    let out = Command::new(cxx)
        .args(["-std=c++17", "-O2", "-w", "-ffp-contract=off", "-pthread"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cxx} failed on {name}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Rewrites each `asm("OP %0, %1;" : "=f"(OUT) : "f"(IN));` into `OUT = emu_asm_OP(IN);`
/// (the stub's host stand-ins); panics on any other `asm` form, so a new one is noticed.
fn host_asm(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("asm(\"") {
        out.push_str(&rest[..at]);
        let stmt_end = rest[at..].find(");").unwrap() + at + 2;
        let stmt = &rest[at..stmt_end];
        let op = stmt["asm(\"".len()..].split(' ').next().unwrap();
        let arg = |tag: &str| {
            let i = stmt
                .find(tag)
                .unwrap_or_else(|| panic!("unexpected asm form: {stmt}"))
                + tag.len();
            &stmt[i..i + stmt[i..].find(')').unwrap()]
        };
        let (o, i) = (arg("\"=f\"("), arg(": \"f\"("));
        out.push_str(&format!("{o} = emu_asm_{}({i});", op.replace('.', "_")));
        rest = &rest[stmt_end..];
    }
    out.push_str(rest);
    out
}

/// A deterministic basket of `n` assets (spread spots, vols, dividends, weights; an
/// equicorrelated matrix with a band; a zero-volatility asset when `n > 2`).
fn basket(n: usize, kind: OptionType, average: BasketAverage, seed: u64) -> BasketSpec {
    let f = |i: usize, a: f64, b: f64| {
        let h = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
        a + (b - a) * ((h >> 11) as f64 / (1u64 << 53) as f64)
    };
    let assets: Vec<BasketAsset> = (0..n)
        .map(|i| {
            let vol = if n > 2 && i == 1 { 0.0 } else { f(3 * i, 0.1, 0.5) };
            BasketAsset::new(
                f(3 * i + 1, 40.0, 160.0),
                vol,
                f(3 * i + 2, 0.0, 0.05),
                f(i + 99, 0.1, 2.0),
            )
        })
        .collect();
    let correlation = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if i == j {
                1.0
            } else if i.abs_diff(j) == 1 {
                0.55
            } else {
                0.3
            }
        })
        .collect();
    let value: f64 = assets.iter().map(|a| a.weight * a.spot).sum();
    BasketSpec {
        kind,
        strike: value * f(7, 0.9, 1.1),
        rate: 0.03,
        maturity: f(11, 0.5, 2.0),
        average,
        assets,
        correlation,
    }
}

/// Little-endian bytes of the plain numbers the driver reads.
trait Le: Copy {
    fn le(self) -> Vec<u8>;
}
macro_rules! le {
    ($($t:ty),*) => { $(impl Le for $t { fn le(self) -> Vec<u8> { self.to_le_bytes().to_vec() } })* };
}
le!(u32, u64, f32, f64);

fn write<T: Le>(path: PathBuf, v: &[T]) {
    std::fs::write(path, v.iter().flat_map(|x| x.le()).collect::<Vec<u8>>()).unwrap();
}

fn read_f64(path: PathBuf) -> Vec<f64> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn sums(b: &BlockSums) -> [f64; 7] {
    [b.y, b.yy, b.c, b.cc, b.yc, b.delta, b.vega]
}

#[test]
fn basket_kernels_match_kiln_core_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("basket_kernels_match_kiln_core_on_the_host") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "basket_check",
        &[
            include_str!("../kernels/finance.cuh"),
            include_str!("../kernels/basket.cu"),
        ],
        include_str!("emu/basket_check.cpp"),
        &[
            "-DKILN_ONLY",
            "-DKILN_K_basket_blocks_f64",
            "-DKILN_K_basket_samples_f64",
        ],
    );
    let specs = [
        basket(1, OptionType::Call, BasketAverage::Arithmetic, 1),
        basket(3, OptionType::Put, BasketAverage::Geometric, 2),
        basket(8, OptionType::Call, BasketAverage::Geometric, 3),
        basket(17, OptionType::Put, BasketAverage::Arithmetic, 4),
    ];
    let count = 160u32;
    for (anti, paths, seed) in [(false, 2500u64, 7u64), (true, 2300, 11)] {
        let mc = McParams {
            paths,
            steps: 1,
            seed,
            antithetic: anti,
            control_variate: true,
            fast_math: false,
            rng: Rng::Philox,
        };
        // stream indices 5, 6, 7, 8: a batch that does not start at 0
        let pps: Vec<(BasketPathParams, u32)> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (BasketPathParams::new(s, &mc).unwrap(), 5 + i as u32))
            .collect();
        let (u, f, d) = kiln_cuda::basket_param_arrays(&pps).unwrap();
        let keys = kiln_core::philox::key_schedule(kiln_core::philox::key_from_seed(seed));
        let samples = mc.samples();
        let case = dir.path().join(format!("case-{anti}"));
        std::fs::create_dir_all(&case).unwrap();
        write(case.join("u.bin"), &u);
        write(case.join("f.bin"), &f);
        write(case.join("d.bin"), &d);
        write(case.join("keys.bin"), &keys.concat());
        write(
            case.join("cfg.bin"),
            &[pps.len() as u64, samples, u64::from(anti), u64::from(count)],
        );
        let run = Command::new(&exe).arg(&case).output().unwrap();
        assert!(
            run.status.success(),
            "basket_check failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        let got_samples = read_f64(case.join("samples.bin"));
        let got_blocks = read_f64(case.join("blocks.bin"));
        let got_tail = read_f64(case.join("tail.bin"));
        let nb = samples.div_ceil(BLOCK_SAMPLES) as usize;
        assert!(nb >= 2, "the case needs a second block");
        let mut bad = 0usize;
        for (k, (pp, option)) in pps.iter().enumerate() {
            for s in 0..count {
                let (y, c) = basket_sample(pp, *option, s);
                let at = 2 * (k * count as usize + s as usize);
                if got_samples[at].to_bits() != y.to_bits() || got_samples[at + 1].to_bits() != c.to_bits() {
                    bad += 1;
                    if bad < 5 {
                        eprintln!(
                            "anti {anti}, option {k} (N = {}), sample {s}: kernel ({}, {}), kiln-core ({y}, {c})",
                            pp.n,
                            got_samples[at],
                            got_samples[at + 1]
                        );
                    }
                }
            }
            for b in 0..nb {
                let mut want = BlockSums::default();
                let end = ((b as u64 + 1) * BLOCK_SAMPLES).min(samples);
                for s in b as u64 * BLOCK_SAMPLES..end {
                    let (y, c) = basket_sample(pp, *option, s as u32);
                    want.push(y, c, 0.0, 0.0);
                }
                let want = sums(&want);
                let got = &got_blocks[(k * nb + b) * 7..(k * nb + b + 1) * 7];
                if got.iter().zip(&want).any(|(g, w)| g.to_bits() != w.to_bits()) {
                    bad += 1;
                    eprintln!("anti {anti}, option {k}, block {b}: kernel {got:?}, kiln-core {want:?}");
                }
                if b >= 1 {
                    let got = &got_tail[(k * (nb - 1) + b - 1) * 7..(k * (nb - 1) + b) * 7];
                    if got.iter().zip(&want).any(|(g, w)| g.to_bits() != w.to_bits()) {
                        bad += 1;
                        eprintln!("anti {anti}, option {k}, block {b} from first_block 1: kernel {got:?}, kiln-core {want:?}");
                    }
                }
            }
        }
        assert_eq!(bad, 0, "antithetic {anti}: {bad} outputs differ from kiln-core");
        eprintln!(
            "antithetic {anti}: {} samples and {} blocks of {} options equal kiln-core's bits",
            count as usize * pps.len(),
            nb * pps.len(),
            pps.len()
        );
    }
}

#[test]
fn implied_vol_kernel_matches_kiln_core_bit_for_bit_on_the_host() {
    use kiln_core::finance::implied::{implied_volatility_book, sample, NoVolatility};
    let Some(cxx) = kiln_testkit::cxx_or_skip("implied_vol_kernel_matches_kiln_core_bit_for_bit_on_the_host")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "implied_vol_check",
        &[
            include_str!("../kernels/implied_vol.cuh"),
            include_str!("../kernels/implied_vol.cu"),
        ],
        include_str!("emu/implied_vol_check.cpp"),
        &[],
    );
    let (mut quotes, _) = sample::random_book(60_000, 2026);
    quotes.extend(sample::edge_quotes());
    let n = quotes.len();
    let case = dir.path().join("book");
    std::fs::create_dir_all(&case).unwrap();
    write(case.join("n.bin"), &[n as u64]);
    let col = |f: fn(&kiln_core::finance::implied::Quote) -> f64| quotes.iter().map(f).collect::<Vec<f64>>();
    write(case.join("price.bin"), &col(|q| q.price));
    write(case.join("spot.bin"), &col(|q| q.spot));
    write(case.join("strike.bin"), &col(|q| q.strike));
    write(case.join("maturity.bin"), &col(|q| q.maturity));
    write(case.join("rate.bin"), &col(|q| q.rate));
    write(case.join("dividend.bin"), &col(|q| q.dividend));
    let put: Vec<u8> = quotes
        .iter()
        .map(|q| u8::from(q.kind == OptionType::Put))
        .collect();
    std::fs::write(case.join("put.bin"), &put).unwrap();
    let run = Command::new(&exe).arg(&case).output().unwrap();
    assert!(
        run.status.success(),
        "implied_vol_check failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("grouped prefixes: 0 bad"), "{text}");
    let want = implied_volatility_book(&quotes);
    for (path, vol, reason) in [
        ("one pass", "vol.bin", "reason.bin"),
        ("grouped", "gvol.bin", "greason.bin"),
    ] {
        let vol = read_f64(case.join(vol));
        let reason = std::fs::read(case.join(reason)).unwrap();
        assert_eq!((vol.len(), reason.len()), (n, n));
        let (mut bad, mut counts) = (0usize, [0usize; 7]);
        for (i, (w, q)) in want.iter().zip(&quotes).enumerate() {
            let ok = match w {
                Ok(s) => reason[i] == 0 && vol[i].to_bits() == s.to_bits(),
                Err(e) => {
                    reason[i] == e.index()
                        && vol[i].is_nan()
                        && format!("{:?}", NoVolatility::from_index(reason[i], q))
                            == format!("{:?}", Some(*e))
                }
            };
            counts[w.as_ref().map_or_else(|e| e.index() as usize, |_| 0)] += 1;
            if !ok {
                bad += 1;
                if bad <= 8 {
                    eprintln!(
                        "{path}: quote {i} {q:?}: kernel ({}, code {}), kiln-core {w:?}",
                        vol[i], reason[i]
                    );
                }
            }
        }
        assert_eq!(bad, 0, "{path}: {bad} of {n} quotes differ from kiln-core");
        assert!(counts.iter().all(|&c| c > 0), "every code is reached: {counts:?}");
        eprintln!("{path}: {n} quotes equal kiln-core's bits; by code 0..=6: {counts:?}");
    }
    eprint!("{text}");
}
