//! Parsers for flag values shared by every command's flags.

/// A parser for a whole number from `lo` to `hi` ("must be a whole number from 1 to 10000").
pub(crate) fn whole_in<T>(
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text: &str| {
        text.trim()
            .parse::<u64>()
            .ok()
            .filter(|v| (lo..=hi).contains(v))
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| format!("must be a whole number from {lo} to {hi}"))
    }
}

/// A number of Hz with an optional k, M or G suffix (`2.4M`, `-5k`, `100`), as every frequency
/// a user types takes it: flags, config strings, `--bands` and `--alert` options, `--sweep`.
/// None for anything else: an exponent with a suffix (`1e3k`: which was meant?), and a value
/// that is not finite (`nan`, `inf`, `1e400`, `1e308k`), which no frequency is.
pub(crate) fn scaled_hz(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1e3),
        (i, 'M') => (&text[..i], 1e6),
        (i, 'G' | 'g') => (&text[..i], 1e9),
        _ => (text, 1.0),
    };
    let number = number.trim_end();
    let exponent = number.contains(['e', 'E']) && scale != 1.0;
    let value: f64 = number.parse().ok().filter(|_| !exponent)?;
    Some(value * scale + 0.0).filter(|hz| hz.is_finite()) // (+ 0.0: -0 is 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_take_k_m_g_and_no_exponent_beside_them() {
        for (text, hz) in [
            ("100", 100.0),
            ("2.4M", 2.4e6),
            (" 1.5 k", 1500.0),
            ("-5k", -5000.0),
            ("1G", 1e9),
            ("2g", 2e9),
            ("1e3", 1000.0),
            ("2.5e-3", 0.0025),
        ] {
            assert_eq!(scaled_hz(text), Some(hz), "{text}");
        }
        for text in [
            "", "k", "1e3k", "2E1M", "1m", "10 Hz", "1kk", "0x10", "nan", "-inf", "1e400", "1e308k",
        ] {
            assert_eq!(scaled_hz(text), None, "{text}");
        }
    }
}
