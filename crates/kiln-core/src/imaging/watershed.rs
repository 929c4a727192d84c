//! scipy.ndimage.watershed_ift: the image foresting transform's watershed from markers, with
//! scipy's result element for element.
//!
//! The result is a function of scipy's queue discipline, not only of the costs (ties between
//! markers are decided by which label reaches an element first), so this replays scipy's C
//! routine (`NI_WatershedIFT`) operation for operation:
//! - one doubly linked FIFO/LIFO list per cost `0..=max(input)`; markers start at cost 0,
//!   positive ones pushed at the front (in row-major order, so the last is first), negative
//!   ones appended; every other element starts at `max + 1`;
//! - the lists are drained in cost order; an element taken off passes its label to each
//!   neighbour not yet taken off whose cost `max(cost, |input[p] - input[v]|)` it lowers, and
//!   moves it to that cost's list: appended for a negative label, pushed at the front otherwise;
//! - neighbours are flat offsets (the structure's elements in row-major order, the centre left
//!   out) kept when the flat index decomposes into in-range coordinates, so, as in scipy, an
//!   offset along the last axis wraps to the neighbouring row;
//! - an element is unlinked from its list only when it has a neighbour in it (scipy tests its
//!   `next`/`prev` pointers), so a list's only element stays its head when it moves; the lists
//!   here are index arrays that follow the same pointer updates, so what scipy then does, this
//!   does too;
//! - labels are C `int`s that pass through the output's type each time they are stored
//!   ([`StoredLabel`]).

use crate::error::{Error, Result};

const OP: &str = "watershed_ift";
const NONE: usize = usize::MAX;

/// How the output's type changes a label stored into it (scipy reads labels back from the
/// output): `int8` and `int16` keep the low bits; 32- and 64-bit types keep the `int`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredLabel {
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32` or `int64`.
    Wide,
}

impl StoredLabel {
    fn store(self, label: i32) -> i32 {
        match self {
            StoredLabel::I8 => i32::from(label as i8),
            StoredLabel::I16 => i32::from(label as i16),
            StoredLabel::Wide => label,
        }
    }
}

/// One cost's list: its first and last element.
#[derive(Clone, Copy)]
struct Ends {
    first: usize,
    last: usize,
}

/// The lists and the elements' links (scipy's `NI_WatershedElement`s).
struct Queue {
    ends: Vec<Ends>,
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl Queue {
    fn push_front(&mut self, c: usize, p: usize) {
        let e = self.ends[c];
        self.next[p] = e.first;
        self.prev[p] = NONE;
        if e.first != NONE {
            self.prev[e.first] = p;
        }
        self.ends[c].first = p;
        if e.last == NONE {
            self.ends[c].last = p;
        }
    }

    fn push_back(&mut self, c: usize, p: usize) {
        let e = self.ends[c];
        self.prev[p] = e.last;
        self.next[p] = NONE;
        if e.last != NONE {
            self.next[e.last] = p;
        }
        self.ends[c].last = p;
        if e.first == NONE {
            self.ends[c].first = p;
        }
    }

    /// Unlink `p` from list `c` where it has a neighbour in a list (scipy's test).
    fn unlink(&mut self, c: usize, p: usize) {
        let (prev, next) = (self.prev[p], self.next[p]);
        if next == NONE && prev == NONE {
            return;
        }
        if self.ends[c].first == p {
            self.ends[c].first = next;
        }
        if self.ends[c].last == p {
            self.ends[c].last = prev;
        }
        if prev != NONE {
            self.next[prev] = next;
        }
        if next != NONE {
            self.prev[next] = prev;
        }
    }
}

/// scipy.ndimage.watershed_ift of `input` (uint8 or uint16 values, row-major `shape`, at most
/// 7 axes) from `markers` (C `int`s: 0 unlabelled, negative background) with `structure`
/// (`3^ndim` elements, row-major); returns the labels as read back from an output of type
/// `stored`.
pub fn watershed_ift(
    input: &[u16],
    shape: &[usize],
    structure: &[bool],
    markers: &[i32],
    stored: StoredLabel,
) -> Result<Vec<i32>> {
    let ndim = shape.len();
    if ndim > 7 {
        return Err(Error::invalid(
            OP,
            format!("too many dimensions: {ndim} (scipy takes at most 7)"),
        ));
    }
    let size: usize = shape.iter().product();
    if input.len() != size || markers.len() != size {
        return Err(Error::invalid(
            OP,
            format!(
                "shape {shape:?} has {size} elements, the input {} and the markers {}",
                input.len(),
                markers.len()
            ),
        ));
    }
    if structure.len() != 3usize.pow(ndim as u32) {
        return Err(Error::invalid(
            OP,
            format!(
                "the structure of a {ndim}-D input has 3^{ndim} elements, got {}",
                structure.len()
            ),
        ));
    }
    let maxval = input.iter().copied().max().unwrap_or(0) as usize;
    let mut q = Queue {
        ends: vec![
            Ends {
                first: NONE,
                last: NONE
            };
            maxval + 1
        ],
        next: vec![NONE; size],
        prev: vec![NONE; size],
    };
    let mut cost = vec![maxval as u32 + 1; size];
    let mut done = vec![false; size];
    let mut out: Vec<i32> = markers.iter().map(|&m| stored.store(m)).collect();
    for (j, &label) in markers.iter().enumerate() {
        if label == 0 {
            continue;
        }
        cost[j] = 0;
        if q.ends[0].first == NONE {
            q.ends[0] = Ends { first: j, last: j };
        } else if label > 0 {
            q.push_front(0, j);
        } else {
            q.push_back(0, j);
        }
    }
    // flat offsets of the structure's elements (row-major), the centre's (0) left out
    let dims: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    let mut strides = vec![1i64; ndim];
    for a in (0..ndim.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * dims[a + 1];
    }
    let offsets: Vec<i64> = (0..structure.len())
        .filter(|&k| structure[k])
        .map(|k| {
            let mut k = k;
            let mut off = 0;
            for a in (0..ndim).rev() {
                off += ((k % 3) as i64 - 1) * strides[a];
                k /= 3;
            }
            off
        })
        .filter(|&o| o != 0)
        .collect();
    let inside = |mut idx: i64| {
        for a in 0..ndim {
            let c = idx / strides[a]; // C's division, toward zero
            if c < 0 || c >= dims[a] {
                return false;
            }
            idx -= c * strides[a];
        }
        true
    };
    // every element is taken off a list at most a few times; a bound keeps a corrupted list
    // from looping forever
    let mut budget = size.saturating_mul(offsets.len() + 4).saturating_add(1024);
    for c in 0..=maxval {
        while q.ends[c].first != NONE {
            budget = budget.checked_sub(1).ok_or_else(|| {
                Error::invalid(
                    OP,
                    "the queues did not drain (scipy's lists are inconsistent here)",
                )
            })?;
            let v = q.ends[c].first;
            q.ends[c].first = q.next[v];
            if q.next[v] != NONE {
                q.prev[q.next[v]] = NONE;
            }
            q.prev[v] = NONE;
            q.next[v] = NONE;
            done[v] = true;
            for &off in &offsets {
                let pi = v as i64 + off;
                if !inside(pi) {
                    continue;
                }
                let p = pi as usize;
                if done[p] {
                    continue;
                }
                let w = u32::from(input[p].abs_diff(input[v]));
                let pcost = cost[p] as usize;
                let m = cost[v].max(w);
                if (m as usize) < pcost {
                    cost[p] = m;
                    let label = out[v];
                    out[p] = stored.store(label);
                    q.unlink(pcost, p);
                    if label < 0 {
                        q.push_back(m as usize, p);
                    } else {
                        q.push_front(m as usize, p);
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scipy's test_watershed_ift01 (8-connected) and 02 (faces).
    #[test]
    fn scipys_basin_examples() {
        let data: Vec<u16> = [
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0,
            0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]
        .to_vec();
        let mut markers = vec![0i32; 56];
        markers[0] = -1;
        markers[3 * 7 + 3] = 1;
        let all = vec![true; 9];
        let got = watershed_ift(&data, &[8, 7], &all, &markers, StoredLabel::I8).unwrap();
        let mut want = vec![-1i32; 56];
        for y in 1..6 {
            for x in 1..6 {
                want[y * 7 + x] = 1;
            }
        }
        assert_eq!(got, want);
        let cross: Vec<bool> = (0..9).map(|k| k % 2 == 1 || k == 4).collect();
        let got = watershed_ift(&data, &[8, 7], &cross, &markers, StoredLabel::I8).unwrap();
        for k in [8, 12, 36, 40] {
            want[k] = -1; // the ring's corners are reached from outside first
        }
        assert_eq!(got, want);
    }

    #[test]
    fn labels_pass_through_the_output_type() {
        let got = watershed_ift(&[0, 0, 0], &[3], &[true; 3], &[300, 0, 0], StoredLabel::I8).unwrap();
        assert_eq!(got, [44, 44, 44]); // 300 stored as int8
        let e = watershed_ift(&[0; 256], &[2; 8], &[true; 6561], &[0; 256], StoredLabel::Wide);
        assert!(e.unwrap_err().to_string().contains("too many dimensions"));
    }
}
