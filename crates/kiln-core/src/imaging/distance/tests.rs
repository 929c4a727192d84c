//! The distance transforms against independent references on random masks of odd sizes:
//! [`edt`] against a brute-force nearest-background search (distances equal to the bit, with
//! samplings whose products are exact) and against a literal sequential port of scipy's
//! recursive `_ComputeFT` (the indices, ties included); [`cdt`] against a breadth-first search
//! over the metric's neighbours; [`bf`] against a direct search with scipy's tie rule.

use super::*;
use std::collections::VecDeque;

/// A small deterministic generator (no dev-dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn mask(&mut self, n: usize, percent: u64) -> Vec<u8> {
        (0..n).map(|_| u8::from(self.next() % 100 < percent)).collect()
    }
    fn shape(&mut self, rank: usize, max: u64) -> Vec<usize> {
        (0..rank).map(|_| 1 + (self.next() % max) as usize).collect()
    }
}

fn coords(p: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    unravel(p, shape, &mut c);
    c
}

/// scipy's distance from `x` to feature `f`, in its order.
fn scipy_distance(f: &[i32], x: &[usize], s: &[f64]) -> f64 {
    let mut acc = 0.0;
    for k in 0..x.len() {
        let t = f64::from(f[k] - x[k] as i32) * s[k];
        acc = if k == 0 { t * t } else { acc + t * t };
    }
    acc.sqrt()
}

/// A literal sequential port of scipy's `_ComputeFT` / `_VoronoiFT` over component-major
/// features with strides, as the C code runs it.
fn reference_ft(mask: &[u8], shape: &[usize], s: Option<&[f64]>) -> Vec<i32> {
    let r = shape.len();
    let n: usize = shape.iter().product();
    let mut ft = vec![0i32; r * n];
    let mut st = vec![1usize; r];
    for a in (0..r - 1).rev() {
        st[a] = st[a + 1] * shape[a + 1];
    }
    // base: features of background elements
    for p in 0..n {
        let c = coords(p, shape);
        if mask[p] != 0 {
            ft[p] = -1;
        } else {
            for k in 0..r {
                ft[k * n + p] = c[k] as i32;
            }
        }
    }
    for d in 0..r {
        // every line along axis d
        for p in 0..n {
            let c = coords(p, shape);
            if c[d] != 0 {
                continue;
            }
            let len = shape[d];
            let f: Vec<Vec<i64>> = (0..len)
                .map(|i| (0..r).map(|k| i64::from(ft[k * n + p + i * st[d]])).collect())
                .collect();
            let coor: Vec<i64> = c.iter().map(|&v| v as i64).collect();
            let mut g: Vec<usize> = Vec::new();
            for ii in 0..len {
                if f[ii][0] < 0 {
                    continue;
                }
                let fd = f[ii][d] as f64;
                let mut wr = 0.0;
                for jj in 0..r {
                    if jj != d {
                        let mut tw = (f[ii][jj] - coor[jj]) as f64;
                        if let Some(s) = s {
                            tw *= s[jj];
                        }
                        wr += tw * tw;
                    }
                }
                while g.len() >= 2 {
                    let (i1, i2) = (g[g.len() - 1], g[g.len() - 2]);
                    let f1 = f[i1][d] as f64;
                    let mut a = f1 - f[i2][d] as f64;
                    let mut b = fd - f1;
                    if let Some(s) = s {
                        a *= s[d];
                        b *= s[d];
                    }
                    let c = a + b;
                    let (mut ur, mut vr) = (0.0, 0.0);
                    for jj in 0..r {
                        if jj != d {
                            let cc = coor[jj] as f64;
                            let mut tu = f[i2][jj] as f64 - cc;
                            let mut tv = f[i1][jj] as f64 - cc;
                            if let Some(s) = s {
                                tu *= s[jj];
                                tv *= s[jj];
                            }
                            ur += tu * tu;
                            vr += tv * tv;
                        }
                    }
                    if c * vr - b * ur - a * wr - a * b * c <= 0.0 {
                        break;
                    }
                    g.pop();
                }
                g.push(ii);
            }
            if g.is_empty() {
                continue;
            }
            let delta = |l: usize, ii: usize| {
                let mut acc = 0.0;
                for jj in 0..r {
                    let mut t = if jj == d {
                        (f[g[l]][jj] - ii as i64) as f64
                    } else {
                        (f[g[l]][jj] - coor[jj]) as f64
                    };
                    if let Some(s) = s {
                        t *= s[jj];
                    }
                    acc += t * t;
                }
                acc
            };
            let mut l = 0;
            for ii in 0..len {
                let mut d1 = delta(l, ii);
                while l + 1 < g.len() {
                    let d2 = delta(l + 1, ii);
                    if d1 <= d2 {
                        break;
                    }
                    d1 = d2;
                    l += 1;
                }
                for k in 0..r {
                    ft[k * n + p + ii * st[d]] = f[g[l]][k] as i32;
                }
            }
        }
    }
    ft
}

#[test]
fn edt_matches_brute_force_and_scipys_recursion() {
    let mut rng = Lcg(7);
    let samplings: [&[f64]; 5] = [&[1.0], &[2.0], &[0.5], &[1.5], &[3.0]];
    let mut checked = 0;
    for case in 0..240 {
        let rank = 1 + case % 4;
        let shape = rng.shape(rank, if rank == 4 { 5 } else { 13 });
        let n: usize = shape.iter().product();
        let percent = [50, 90, 99, 10][case % 4];
        let mask = rng.mask(n, percent);
        let s: Vec<f64> = (0..rank)
            .map(|_| samplings[(rng.next() % 5) as usize][0])
            .collect();
        let given = case % 3 != 0;
        let sp = given.then_some(&s[..]);
        let out = edt(&mask, &shape, sp, true, true).unwrap();
        let ind = out.indices.unwrap();
        let dist = out.distances.unwrap();
        let ones = vec![1.0; rank];
        let sv = if given { &s[..] } else { &ones[..] };
        assert_eq!(ind, reference_ft(&mask, &shape, sp), "{shape:?} {sp:?}");
        let bg: Vec<usize> = (0..n).filter(|&p| mask[p] == 0).collect();
        for p in 0..n {
            let x = coords(p, &shape);
            let f: Vec<i32> = (0..rank).map(|k| ind[k * n + p]).collect();
            let got = dist[p];
            assert_eq!(got.to_bits(), scipy_distance(&f, &x, sv).to_bits());
            if bg.is_empty() {
                assert_eq!(f[0], -1);
                continue;
            }
            let fp = f
                .iter()
                .zip(&shape)
                .fold(0usize, |a, (&v, &d)| a * d + v as usize);
            assert_eq!(mask[fp], 0, "the feature is background");
            let best = bg
                .iter()
                .map(|&b| {
                    let c: Vec<i32> = coords(b, &shape).iter().map(|&v| v as i32).collect();
                    scipy_distance(&c, &x, sv)
                })
                .fold(f64::INFINITY, f64::min);
            assert_eq!(got, best, "{shape:?} {sv:?} at {x:?}");
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn edt_result_does_not_depend_on_threads() {
    let mut rng = Lcg(11);
    let shape = [67, 45, 23];
    let mask = rng.mask(shape.iter().product(), 60);
    let s = [0.7, 1.3, 2.1];
    let a = edt(&mask, &shape, Some(&s), true, true).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let b = pool.install(|| edt(&mask, &shape, Some(&s), true, true).unwrap());
    assert_eq!(a, b);
    assert_eq!(
        a.indices.unwrap(),
        reference_ft(&mask, &shape, Some(&s)),
        "non-exact sampling: scipy's order of sums"
    );
}

#[test]
fn edt_unusual_samplings_and_ranks_follow_scipys_stack() {
    // the first pass is a scan only for ordinary samplings; these run scipy's stack
    let mut rng = Lcg(17);
    for s0 in [0.0, f64::NAN, f64::INFINITY, 1e-200, -2.0, 1e200] {
        for shape in [vec![23usize], vec![13, 11], vec![7, 6, 5]] {
            let mask = rng.mask(shape.iter().product(), 60);
            let mut s = vec![1.25; shape.len()];
            s[0] = s0;
            let out = edt(&mask, &shape, Some(&s), false, true).unwrap();
            assert_eq!(
                out.indices.unwrap(),
                reference_ft(&mask, &shape, Some(&s)),
                "{s:?}"
            );
        }
    }
    // rank 5 and 6 (no unrolled copy)
    for shape in [vec![3usize, 4, 3, 5, 3], vec![2, 3, 2, 3, 2, 3]] {
        let mask = rng.mask(shape.iter().product(), 80);
        let s: Vec<f64> = (0..shape.len()).map(|k| 0.5 + k as f64 * 0.3).collect();
        let out = edt(&mask, &shape, Some(&s), true, true).unwrap();
        assert_eq!(out.indices.unwrap(), reference_ft(&mask, &shape, Some(&s)));
    }
}

#[test]
fn edt_edge_inputs() {
    // all foreground: axis 0 holds -1, the others 0
    let out = edt(&[1, 1, 1, 1, 1, 1], &[2, 3], None, true, true).unwrap();
    assert_eq!(
        out.indices.unwrap(),
        vec![-1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(out.distances.unwrap()[5], 8f64.sqrt());
    let out = edt(&[], &[0, 4], None, true, true).unwrap();
    assert_eq!(out.indices.unwrap().len(), 0);
    assert!(edt(&[1], &[], None, true, false).is_err());
    assert!(edt(&[1, 0], &[2], Some(&[1.0, 2.0]), true, false).is_err());
    assert!(edt(&[1, 0, 1], &[2], None, true, false).is_err());
}

/// Breadth-first search from every background element over the structure's neighbours.
fn bfs(mask: &[u8], shape: &[usize], neighbours: &[Vec<isize>]) -> Vec<i32> {
    let n = mask.len();
    let mut dist = vec![-1i32; n];
    let mut q = VecDeque::new();
    for p in 0..n {
        if mask[p] == 0 {
            dist[p] = 0;
            q.push_back(p);
        }
    }
    while let Some(p) = q.pop_front() {
        let c = coords(p, shape);
        for o in neighbours {
            let mut idx = 0usize;
            let mut ok = true;
            for k in 0..shape.len() {
                let w = c[k] as isize + o[k];
                if w < 0 || w as usize >= shape[k] {
                    ok = false;
                    break;
                }
                idx = idx * shape[k] + w as usize;
            }
            if ok && dist[idx] < 0 {
                dist[idx] = dist[p] + 1;
                q.push_back(idx);
            }
        }
    }
    dist
}

#[test]
fn cdt_matches_bfs() {
    let mut rng = Lcg(3);
    for case in 0..200 {
        let rank = 1 + case % 3;
        let shape = rng.shape(rank, 15);
        let n: usize = shape.iter().product();
        let mask = rng.mask(n, [50, 90, 100][case % 3]);
        let chess = case % 2 == 0;
        let size = 3usize.pow(rank as u32);
        let structure: Vec<bool> = (0..size)
            .map(|j| {
                let c = coords(j, &vec![3; rank]);
                let l1: usize = c.iter().map(|&v| v.abs_diff(1)).sum();
                chess || l1 <= 1
            })
            .collect();
        let neighbours: Vec<Vec<isize>> = (0..size)
            .filter(|&j| structure[j] && j != size / 2)
            .map(|j| {
                coords(j, &vec![3; rank])
                    .iter()
                    .map(|&v| v as isize - 1)
                    .collect()
            })
            .collect();
        let out = cdt(&mask, &shape, &structure, true).unwrap();
        let want = bfs(&mask, &shape, &neighbours);
        assert_eq!(out.distances, want, "{shape:?} chess={chess}");
        let ft = out.features.unwrap();
        for p in 0..n {
            let f = ft[p] as usize;
            if want[p] < 0 {
                assert_eq!(f, p);
                continue;
            }
            assert_eq!(mask[f], 0);
            let (a, b) = (coords(p, &shape), coords(f, &shape));
            let diffs = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y) as i32);
            let metric = if chess {
                diffs.max().unwrap_or(0)
            } else {
                diffs.sum()
            };
            assert_eq!(metric, want[p], "the feature is at the distance");
        }
        let planes = feature_planes(&ft, &shape);
        for p in 0..n {
            let b = coords(ft[p] as usize, &shape);
            for k in 0..rank {
                assert_eq!(planes[k * n + p], b[k] as i32);
            }
        }
    }
}

#[test]
fn bf_matches_a_direct_search() {
    let mut rng = Lcg(5);
    for case in 0..150 {
        let rank = 1 + case % 3;
        let shape = rng.shape(rank, 9);
        let n: usize = shape.iter().product();
        let mask = rng.mask(n, [50, 80, 100][case % 3]);
        let metric = [BfMetric::Euclidean, BfMetric::CityBlock, BfMetric::Chessboard][case % 3];
        let s: Vec<f64> = (0..rank).map(|k| [1.0, 2.0, 0.5][k % 3]).collect();
        let out = bf(&mask, &shape, metric, Some(&s), true, true).unwrap();
        let ft = out.features.unwrap();
        let bg: Vec<usize> = (0..n).filter(|&p| mask[p] == 0).collect();
        let mut carry = 0;
        for p in 0..n {
            if mask[p] == 0 {
                assert_eq!(ft[p] as usize, p);
                continue;
            }
            let x = coords(p, &shape);
            // every background element, the last of the nearest winning
            let mut best: Option<(f64, usize)> = None;
            for &b in &bg {
                let c = coords(b, &shape);
                let d = match metric {
                    BfMetric::Euclidean => x.iter().zip(&c).zip(&s).fold(0.0, |a, ((&u, &v), &w)| {
                        let t = (u as f64 - v as f64) * w;
                        a + t * t
                    }),
                    BfMetric::CityBlock => {
                        x.iter().zip(&c).map(|(u, v)| u.abs_diff(*v)).sum::<usize>() as f64
                    }
                    BfMetric::Chessboard => {
                        x.iter().zip(&c).map(|(u, v)| u.abs_diff(*v)).max().unwrap_or(0) as f64
                    }
                };
                if best.is_none_or(|(bd, _)| d <= bd) {
                    best = Some((d, b));
                }
            }
            match (best, &out.distances) {
                (Some((d, b)), Some(BfDistances::F64(v))) => {
                    assert_eq!(v[p], d.sqrt());
                    assert_eq!(ft[p] as usize, b, "{shape:?} at {x:?}");
                    carry = b;
                }
                (Some((d, b)), Some(BfDistances::U32(v))) => {
                    assert_eq!(v[p] as f64, d);
                    assert_eq!(ft[p] as usize, b, "{shape:?} at {x:?}");
                    carry = b;
                }
                (None, Some(BfDistances::F64(v))) => {
                    assert_eq!(v[p], f64::MAX.sqrt());
                    assert_eq!(ft[p] as usize, carry);
                }
                (None, Some(BfDistances::U32(v))) => {
                    assert_eq!(v[p], u32::MAX);
                    assert_eq!(ft[p] as usize, carry);
                }
                _ => unreachable!(),
            }
        }
    }
    // 0-D: no neighbours, so no border element
    let out = bf(&[1], &[], BfMetric::Euclidean, None, true, true).unwrap();
    assert_eq!(out.distances, Some(BfDistances::F64(vec![f64::MAX.sqrt()])));
}

/// The process's CPU time in ms: the run time of each of its threads (Linux schedstat, in ns).
fn cpu_ms() -> f64 {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
        }
    }
    ns as f64 / 1e6
}

/// Timings of the transforms on the sizes `scripts/ndimage-cpu-vs-scipy.py distance` uses
/// (best of 5: process CPU time and wall time): `cargo test --release -p kiln-core --lib
/// distance::tests::timing -- --ignored --nocapture`.
#[test]
#[ignore = "a timing, not a check"]
fn timing() {
    use std::time::Instant;
    let best = |f: &mut dyn FnMut()| {
        f();
        let (mut c, mut w) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            let (t, c0) = (Instant::now(), cpu_ms());
            f();
            c = c.min(cpu_ms() - c0);
            w = w.min(t.elapsed().as_secs_f64() * 1e3);
        }
        format!("cpu {c:.2} ms wall {w:.2} ms")
    };
    let mut rng = Lcg(1);
    for shape in [vec![512, 512], vec![128, 128, 128]] {
        for fg in [50, 99] {
            let mask = rng.mask(shape.iter().product(), fg);
            let a = best(&mut || {
                edt(&mask, &shape, None, true, false).unwrap();
            });
            let b = best(&mut || {
                edt(&mask, &shape, None, true, true).unwrap();
            });
            println!("edt {shape:?} fg {fg}%: {a}; with indices {b}");
        }
    }
    let shape = [512, 512];
    let mask = rng.mask(512 * 512, 50);
    for (name, conn) in [("chessboard", 2), ("taxicab", 1)] {
        let st: Vec<bool> = (0..9)
            .map(|j| {
                let c = coords(j, &[3, 3]);
                c.iter().map(|&v| v.abs_diff(1)).sum::<usize>() <= conn
            })
            .collect();
        let t = best(&mut || {
            cdt(&mask, &shape, &st, false).unwrap();
        });
        println!("cdt 512x512 {name}: {t}");
    }
    let mask = rng.mask(64 * 64, 50);
    let t = best(&mut || {
        bf(&mask, &[64, 64], BfMetric::Euclidean, None, true, false).unwrap();
    });
    println!("bf 64x64: {t}");
}
