//! `kernels/american.cu` + `american_barrier.cu` on the host (`emu/american_barrier_check.cpp`,
//! a child process that runs one kernel step a command): kiln-core's `run_lsm_barrier` (and
//! `run_lsm` for a spot already past an in-option's barrier) drives it as
//! `launch_american_barrier.rs` drives the GPU, and every price, standard error and
//! confidence interval must equal the CPU engine's (kiln-cpu's `price_american_barrier`) bit
//! for bit: up and down, in and out, calls and puts, with and without a rebate, spots near
//! the barrier (many paths knocked at the first date), already past it, odd path counts, a
//! single date, and more than one CTA of blocks.

use super::build;
use kiln_core::finance::american::lsm_barrier::{run_lsm_barrier, LsmBarrier};
use kiln_core::finance::american::{
    run_lsm, AmericanBarrierSpec, AmericanSpec, LsmBackend, LsmPlan, RegressionSums, LSM_BASIS, LSM_SUMS,
};
use kiln_core::finance::{McParams, OptionType, PriceResult, Style};
use kiln_core::Result;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The emulated device: a running `american_barrier_check`.
struct Emu {
    child: Child,
    tx: ChildStdin,
    rx: BufReader<ChildStdout>,
}

impl Emu {
    fn start(exe: &Path) -> Self {
        let mut child = Command::new(exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let tx = child.stdin.take().unwrap();
        let rx = BufReader::new(child.stdout.take().unwrap());
        Emu { child, tx, rx }
    }

    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.tx, "{cmd}").unwrap();
        self.tx.flush().unwrap();
        let mut line = String::new();
        self.rx.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the emulator stopped at `{cmd}`");
        line.trim().to_string()
    }

    fn ok(&mut self, cmd: &str) {
        assert_eq!(self.ask(cmd), "ok", "{cmd}");
    }

    fn values(&mut self, cmd: &str) -> Vec<f64> {
        self.ask(cmd)
            .split(' ')
            .map(|h| f64::from_bits(u64::from_str_radix(h, 16).unwrap()))
            .collect()
    }
}

impl Drop for Emu {
    fn drop(&mut self) {
        let _ = writeln!(self.tx, "quit");
        let _ = self.tx.flush();
        let _ = self.child.wait();
    }
}

fn h64(x: f64) -> String {
    format!("{:x}", x.to_bits())
}

/// One option's run on the emulator, the launcher's steps (the `LsmBackend` the GPU engine
/// implements, kernel for kernel).
struct EmuLsm<'a> {
    emu: &'a mut Emu,
    blocks: usize,
}

impl EmuLsm<'_> {
    /// Configures the run: `bar` None is the vanilla engine.
    fn new<'a>(emu: &'a mut Emu, plan: &LsmPlan, mc: &McParams, bar: Option<&LsmBarrier>) -> EmuLsm<'a> {
        let keys = kiln_core::philox::key_schedule(kiln_core::philox::key_from_seed(mc.seed));
        let keys: Vec<String> = keys.concat().iter().map(|k| format!("{k:x}")).collect();
        let (level, up, is_in, rebate) = bar.map_or((0.0, false, false, 0.0), |b| {
            (b.level, b.spec.is_up(), b.is_in(), b.rebate())
        });
        emu.ok(&format!(
            "cfg {} {} {} {:x} {:x} {} {} {} {} {} {} {} {} {} {}",
            plan.paths,
            plan.dates,
            plan.option,
            plan.drift_dt.to_bits(),
            plan.vol_sqrt_dt.to_bits(),
            h64(plan.spec.spot),
            h64(plan.spec.strike),
            u32::from(plan.is_put()),
            h64(level),
            u32::from(up),
            u32::from(is_in),
            h64(rebate),
            h64(plan.df_step),
            u32::from(bar.is_some()),
            keys.join(" ")
        ));
        EmuLsm {
            emu,
            blocks: plan.blocks() as usize,
        }
    }
}

impl LsmBackend for EmuLsm<'_> {
    fn simulate(&mut self, _plan: &LsmPlan) -> Result<()> {
        self.emu.ok("sim");
        Ok(())
    }

    fn regress(&mut self, _plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>> {
        let v = self.emu.values(&format!("reg {d}"));
        assert_eq!(v.len(), self.blocks * LSM_SUMS);
        Ok(v.chunks_exact(LSM_SUMS)
            .map(|c| RegressionSums(c.try_into().unwrap()))
            .collect())
    }

    fn exercise(&mut self, _plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()> {
        self.emu.ok(&format!(
            "ex {d} {} {} {}",
            h64(beta[0]),
            h64(beta[1]),
            h64(beta[2])
        ));
        Ok(())
    }

    fn final_sums(&mut self, _plan: &LsmPlan) -> Result<Vec<[f64; 2]>> {
        let v = self.emu.values("fin");
        assert_eq!(v.len(), self.blocks * 2);
        Ok(v.chunks_exact(2).map(|c| [c[0], c[1]]).collect())
    }
}

/// `PriceAmericanBarrier::run`'s logic on the emulator.
fn price_emulated(
    emu: &mut Emu,
    spec: &AmericanBarrierSpec,
    mc: &McParams,
    option: u32,
) -> Result<PriceResult> {
    spec.validate()?;
    if spec.knocked(spec.option.spot) {
        if !spec.is_in() {
            return Ok(PriceResult::exact(spec.rebate));
        }
        let plan = LsmPlan::new(&spec.option, mc, option)?;
        return run_lsm(&plan, &mut EmuLsm::new(emu, &plan, mc, None));
    }
    let plan = LsmPlan::new(&spec.option, mc, option)?;
    let bar = LsmBarrier::new(spec, &plan);
    run_lsm_barrier(&plan, &bar, &mut EmuLsm::new(emu, &plan, mc, Some(&bar)))
}

fn spec(
    kind: OptionType,
    style: Style,
    spot: f64,
    barrier: f64,
    rebate: f64,
    dates: u32,
) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: kind,
            spot,
            strike: 40.0,
            rate: 0.06,
            dividend: if kind == OptionType::Call { 0.04 } else { 0.0 },
            volatility: 0.3,
            maturity: 1.0,
            exercise_dates: dates,
        },
        style,
        barrier,
        rebate,
    }
}

fn same(g: &PriceResult, c: &PriceResult) -> bool {
    g.price.to_bits() == c.price.to_bits()
        && g.std_error.to_bits() == c.std_error.to_bits()
        && g.ci95.0.to_bits() == c.ci95.0.to_bits()
        && g.ci95.1.to_bits() == c.ci95.1.to_bits()
        && g.paths_used == c.paths_used
}

#[test]
fn american_barrier_kernels_price_the_cpu_engine_s_bits_on_the_host() {
    let Some(cxx) =
        kiln_testkit::cxx_or_skip("american_barrier_kernels_price_the_cpu_engine_s_bits_on_the_host")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "american_barrier_check",
        &[
            include_str!("../../kernels/finance.cuh"),
            include_str!("../../kernels/american.cu"),
            include_str!("../../kernels/american_barrier.cu"),
        ],
        include_str!("american_barrier_check.cpp"),
        &[],
    );
    let mut emu = Emu::start(&exe);
    let mut cases = Vec::new();
    for kind in [OptionType::Put, OptionType::Call] {
        for (style, far, near, past) in [
            (Style::BarrierUpOut, 50.0, 41.0, 38.0),
            (Style::BarrierUpIn, 50.0, 41.0, 38.0),
            (Style::BarrierDownOut, 30.0, 39.0, 42.0),
            (Style::BarrierDownIn, 30.0, 39.0, 42.0),
        ] {
            for rebate in [0.0, 1.5] {
                // a barrier some paths reach, one most reach at the first date, one the
                // spot is already past
                cases.push(spec(kind, style, 40.0, far, rebate, 12));
                cases.push(spec(kind, style, 40.0, near, rebate, 7));
                cases.push(spec(kind, style, 40.0, past, rebate, 5));
            }
            cases.push(spec(kind, style, 40.0, far, 0.5, 1));
        }
    }
    let mut bad = 0usize;
    for (i, s) in cases.iter().enumerate() {
        // odd counts; every eighth case takes more than 8 blocks (two CTAs of warps)
        let paths = if i % 8 == 3 {
            8 * 1024 + 333
        } else {
            2049 + 2 * i as u64
        };
        let mc = McParams {
            paths,
            seed: 0xba77 + i as u64,
            ..McParams::default()
        };
        let option = 3 * i as u32 + 1;
        let got = price_emulated(&mut emu, s, &mc, option).unwrap();
        let want = kiln_cpu::finance::price_american_barrier(s, &mc, option).unwrap();
        if !same(&got, &want) {
            bad += 1;
            eprintln!(
                "{:?} {:?} H {} R {} dates {} paths {paths}: emulated {} ({}), cpu {} ({})",
                s.option.option_type,
                s.style,
                s.barrier,
                s.rebate,
                s.option.exercise_dates,
                got.price,
                got.std_error,
                want.price,
                want.std_error
            );
        }
    }
    assert_eq!(
        bad,
        0,
        "{bad} of {} options differ from the CPU engine",
        cases.len()
    );
    eprintln!(
        "{} American barrier options equal the CPU engine's bits",
        cases.len()
    );
}
