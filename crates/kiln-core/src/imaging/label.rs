//! Connected-component labelling of an n-D array, with scipy.ndimage.label's result: every
//! group of non-zero elements joined through a structuring element's neighbours gets one
//! label, numbered 1, 2, ... in row-major order of each group's first element.
//!
//! Design: a two-pass union-find over row-major lines (the last axis):
//! - pass 1 gives each non-zero element the label of a neighbour that comes before it in
//!   row-major order (the structure's elements before its centre), merging the labels it
//!   meets, or a new provisional label when it has none; union by the smaller root, so each
//!   group's root is the provisional label made at its first element. Where the structure
//!   joins an element to the one before it along the last axis, a run of non-zero elements
//!   takes one decision for all its elements;
//! - the roots are numbered in provisional order, which is row-major order of the groups'
//!   first elements (scipy's numbering, which compacts its merge table the same way);
//! - pass 2 writes every element's final label.
//!
//! Large arrays run pass 1 and pass 2 in slabs of rows (axis 0) in parallel (rayon): each slab
//! labels itself, the labels of slab `s` come after those of slab `s - 1`, and the slabs'
//! seams are merged before numbering, so the result does not depend on the slab count.
//!
//! The structure must be centrosymmetric (scipy refuses others), so "neighbour" is symmetric
//! and the groups are the connected components of the neighbour graph.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::{Error, Result};

const OP: &str = "label";

/// Arrays of at least this many elements are labelled in parallel slabs.
const PARALLEL_MIN: usize = 1 << 16;

/// An integer type labels are written in: `i32` (scipy's default below 2^31 - 2 elements)
/// or `i64`.
pub trait LabelInt: bytemuck::Pod + Default + Send + Sync + PartialEq + 'static {
    /// numpy's name of the type.
    const NAME: &'static str;
    /// The largest label the type holds.
    const MAX: usize;
    /// `v` (at most [`Self::MAX`]) in this type.
    fn from_usize(v: usize) -> Self;
    /// The label as an index.
    fn to_usize(self) -> usize;
}

impl LabelInt for i32 {
    const NAME: &'static str = "int32";
    const MAX: usize = i32::MAX as usize;
    fn from_usize(v: usize) -> Self {
        v as i32
    }
    fn to_usize(self) -> usize {
        self as usize
    }
}

impl LabelInt for i64 {
    const NAME: &'static str = "int64";
    const MAX: usize = i64::MAX as usize;
    fn from_usize(v: usize) -> Self {
        v as i64
    }
    fn to_usize(self) -> usize {
        self as usize
    }
}

/// A structuring element of `3^ndim` elements (row-major), centrosymmetric; its centre is
/// not read (an element is always in its own group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Structure {
    ndim: usize,
    mask: Vec<bool>,
}

impl Structure {
    /// `mask` (row-major, `3^ndim` elements) as a structure; refused unless it equals itself
    /// reversed along every axis (a connection must hold both ways).
    pub fn new(ndim: usize, mask: Vec<bool>) -> Result<Self> {
        let n = elements(ndim)?;
        if mask.len() != n {
            return Err(Error::invalid(
                OP,
                format!(
                    "the structure of a {ndim}-D input has 3^{ndim} = {n} elements, got {}",
                    mask.len()
                ),
            ));
        }
        // Reversing every axis of a row-major 3x3x... array reverses its flat order.
        if mask.iter().ne(mask.iter().rev()) {
            return Err(Error::invalid(
                OP,
                "the structure is not centrosymmetric (equal to itself reversed along every \
                 axis), so a connection would not hold both ways",
            ));
        }
        Ok(Structure { ndim, mask })
    }

    /// scipy's `generate_binary_structure(ndim, connectivity)`: the neighbours at most
    /// `connectivity` axes away (1: faces, `ndim`: every touching element).
    pub fn connectivity(ndim: usize, connectivity: usize) -> Result<Self> {
        let n = elements(ndim)?;
        let mask = (0..n)
            .map(|k| offsets_of(k, ndim).iter().filter(|&&d| d != 0).count() <= connectivity)
            .collect();
        Ok(Structure { ndim, mask })
    }

    /// The number of axes.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// The elements, row-major.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// The true elements before the centre in row-major order as `[dz, dy, dx]` offsets of
    /// an input of at most 3 axes seen as `(d, h, w)` (fewer axes are the trailing ones);
    /// `None` for 4 axes or more. The GPU labelling's neighbour table.
    pub fn backward3(&self) -> Option<Vec<[isize; 3]>> {
        if self.ndim > 3 {
            return None;
        }
        Some(
            self.backward()
                .into_iter()
                .map(|o| {
                    let mut d = [0isize; 3];
                    d[3 - o.len()..].copy_from_slice(&o);
                    d
                })
                .collect(),
        )
    }

    /// The true elements before the centre in row-major order, as per-axis offsets.
    fn backward(&self) -> Vec<Vec<isize>> {
        let centre = self.mask.len() / 2;
        (0..centre)
            .filter(|&k| self.mask[k])
            .map(|k| offsets_of(k, self.ndim))
            .collect()
    }
}

/// `3^ndim`, refused where it does not fit in memory's index type.
fn elements(ndim: usize) -> Result<usize> {
    u32::try_from(ndim)
        .ok()
        .and_then(|d| 3usize.checked_pow(d))
        .ok_or_else(|| Error::invalid(OP, format!("a structure of {ndim} axes is too large")))
}

/// The per-axis offsets (-1, 0, 1) of element `k` of a row-major `3^ndim` structure.
fn offsets_of(mut k: usize, ndim: usize) -> Vec<isize> {
    let mut d = vec![0isize; ndim];
    for a in (0..ndim).rev() {
        d[a] = (k % 3) as isize - 1;
        k /= 3;
    }
    d
}

/// Neighbour lines of a line: those at `dl` (offsets of the axes before the last), and which
/// of their elements at `-1`, `0`, `+1` along the last axis are neighbours.
#[derive(Clone, Debug)]
struct Group {
    dl: Vec<isize>,
    /// `dl` in lines (row-major over the axes before the last).
    lines: isize,
    dx: Vec<isize>,
    /// The smallest and largest of `dx`.
    lo: isize,
    hi: isize,
    /// `dx` is -1 and 1 without 0: a run of one element has a hole in its span.
    holed: bool,
}

/// The labelling of one array shape with one structure.
struct Plan {
    /// The axes before the last (`[]` for 1-D).
    outer: Vec<usize>,
    /// The last axis's length.
    len: usize,
    groups: Vec<Group>,
    /// Whether the element before along the last axis is a neighbour.
    prev: bool,
}

impl Plan {
    fn new(shape: &[usize], s: &Structure) -> Self {
        let n = shape.len();
        let outer = shape[..n - 1].to_vec();
        let mut strides = vec![1isize; n - 1];
        for a in (0..n.saturating_sub(2)).rev() {
            strides[a] = strides[a + 1] * outer[a + 1] as isize;
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut prev = false;
        for d in s.backward() {
            let (dl, dx) = (d[..n - 1].to_vec(), d[n - 1]);
            if dl.iter().all(|&v| v == 0) {
                prev = true; // the only element before the centre on its own line
                continue;
            }
            match groups.iter_mut().find(|g| g.dl == dl) {
                Some(g) => g.dx.push(dx),
                None => {
                    let lines = dl.iter().zip(&strides).map(|(d, s)| d * s).sum();
                    groups.push(Group {
                        dl,
                        lines,
                        dx: vec![dx],
                        lo: 0,
                        hi: 0,
                        holed: false,
                    });
                }
            }
        }
        for g in &mut groups {
            g.lo = g.dx.iter().min().copied().unwrap_or(0);
            g.hi = g.dx.iter().max().copied().unwrap_or(0);
            g.holed = !g.dx.contains(&0) && g.lo < 0 && g.hi > 0;
        }
        Plan {
            outer,
            len: shape[n - 1],
            groups,
            prev,
        }
    }

    /// The coordinates (axes before the last) of line `li`.
    fn coords(&self, mut li: usize) -> Vec<usize> {
        let mut c = vec![0; self.outer.len()];
        for a in (0..self.outer.len()).rev() {
            c[a] = li % self.outer[a];
            li /= self.outer[a];
        }
        c
    }

    /// Whether the neighbour line of group `g` exists for a line at `c`.
    fn valid(&self, g: &Group, c: &[usize]) -> bool {
        g.dl.iter()
            .zip(c)
            .zip(&self.outer)
            .all(|((&d, &c), &n)| (0..n as isize).contains(&(c as isize + d)))
    }
}

/// The root of `x` (path halving).
fn find<L: LabelInt>(parent: &mut [L], mut x: usize) -> usize {
    loop {
        let p = parent[x].to_usize();
        if p == x {
            return x;
        }
        let gp = parent[p].to_usize();
        parent[x] = L::from_usize(gp);
        x = gp;
    }
}

/// Merge the groups of `a` and `b` under the smaller root; returns it.
fn union<L: LabelInt>(parent: &mut [L], a: usize, b: usize) -> usize {
    let (ra, rb) = (find(parent, a), find(parent, b));
    let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
    parent[hi] = L::from_usize(lo);
    lo
}

/// What pass 1 leaves of one slab: its merge table (`parent[0]` unused, labels `1..`).
struct Slab<L> {
    parent: Vec<L>,
}

impl<L: LabelInt> Slab<L> {
    /// `cur` after meeting a neighbour labelled `l` (0: none yet).
    fn meet(&mut self, cur: usize, l: usize) -> usize {
        if l == 0 || l == cur {
            cur
        } else if cur == 0 {
            l
        } else {
            union(&mut self.parent, cur, l)
        }
    }

    /// A new provisional label.
    fn new_label(&mut self) -> usize {
        let l = self.parent.len();
        self.parent.push(L::from_usize(l));
        l
    }
}

/// A neighbour line of the line being labelled, in the same slab: its start in `out`, and
/// the offsets along the last axis that are neighbours.
struct Near<'a> {
    start: usize,
    g: &'a Group,
    /// The neighbour line's mask ([`row_bits`]; filled only where lines are labelled run
    /// by run).
    bits: &'a [u64],
}

/// The positions `i + dx` (`i` in `a..b`, `dx` in the group's offsets) inside `0..len`, as a
/// range, and the one position inside it that is not a neighbour (`usize::MAX` if none: `dx`
/// of -1 and 1 only, a run of one).
#[inline(always)]
fn run_span(a: usize, b: usize, g: &Group, len: usize) -> (Range<usize>, usize) {
    let start = (a as isize + g.lo).max(0) as usize;
    let end = ((b as isize + g.hi).max(0) as usize).min(len);
    let hole = if g.holed && b - a == 1 { a } else { usize::MAX };
    (start..end, hole)
}

/// Pass 1 over lines `lines` (whole rows of axis 0), `out` holding exactly those lines:
/// labels local to the slab.
///
/// Where the structure joins an element to the one before it along the last axis, each run
/// of non-zero elements is one group of its own line and takes one decision: the labels met
/// in the neighbour lines over the run's span are merged, or a new label is made.
fn first_pass<L: LabelInt>(plan: &Plan, mask: &[u8], lines: Range<usize>, out: &mut [L]) -> Slab<L> {
    let len = plan.len;
    let mut slab = Slab {
        parent: vec![L::default()],
    };
    let mut c = plan.coords(lines.start);
    let mut bits = Vec::with_capacity(len.div_ceil(64));
    // the neighbour lines' masks as bits, one buffer a group (label_runs walks their runs)
    let mut nbits: Vec<Vec<u64>> = vec![Vec::with_capacity(len.div_ceil(64)); plan.groups.len()];
    // (group, the neighbour line's start in `out`) for the neighbour lines of this slab;
    // lines of earlier slabs are merged at the seam
    let mut at: Vec<(usize, usize)> = Vec::with_capacity(plan.groups.len());
    for li in lines.clone() {
        at.clear();
        for (gi, g) in plan.groups.iter().enumerate() {
            if plan.valid(g, &c) {
                let nl = (li as isize + g.lines) as usize;
                if nl >= lines.start {
                    if plan.prev {
                        row_bits(&mask[nl * len..(nl + 1) * len], &mut nbits[gi]);
                    }
                    at.push((gi, (nl - lines.start) * len));
                }
            }
        }
        let near: Vec<Near> = at
            .iter()
            .map(|&(gi, start)| Near {
                start,
                g: &plan.groups[gi],
                bits: &nbits[gi],
            })
            .collect();
        let base = (li - lines.start) * len;
        let row = &mask[li * len..(li + 1) * len];
        // the neighbour lines come before this one
        let (before, rest) = out.split_at_mut(base);
        let line = &mut rest[..len];
        if plan.prev {
            row_bits(row, &mut bits);
            label_runs(&mut slab, &near, &bits, line, before);
        } else {
            label_elements(&mut slab, &near, row, line, before);
        }
        // next line's coordinates
        for a in (0..c.len()).rev() {
            c[a] += 1;
            if c[a] < plan.outer[a] {
                break;
            }
            c[a] = 0;
        }
    }
    slab
}
/// `row`'s non-zero bytes as bits, 64 a word (bit `i % 64` of word `i / 64`; the last
/// word's bits past the row are 0). Eight bytes at a time: each byte's "non-zero" in its top
/// bit, then the eight top bits gathered into one byte by a multiply (the partial products
/// land on distinct bits, so nothing carries). Written by hand: run finding byte by byte
/// mispredicts a branch per run boundary, word scans with `trailing_zeros` do not.
fn row_bits(row: &[u8], bits: &mut Vec<u64>) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const TOP: u64 = 0x8080_8080_8080_8080;
    const GATHER: u64 = 0x0102_0408_1020_4080;
    bits.clear();
    for chunk in row.chunks(64) {
        let mut w = 0u64;
        let mut eights = chunk.chunks_exact(8);
        for (k, c) in eights.by_ref().enumerate() {
            let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            let t = (((v & LOW7) + LOW7) | v) & TOP;
            w |= ((t >> 7).wrapping_mul(GATHER) >> 56) << (8 * k);
        }
        let done = chunk.len() - eights.remainder().len();
        for (i, &m) in eights.remainder().iter().enumerate() {
            w |= u64::from(m != 0) << (done + i);
        }
        bits.push(w);
    }
}

/// The first position at or after `i` whose bit is `want` (bits past the row read as 0, so
/// a search for a 0 ends at the row's end), or `len`.
#[inline(always)]
fn next_bit(bits: &[u64], i: usize, want: bool, len: usize) -> usize {
    let flip = if want { 0 } else { u64::MAX };
    let mut k = i / 64;
    if k >= bits.len() {
        return len;
    }
    let mut w = (bits[k] ^ flip) & (u64::MAX << (i % 64));
    while w == 0 {
        k += 1;
        if k == bits.len() {
            return len;
        }
        w = bits[k] ^ flip;
    }
    (k * 64 + w.trailing_zeros() as usize).min(len)
}

/// One line where an element is joined to the one before it: run by run (`bits`: the
/// line's mask from [`row_bits`]).
fn label_runs<L: LabelInt>(slab: &mut Slab<L>, near: &[Near], bits: &[u64], line: &mut [L], before: &[L]) {
    let len = line.len();
    // one fill of the whole line, not one a gap between runs
    line.fill(L::default());
    let mut i = 0;
    while i < len {
        let a = next_bit(bits, i, true, len);
        if a == len {
            return;
        }
        let b = next_bit(bits, a, false, len);
        let mut cur = 0;
        for n in near {
            let (span, hole) = run_span(a, b, n.g, len);
            // the neighbour line's runs over the span: each run carries one label (its
            // line was labelled run by run), so one read a run
            let mut j = next_bit(n.bits, span.start, true, span.end);
            while j < span.end {
                let e = next_bit(n.bits, j, false, span.end);
                // the hole (a run of one's own position with dx -1 and 1) is not a
                // neighbour: read the run's label past it, if the run goes on
                let at = if j == hole { j + 1 } else { j };
                if at < e {
                    cur = slab.meet(cur, before[n.start + at].to_usize());
                }
                j = next_bit(n.bits, e, true, span.end);
            }
        }
        if cur == 0 {
            cur = slab.new_label();
        }
        line[a..b].fill(L::from_usize(cur));
        i = b;
    }
}

/// One line where an element is not joined to the one before it: element by element.
fn label_elements<L: LabelInt>(slab: &mut Slab<L>, near: &[Near], row: &[u8], line: &mut [L], before: &[L]) {
    let len = row.len();
    for i in 0..len {
        if row[i] == 0 {
            line[i] = L::default();
            continue;
        }
        let mut cur = 0;
        for n in near {
            for &dx in &n.g.dx {
                let j = i as isize + dx;
                if j >= 0 && (j as usize) < len {
                    cur = slab.meet(cur, before[n.start + j as usize].to_usize());
                }
            }
        }
        if cur == 0 {
            cur = slab.new_label();
        }
        line[i] = L::from_usize(cur);
    }
}

/// scipy.ndimage.label of `mask` (row-major `shape`, non-zero bytes are the foreground) with
/// `structure` (of the same rank), written into `out` (same length): 0 for background, the
/// groups numbered 1, 2, ... in row-major order of their first element.
pub fn label<L: LabelInt>(
    mask: &[u8],
    shape: &[usize],
    structure: &Structure,
    out: &mut [L],
) -> Result<usize> {
    let slabs = if shape.len() >= 2 && mask.len() >= PARALLEL_MIN {
        (rayon::current_num_threads() * 2).min(shape[0])
    } else {
        1
    };
    label_in_slabs(mask, shape, structure, out, slabs)
}

/// [`label`] with pass 1 and 2 split into `slabs` slabs of rows (at most `shape[0]`; 1 for
/// 1-D and 0-D input).
pub(crate) fn label_in_slabs<L: LabelInt>(
    mask: &[u8],
    shape: &[usize],
    structure: &Structure,
    out: &mut [L],
    slabs: usize,
) -> Result<usize> {
    if structure.ndim() != shape.len() {
        return Err(Error::invalid(
            OP,
            format!(
                "the structure has {} axes and the input {}: they must be equal",
                structure.ndim(),
                shape.len()
            ),
        ));
    }
    let size = shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(|| Error::invalid(OP, format!("shape {shape:?} has too many elements")))?;
    if mask.len() != size || out.len() != size {
        return Err(Error::invalid(
            OP,
            format!(
                "shape {shape:?} has {size} elements, but the input has {} and the output {}",
                mask.len(),
                out.len()
            ),
        ));
    }
    if size > L::MAX {
        return Err(Error::invalid(
            OP,
            format!(
                "{size} elements may need labels beyond {}: label into int64",
                L::NAME
            ),
        ));
    }
    if size == 0 {
        return Ok(0);
    }
    if shape.is_empty() {
        let on = usize::from(mask[0] != 0);
        out[0] = L::from_usize(on);
        return Ok(on);
    }
    let plan = Plan::new(shape, structure);
    // slabs are whole rows of axis 0; a 1-D array is one row of one line
    let rows = if shape.len() >= 2 { shape[0] } else { 1 };
    let lines_per_row = size / rows / plan.len;
    let slabs = slabs.clamp(1, rows);
    let rows_per_slab = rows.div_ceil(slabs);
    let lines_per_slab = rows_per_slab * lines_per_row;
    let chunk = lines_per_slab * plan.len;
    let total_lines = size / plan.len;
    let pass1 = |(s, o): (usize, &mut [L])| {
        let l0 = s * lines_per_slab;
        first_pass(&plan, mask, l0..(l0 + lines_per_slab).min(total_lines), o)
    };
    let parts: Vec<Slab<L>> = if slabs > 1 {
        out.par_chunks_mut(chunk).enumerate().map(pass1).collect()
    } else {
        vec![pass1((0, out))]
    };

    // One merge table over every slab's labels, slab by slab.
    let mut bases = Vec::with_capacity(parts.len());
    let total: usize = parts.iter().map(|p| p.parent.len() - 1).sum();
    let mut parent = Vec::with_capacity(total + 1);
    parent.push(L::default());
    for p in &parts {
        let base = parent.len() - 1;
        bases.push(base);
        parent.extend(p.parent[1..].iter().map(|&l| L::from_usize(base + l.to_usize())));
    }
    // The seams: the first row of slab s against the last row of slab s - 1.
    for s in 1..parts.len() {
        let l0 = s * lines_per_slab;
        for li in l0..l0 + lines_per_row {
            let c = plan.coords(li);
            for g in plan.groups.iter().filter(|g| g.dl[0] == -1 && plan.valid(g, &c)) {
                let nl = (li as isize + g.lines) as usize;
                for i in 0..plan.len {
                    let l = out[li * plan.len + i].to_usize();
                    if l == 0 {
                        continue;
                    }
                    for &dx in &g.dx {
                        let j = i as isize + dx;
                        if j < 0 || j >= plan.len as isize {
                            continue;
                        }
                        let m = out[nl * plan.len + j as usize].to_usize();
                        if m != 0 {
                            union(&mut parent, bases[s] + l, bases[s - 1] + m);
                        }
                    }
                }
            }
        }
    }
    // Roots in label order are the groups in row-major order of their first element.
    let mut fin = vec![L::default(); total + 1];
    let mut labels = 0;
    for l in 1..=total {
        let r = find(&mut parent, l);
        fin[l] = if r == l {
            labels += 1;
            L::from_usize(labels)
        } else {
            fin[r]
        };
    }
    let pass2 = |(s, o): (usize, &mut [L])| {
        let base = bases[s];
        // every element looked up, the background too (fin[0] is 0): a select, not a
        // branch on the mask, which mispredicts on noisy masks
        for v in o.iter_mut() {
            let l = v.to_usize();
            *v = fin[if l == 0 { 0 } else { base + l }];
        }
    };
    if slabs > 1 {
        out.par_chunks_mut(chunk).enumerate().for_each(pass2);
    } else {
        pass2((0, out));
    }
    Ok(labels)
}

#[cfg(test)]
#[path = "label_tests.rs"]
mod tests;
