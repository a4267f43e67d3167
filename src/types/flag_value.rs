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
