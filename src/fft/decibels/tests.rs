use super::*;

/// Distance in units in the last place between two finite f64 of one sign.
fn ulps(a: f64, b: f64) -> u64 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
}

/// A spread of positive normal values: every binade from 2^-1022 to 2^1023, a few mantissas in
/// each, and values next to the reduction's edges (1, √½, √2) and to powers of ten.
fn spread() -> Vec<f64> {
    let mut values = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for exponent in 1..2047u64 {
        for _ in 0..40 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            values.push(f64::from_bits(
                exponent << 52 | (state & 0x000f_ffff_ffff_ffff),
            ));
        }
    }
    for edge in [
        1.0,
        std::f64::consts::FRAC_1_SQRT_2,
        std::f64::consts::SQRT_2,
        10.0,
        0.1,
    ] {
        for step in -64i64..=64 {
            values.push(f64::from_bits((edge.to_bits() as i64 + step) as u64));
        }
    }
    values.extend([f64::MIN_POSITIVE, f64::MAX, 1e-24, 1e-12, 1e24]);
    values
}

#[test]
fn log10_is_within_one_ulp_of_libm_in_every_binade() {
    let mut worst = 0;
    for x in spread() {
        let (got, want) = (log10_positive(x), x.log10());
        if want == 0.0 {
            assert_eq!(got, 0.0, "log10({x:e})");
            continue;
        }
        worst = worst.max(ulps(got, want));
        assert!(
            ulps(got, want) <= 1,
            "log10({x:e}) = {got:e}, libm {want:e}"
        );
    }
    assert!(worst <= 1);
}

#[test]
fn powers_of_ten_give_whole_numbers() {
    for n in 0..=22 {
        assert_eq!(log10_positive(10f64.powi(n)), n as f64, "10^{n}");
    }
}

#[test]
fn the_floor_nan_and_infinities_are_kept() {
    let floor = 1e-24;
    let at_floor = ten_log10_floored(floor, floor);
    assert!((at_floor + 240.0).abs() < 1e-12, "{at_floor}");
    for below in [0.0, -0.0, -1.0, f64::NEG_INFINITY, 1e-300, 4.9e-324] {
        assert_eq!(ten_log10_floored(below, floor), at_floor, "{below:e}");
    }
    assert!(ten_log10_floored(f64::NAN, floor).is_nan());
    assert_eq!(ten_log10_floored(f64::INFINITY, floor), f64::INFINITY);
    assert_eq!(ten_log10_floored(1.0, floor), 0.0);
    assert_eq!(ten_log10_floored(100.0, floor), 20.0);
}

#[test]
fn rows_give_the_bits_of_one_value_at_a_time_in_f32_and_f64() {
    let values: Vec<f64> = spread().into_iter().step_by(97).collect();
    for len in (0..70).chain([values.len()]) {
        let mut row64: Vec<f64> = values[..len].to_vec();
        row64.extend([f64::NAN, 0.0, f64::INFINITY]);
        let mut row32: Vec<f32> = row64.iter().map(|v| *v as f32).collect();
        let want64: Vec<u64> = row64
            .iter()
            .map(|v| ten_log10_floored(*v, 1e-24).to_bits())
            .collect();
        let floor32 = 1e-24f32;
        let want32: Vec<u32> = row32
            .iter()
            .map(|v| (ten_log10_floored(f64::from(*v), f64::from(floor32)) as f32).to_bits())
            .collect();
        powers_to_db(&mut row64, 1e-24);
        powers_to_db(&mut row32, floor32);
        assert_eq!(
            row64.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want64
        );
        assert_eq!(
            row32.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want32
        );
        let mut into = vec![0f32; row64.len()];
        let powers: Vec<f64> = values[..len]
            .iter()
            .copied()
            .chain([f64::NAN, 0.0, f64::INFINITY])
            .collect();
        powers_to_db_into(&powers, 1e-24, &mut into);
        let want: Vec<u32> = powers
            .iter()
            .map(|v| (ten_log10_floored(*v, 1e-24) as f32).to_bits())
            .collect();
        assert_eq!(into.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
    }
}

#[test]
fn f32_rows_match_libm_in_f64_rounded_once() {
    // the value written is 10·log10(p) in f64 narrowed once: the same f32 as libm's f64 log10
    // narrowed, but where the two f64 values straddle a rounding point (about 1 in 2^28)
    let mut state = 1u32;
    let (mut same, mut total) = (0u64, 0u64);
    for _ in 0..200_000 {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let p = f32::from_bits(0x0080_0000 + state % 0x7f00_0000);
        let mut row = [p];
        powers_to_db(&mut row, 1e-24);
        let want = (10.0 * f64::from(p.max(1e-24)).log10()) as f32;
        assert!(ulps(f64::from(row[0]), f64::from(want)) <= 1 << 29, "{p:e}");
        same += u64::from(row[0] == want);
        total += 1;
    }
    assert!(same + 2 >= total, "{same} of {total}");
}
