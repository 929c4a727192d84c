//! The CPU evaluator's run of a typed reduction: the map, reduce and post-map programs over
//! chunks of lanes, outputs in parallel (`run_outer`) or each output's reduced elements
//! split over the threads and combined in a tree (`run_inner`).

use kiln_core::Error;
use rayon::prelude::*;

use crate::cpu::exec::{self, Chunk, PData, Sizes};
use crate::cpu::num::Buf;
use crate::cpu::program::{internal, Program, Regs};
use crate::cpu::CHUNK;
use crate::types::{ScalarType, Value};

/// One worker's registers for the three programs.
struct Workers {
    map: Regs,
    red: Regs,
    post: Regs,
    /// The tree's working lanes.
    work: Buf,
}

/// One reduction's programs, parameters and sizes.
pub(super) struct Ctx<'a, 'p> {
    pub(super) map: &'p Program,
    pub(super) red: &'p Program,
    pub(super) post: &'p Program,
    pub(super) params: &'p [PData<'a>],
    pub(super) sizes: Sizes,
    pub(super) names: &'p [String],
    pub(super) kernel: &'p str,
    pub(super) ident: Value,
    pub(super) nout: usize,
    pub(super) nred: usize,
}

impl<'a> Ctx<'a, '_> {
    fn workers(&self) -> Workers {
        let mk = |p: &Program| {
            let mut r = Regs::new(p, CHUNK);
            exec::setup(p, &mut r, &self.sizes, self.params);
            r
        };
        let lane = self
            .red
            .result
            .map(|r| self.red.lanes[r])
            .unwrap_or(crate::cpu::num::Lane::F64);
        Workers {
            map: mk(self.map),
            red: mk(self.red),
            post: mk(self.post),
            work: Buf::new(lane, CHUNK),
        }
    }

    fn chunk<'o, 'b>(
        &'b self,
        start: usize,
        n: usize,
        outs: &'b mut [&'o mut [u8]],
        shift: usize,
    ) -> Chunk<'a, 'o, 'b> {
        Chunk {
            start,
            n,
            params: self.params,
            outs,
            out_shift: shift,
            kernel: self.kernel,
            names: self.names,
        }
    }

    /// `red(a[..n], b[..n])` into the result register.
    fn combine(&self, w: &mut Workers, n: usize) -> Result<usize, Error> {
        let mut none: Vec<&mut [u8]> = Vec::new();
        let mut c = self.chunk(0, n, &mut none, 0);
        exec::run(self.red, &mut w.red, &mut c)?;
        self.red
            .result
            .ok_or_else(|| internal("reduce_expr has no result"))
    }

    fn acc_regs(&self) -> Result<(usize, usize), Error> {
        match self.red.acc {
            [Some(a), Some(b)] => Ok((a, b)),
            _ => Err(internal("reduce_expr operands")),
        }
    }

    /// Lanes over outputs: for each reduced element, `acc = red(acc, map)` on a block of
    /// outputs; then the post map on the block.
    pub(super) fn run_outer(&self, outs: &mut [&mut [u8]]) -> Result<(), Error> {
        let out_types: Vec<ScalarType> = self
            .params
            .iter()
            .filter_map(|p| match p {
                PData::Out { dtype, .. } => Some(*dtype),
                _ => None,
            })
            .collect();
        let nchunks = self.nout.div_ceil(CHUNK);
        let mut per: Vec<Vec<&mut [u8]>> = (0..nchunks).map(|_| Vec::new()).collect();
        for (o, t) in outs.iter_mut().zip(&out_types) {
            for (c, piece) in o.chunks_mut(CHUNK * t.size()).enumerate() {
                per[c].push(piece);
            }
        }
        let (ra, rb) = self.acc_regs()?;
        let mres = self
            .map
            .result
            .ok_or_else(|| internal("map_expr has no result"))?;
        per.into_par_iter().enumerate().try_for_each_init(
            || self.workers(),
            |w, (ci, mut pieces)| {
                let o0 = ci * CHUNK;
                let n = CHUNK.min(self.nout - o0);
                w.red.bufs[ra].splat(self.ident, n);
                for r in 0..self.nred {
                    let mut none: Vec<&mut [u8]> = Vec::new();
                    let mut c = self.chunk(r * self.nout + o0, n, &mut none, 0);
                    exec::run(self.map, &mut w.map, &mut c)?;
                    let m = std::mem::take(&mut w.map.bufs[mres]);
                    w.red.bufs[rb].copy_lanes(0, &m, 0, n);
                    w.map.bufs[mres] = m;
                    let res = self.combine(w, n)?;
                    let v = std::mem::take(&mut w.red.bufs[res]);
                    w.red.bufs[ra].copy_lanes(0, &v, 0, n);
                    w.red.bufs[res] = v;
                }
                self.post_block(w, o0, n, &mut pieces, o0, ra)
            },
        )
    }

    /// Runs the post map over outputs `o0..o0+n` with `a` from the reduce program's `a`
    /// register (`from`).
    fn post_block(
        &self,
        w: &mut Workers,
        o0: usize,
        n: usize,
        outs: &mut [&mut [u8]],
        shift: usize,
        from: usize,
    ) -> Result<(), Error> {
        if let Some(pa) = self.post.acc[0] {
            let v = std::mem::take(&mut w.red.bufs[from]);
            w.post.bufs[pa].copy_lanes(0, &v, 0, n);
            w.red.bufs[from] = v;
        }
        let mut c = self.chunk(o0, n, outs, shift);
        exec::run(self.post, &mut w.post, &mut c)
    }

    /// Reduces elements `r0..r1` of output `o` to one value, starting from the identity.
    fn partial(&self, w: &mut Workers, o: usize, r0: usize, r1: usize) -> Result<Value, Error> {
        let (ra, rb) = self.acc_regs()?;
        let mres = self
            .map
            .result
            .ok_or_else(|| internal("map_expr has no result"))?;
        let mut acc = self.ident;
        let mut r = r0;
        while r < r1 {
            let n = CHUNK.min(r1 - r);
            let mut none: Vec<&mut [u8]> = Vec::new();
            let mut c = self.chunk(o * self.nred + r, n, &mut none, 0);
            exec::run(self.map, &mut w.map, &mut c)?;
            w.work.copy_lanes(0, &w.map.bufs[mres], 0, n);
            // Pairwise tree over the chunk.
            let mut len = n;
            while len > 1 {
                let h = len / 2;
                w.red.bufs[ra].copy_lanes(0, &w.work, 0, h);
                w.red.bufs[rb].copy_lanes(0, &w.work, h, h);
                let res = self.combine(w, h)?;
                let odd = len % 2 == 1;
                if odd {
                    let last = w.work.get(len - 1);
                    w.work.copy_lanes(0, &w.red.bufs[res], 0, h);
                    w.work.set(h, last);
                } else {
                    w.work.copy_lanes(0, &w.red.bufs[res], 0, h);
                }
                len = h + odd as usize;
            }
            acc = self.combine_values(w, acc, w.work.get(0))?;
            r += n;
        }
        Ok(acc)
    }

    fn combine_values(&self, w: &mut Workers, a: Value, b: Value) -> Result<Value, Error> {
        let (ra, rb) = self.acc_regs()?;
        w.red.bufs[ra].set(0, a);
        w.red.bufs[rb].set(0, b);
        let res = self.combine(w, 1)?;
        Ok(w.red.bufs[res].get(0))
    }

    /// Lanes over the reduced elements of each output; outputs in parallel when there are
    /// many, otherwise each output's elements split across the pool and combined pairwise.
    pub(super) fn run_inner(&self, outs: &mut [&mut [u8]]) -> Result<(), Error> {
        let threads = rayon::current_num_threads().max(1);
        let accs: Vec<Value> = if self.nout >= 4 * threads {
            (0..self.nout)
                .into_par_iter()
                .map_init(|| self.workers(), |w, o| self.partial(w, o, 0, self.nred))
                .collect::<Result<_, _>>()?
        } else {
            let parts = (self.nred.div_ceil(CHUNK)).min(4 * threads).max(1);
            let step = self.nred.div_ceil(parts).div_ceil(CHUNK) * CHUNK;
            let mut accs = Vec::with_capacity(self.nout);
            for o in 0..self.nout {
                let ranges: Vec<(usize, usize)> = (0..self.nred)
                    .step_by(step.max(1))
                    .map(|r| (r, (r + step).min(self.nred)))
                    .collect();
                let mut vals: Vec<Value> = ranges
                    .into_par_iter()
                    .map_init(|| self.workers(), |w, (r0, r1)| self.partial(w, o, r0, r1))
                    .collect::<Result<_, _>>()?;
                let mut w = self.workers();
                while vals.len() > 1 {
                    let mut next = Vec::with_capacity(vals.len().div_ceil(2));
                    for pair in vals.chunks(2) {
                        next.push(if pair.len() == 2 {
                            self.combine_values(&mut w, pair[0], pair[1])?
                        } else {
                            pair[0]
                        });
                    }
                    vals = next;
                }
                accs.push(vals.first().copied().unwrap_or(self.ident));
            }
            accs
        };
        let mut w = self.workers();
        let (ra, _) = self.acc_regs()?;
        let mut o0 = 0;
        while o0 < self.nout {
            let n = CHUNK.min(self.nout - o0);
            for (k, v) in accs[o0..o0 + n].iter().enumerate() {
                w.red.bufs[ra].set(k, *v);
            }
            self.post_block(&mut w, o0, n, outs, 0, ra)?;
            o0 += n;
        }
        Ok(())
    }
}
