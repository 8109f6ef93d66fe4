//! The accepted range of every number a configuration file or a flag gives, in one place: the
//! README's "Ranges" table documents these constants. Each bound is there so that nothing a
//! user writes can panic the process, wrap a multiplication or ask for an absurd allocation.

use std::ops::RangeInclusive;

/// The longest duration any key or flag takes, in seconds: a week. Deadlines derived from one
/// (a step's deadline × 4 for the reference timings, `Instant::now() + …`) stay far from
/// overflowing, and `Duration::from_secs_f64` never sees a value it panics on.
pub const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;

/// `strategy_config.num_top_kernels` (N) and `num_bottlenecks` (M), each.
pub const SEARCH_FACTOR: RangeInclusive<u32> = 1..=4096;

/// P × M × K × C (N × M without the ensemble keys), the candidates of one round: a round's
/// requests go out together and its candidates are numbered and planned at once.
pub const MAX_CANDIDATES_PER_ROUND: u32 = 4096;

/// `strategy_config.models`: how many models may share a run's proposals.
pub const MODELS: RangeInclusive<usize> = 1..=16;

/// A model's `weight` among `models`: it gets `weight` of every total-weight prompts.
pub const MODEL_WEIGHT: RangeInclusive<u32> = 1..=100;

/// `strategy_config.samples_per_prompt`: proposals drawn from one prompt.
pub const SAMPLES_PER_PROMPT: RangeInclusive<u32> = 1..=64;

/// Simulated devices on the noop platform (`num_workers`, `--workers`). On a GPU platform the
/// workers are clamped to the visible devices instead.
pub const NOOP_WORKERS: RangeInclusive<u32> = 1..=256;

/// `max_refinements`: further attempts at a candidate that failed verification.
pub const MAX_REFINEMENTS: RangeInclusive<u32> = 0..=100;

/// `num_seeds`: seed kernels generation asks for when a run starts from problem.py alone.
pub const NUM_SEEDS: RangeInclusive<u32> = 1..=256;

/// `benchmark_warmup`: untimed calls before a timing.
pub const BENCHMARK_WARMUP: RangeInclusive<u32> = 0..=10_000;

/// `benchmark_repeat`: timed calls.
pub const BENCHMARK_REPEAT: RangeInclusive<u32> = 1..=10_000;

/// `max_inflight`: LLM requests in flight at once.
pub const MAX_INFLIGHT: RangeInclusive<u32> = 1..=1024;

/// `max_source_bytes`: the largest input.py and problem.py accepted. Both go into every prompt,
/// so their size is paid for in tokens on every request.
pub const MAX_SOURCE_BYTES: RangeInclusive<u64> = 1..=64 * 1024 * 1024;

/// `max_time` (`--max-time`): how long a run may take, in the humantime syntax (`8h`,
/// `1h 30m`), from a second to a week.
pub const MAX_TIME_S: RangeInclusive<u64> = 1..=604_800;

/// `max_candidates` (`--max-candidates`): the candidates a run makes, at most.
pub const MAX_CANDIDATES: RangeInclusive<u64> = 1..=10_000_000;

/// A `max_time` as written (`8h`, `90m`, `1h 30m`): its duration, or why it is not one.
pub fn parse_max_time(text: &str) -> Result<std::time::Duration, String> {
    let duration = humantime::parse_duration(text.trim()).map_err(|error| {
        format!("expected a duration such as 8h or 1h 30m, found \"{text}\" ({error})")
    })?;
    if !MAX_TIME_S.contains(&duration.as_secs()) {
        return Err(format!(
            "expected a duration from 1 s to 7 days, found \"{text}\""
        ));
    }
    Ok(duration)
}

/// `max_source_bytes` when not set: 1 MiB.
pub const DEFAULT_MAX_SOURCE_BYTES: u64 = 1024 * 1024;

/// A duration's bound as people read it: "604800 s (7 days)".
pub fn max_duration_words() -> String {
    format!(
        "{MAX_DURATION_S} s ({} days)",
        MAX_DURATION_S / (24.0 * 3600.0)
    )
}

/// A number as a person wrote it: `1e300` rather than its 301 digits, `0.5` as it is.
pub fn number_words(number: f64) -> String {
    if number.is_finite() && number.abs() < 1e15 {
        number.to_string()
    } else {
        format!("{number:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_ranges_table_shows_these_bounds() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let documented = [
            format!("0 to {MAX_DURATION_S} s (7 days)"),
            format!(
                "| {} to {} each, and P × M × K × C ≤ {MAX_CANDIDATES_PER_ROUND} |",
                SEARCH_FACTOR.start(),
                SEARCH_FACTOR.end()
            ),
            format!(
                "| P 1 to N; C {} to {}; {} to {} models, each weight {} to {} |",
                SAMPLES_PER_PROMPT.start(),
                SAMPLES_PER_PROMPT.end(),
                MODELS.start(),
                MODELS.end(),
                MODEL_WEIGHT.start(),
                MODEL_WEIGHT.end()
            ),
            format!(
                "on noop {} to {} simulated devices",
                NOOP_WORKERS.start(),
                NOOP_WORKERS.end()
            ),
            format!(
                "| `max_refinements` | {} to {} |",
                MAX_REFINEMENTS.start(),
                MAX_REFINEMENTS.end()
            ),
            format!(
                "| `num_seeds` | {} to {} |",
                NUM_SEEDS.start(),
                NUM_SEEDS.end()
            ),
            format!(
                "| `benchmark_warmup`, `benchmark_repeat` | {} to {}, {} to {} |",
                BENCHMARK_WARMUP.start(),
                BENCHMARK_WARMUP.end(),
                BENCHMARK_REPEAT.start(),
                BENCHMARK_REPEAT.end()
            ),
            format!(
                "| `max_inflight` | {} to {} |",
                MAX_INFLIGHT.start(),
                MAX_INFLIGHT.end()
            ),
            format!(
                "| `max_source_bytes` | {} to {} (64 MiB) | {DEFAULT_MAX_SOURCE_BYTES} (1 MiB) |",
                MAX_SOURCE_BYTES.start(),
                MAX_SOURCE_BYTES.end()
            ),
            "| `max_time` (`--max-time`) | 1 s to 7 days (`8h`, `1h 30m`) |".to_string(),
            format!(
                "| `max_candidates` (`--max-candidates`) | {} to {} |",
                MAX_CANDIDATES.start(),
                MAX_CANDIDATES.end()
            ),
        ];
        for bound in documented {
            assert!(
                readme.contains(&bound),
                "README.md's Ranges table lacks {bound:?}"
            );
        }
    }

    #[test]
    fn max_time_takes_humantime_durations_within_a_week() {
        assert_eq!(
            parse_max_time("8h"),
            Ok(std::time::Duration::from_secs(8 * 3600))
        );
        assert_eq!(
            parse_max_time("1h 30m"),
            Ok(std::time::Duration::from_secs(5400))
        );
        for bad in ["8 hours please", "0s", "8d", "1e300", ""] {
            assert!(parse_max_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_read_as_written() {
        assert_eq!(number_words(1e300), "1e300");
        assert_eq!(number_words(0.0), "0");
        assert_eq!(number_words(2.5), "2.5");
        assert_eq!(number_words(f64::INFINITY), "inf");
        assert_eq!(max_duration_words(), "604800 s (7 days)");
    }
}
