//! Hand-checked cases: weights that sum to one, order-1 interpolation exact on linear
//! data, the prefilter followed by order-3 interpolation reproducing the samples, and the
//! mode mappings at the edges.

use super::*;

#[test]
fn weights_sum_to_one_and_match_the_cubic_b_spline() {
    let mut w = [0.0; 6];
    for order in 1..=5 {
        for &x in &[0.0, 0.25, 0.5, 0.75, 3.3, -1.7] {
            spline_weights(x, order, &mut w);
            let s: f64 = w[..=order].iter().sum();
            assert!((s - 1.0).abs() < 1e-14, "order {order} x {x}: {s}");
        }
    }
    // cubic at an integer: 1/6, 2/3, 1/6 (and 0 for the fourth tap)
    spline_weights(2.0, 3, &mut w);
    assert!((w[0] - 1.0 / 6.0).abs() < 1e-15);
    assert!((w[1] - 2.0 / 3.0).abs() < 1e-15);
    assert!((w[2] - 1.0 / 6.0).abs() < 1e-15);
    assert!(w[3].abs() < 1e-15);
}

#[test]
fn order_one_is_exact_on_linear_data() {
    // f(i, j) = 2i + 3j + 1 on a 5x7 grid, sampled at interior points
    let shape = [5usize, 7];
    let input: Vec<f64> = (0..35).map(|p| (2 * (p / 7) + 3 * (p % 7) + 1) as f64).collect();
    let pts = [(0.5, 0.25), (3.75, 5.5), (1.0, 6.0), (2.2, 0.9)];
    let mut coords = vec![0.0; 2 * pts.len()];
    for (k, &(y, x)) in pts.iter().enumerate() {
        coords[k] = y;
        coords[pts.len() + k] = x;
    }
    let out = geometric_transform(
        &input,
        &shape,
        Mapping::Coordinates(&coords),
        &[pts.len()],
        1,
        InterpMode::Mirror,
        0.0,
        0,
        Store::Float,
    )
    .unwrap();
    for (k, &(y, x)) in pts.iter().enumerate() {
        let want = 2.0 * y + 3.0 * x + 1.0;
        assert!((out[k] - want).abs() < 1e-12, "{k}: {} vs {want}", out[k]);
    }
}

#[test]
fn prefiltered_cubic_reproduces_the_samples() {
    // axes long enough that scipy 1.17's in-place reflect initialisation (an error of
    // order z^(2n), z = sqrt(3) - 2) is below the tolerance
    let shape = [16usize, 19];
    let input: Vec<f64> = (0..16 * 19).map(|p| ((p * 37) % 11) as f64 - 4.5).collect();
    for mode in [InterpMode::Mirror, InterpMode::Reflect, InterpMode::GridWrap] {
        let mut c = input.clone();
        for axis in 0..2 {
            spline_filter1d(&mut c, &shape, axis, 3, mode).unwrap();
        }
        let ident = [1.0, 0.0, 0.0, 1.0];
        let out = geometric_transform(
            &c,
            &shape,
            Mapping::Affine {
                matrix: &ident,
                shift: &[0.0, 0.0],
            },
            &shape,
            3,
            mode,
            0.0,
            0,
            Store::Float,
        )
        .unwrap();
        for (a, b) in out.iter().zip(&input) {
            assert!((a - b).abs() < 1e-10, "{mode:?}: {a} vs {b}");
        }
    }
}

#[test]
fn zoom_shift_by_whole_samples_moves_the_data() {
    let shape = [7usize];
    let input: Vec<f64> = (0..7).map(|i| (i * i) as f64).collect();
    // shift by +2 (scipy passes -2): out[k] = in[k - 2], cval where k - 2 < 0
    let out = zoom_shift(
        &input,
        &shape,
        None,
        Some(&[-2.0]),
        &shape,
        1,
        InterpMode::Constant,
        -1.0,
        0,
        false,
        Store::Float,
    )
    .unwrap();
    assert_eq!(out, vec![-1.0, -1.0, 0.0, 1.0, 4.0, 9.0, 16.0]);
}

#[test]
fn coordinates_fold_back_per_mode() {
    // n = 4: mirror period 6, reflect period 8, wrap period 3, grid-wrap period 4
    assert_eq!(map_coordinate(-1.0, 4, InterpMode::Mirror), 1.0);
    assert_eq!(map_coordinate(4.0, 4, InterpMode::Mirror), 2.0);
    assert_eq!(map_coordinate(-1.0, 4, InterpMode::Reflect), 0.0);
    assert_eq!(map_coordinate(4.0, 4, InterpMode::Reflect), 3.0);
    assert_eq!(map_coordinate(-0.5, 4, InterpMode::GridWrap), 3.5);
    assert_eq!(map_coordinate(4.25, 4, InterpMode::GridWrap), 0.25);
    assert_eq!(map_coordinate(5.0, 4, InterpMode::Constant), -1.0);
    assert_eq!(map_coordinate(-9.0, 4, InterpMode::Nearest), 0.0);
}

#[test]
fn integer_outputs_round_half_away_and_clip() {
    assert_eq!(store_value(2.5, Store::Unsigned(255.0)), 3.0);
    assert_eq!(store_value(-3.0, Store::Unsigned(255.0)), 0.0);
    assert_eq!(store_value(300.0, Store::Unsigned(255.0)), 255.0);
    assert_eq!(store_value(-2.5, Store::Signed(-128.0, 127.0)), -3.0);
    assert_eq!(store_value(-200.0, Store::Signed(-128.0, 127.0)), -128.0);
}

#[test]
fn bad_order_is_an_error() {
    let mut d = vec![0.0; 4];
    assert!(spline_filter1d(&mut d, &[4], 0, 6, InterpMode::Mirror).is_err());
    assert!(spline_filter1d(&mut d, &[4], 1, 3, InterpMode::Mirror).is_err());
}

#[test]
fn fast_floor_is_floor() {
    for &x in &[
        0.0,
        -0.0,
        0.5,
        -0.5,
        -1.0,
        -1.5,
        2.0,
        2.999_999_999,
        -1e-300,
        1e15 + 0.5,
        -4.4e15,
        4.6e15,
        1e300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        assert_eq!(floor(x).to_bits(), x.floor().to_bits(), "{x}");
    }
    assert!(floor(f64::NAN).is_nan());
}

#[test]
fn zoom_shift_and_affine_loops_agree() {
    // a shift through NI_ZoomShift and through NI_GeometricTransform's affine path computes
    // the same coordinates (k + s), so the two loops must give the same bits
    let shape = [7usize, 10];
    let input: Vec<f64> = (0..70).map(|p| ((p * 53) % 17) as f64 * 0.37 - 2.0).collect();
    let s = [1.75, -3.4];
    for order in 0..=5 {
        for code in 0..=6 {
            let mode = InterpMode::from_code(code).unwrap();
            let a = zoom_shift(
                &input,
                &shape,
                None,
                Some(&s),
                &shape,
                order,
                mode,
                0.5,
                0,
                false,
                Store::Float,
            )
            .unwrap();
            let b = geometric_transform(
                &input,
                &shape,
                Mapping::Affine {
                    matrix: &[1.0, 0.0, 0.0, 1.0],
                    shift: &s,
                },
                &shape,
                order,
                mode,
                0.5,
                0,
                Store::Float,
            )
            .unwrap();
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x.to_bits(), y.to_bits(), "order {order} {mode:?}");
            }
        }
    }
}

/// The 2-D affine loop of orders 0 and 1 (`transform_fast.rs`) against the general loop, to
/// the bit: random inputs with zeros of both signs, odd shapes, rotations and shears that
/// reach far outside the input, every mode, cval, prepadding, f64, f32 and integer stores.
#[test]
fn the_low_order_affine_loop_equals_the_general_one() {
    use transform::geometric_impl;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let modes = [
        InterpMode::Nearest,
        InterpMode::Wrap,
        InterpMode::Reflect,
        InterpMode::Mirror,
        InterpMode::Constant,
        InterpMode::GridWrap,
        InterpMode::GridConstant,
    ];
    let mut cases = 0;
    for (ishape, oshape) in [
        ([1, 1], [3, 5]),
        ([1, 7], [4, 9]),
        ([5, 3], [7, 6]),
        ([13, 9], [17, 11]),
        ([31, 2], [9, 40]),
    ] {
        let n: usize = ishape.iter().product();
        let input: Vec<f64> = (0..n)
            .map(|i| match i % 11 {
                0 => 0.0,
                1 => -0.0,
                _ => (rnd() - 0.5) * 200.0,
            })
            .collect();
        for trial in 0..6 {
            let a = rnd() * 360.0;
            let (c, s) = (a.to_radians().cos(), a.to_radians().sin());
            let k = if trial % 2 == 0 { 1.0 } else { 0.3 + 2.0 * rnd() };
            let matrix = [c * k, s, -s, c / k];
            let shift = [(rnd() - 0.5) * 20.0, (rnd() - 0.5) * 20.0];
            for mode in modes {
                for order in 0..=1 {
                    for nprepad in [0, 12] {
                        let cval = (rnd() - 0.5) * 10.0;
                        let m = Mapping::Affine {
                            matrix: &matrix,
                            shift: &shift,
                        };
                        let run64 = |fast: bool| {
                            let mut o = vec![0.0f64; oshape[0] * oshape[1]];
                            let r = geometric_impl(
                                &input,
                                &ishape,
                                m,
                                &oshape,
                                order,
                                mode,
                                cval,
                                nprepad,
                                Store::Float,
                                &mut o,
                                fast,
                            );
                            r.map(|()| o.iter().map(|v| v.to_bits()).collect::<Vec<u64>>())
                                .map_err(|e| e.to_string())
                        };
                        assert_eq!(
                            run64(true),
                            run64(false),
                            "{ishape:?} {mode:?} order {order} pad {nprepad}"
                        );
                        let run32 = |fast: bool, store: Store| {
                            let mut o = vec![0.0f32; oshape[0] * oshape[1]];
                            let r = geometric_impl(
                                &input, &ishape, m, &oshape, order, mode, cval, nprepad, store, &mut o, fast,
                            );
                            r.map(|()| o.iter().map(|v| v.to_bits()).collect::<Vec<u32>>())
                                .map_err(|e| e.to_string())
                        };
                        for store in [Store::Float, Store::Unsigned(255.0), Store::Signed(-128.0, 127.0)] {
                            assert_eq!(
                                run32(true, store),
                                run32(false, store),
                                "{ishape:?} {mode:?} order {order} {store:?}"
                            );
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 5 * 6 * 7 * 2 * 2);
}
