//! Client-side rate limits, token estimates and the USD budget. Pure bookkeeping: the caller
//! passes the time, so tests drive the clock.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use super::request::Usage;
use super::settings::{LlmSettings, Price};

/// Rate limits are per minute on every provider.
const RATE_WINDOW: Duration = Duration::from_secs(60);
/// About four characters a token for English and code; corrected by reported usage.
const INITIAL_CHARS_PER_TOKEN: f64 = 4.0;

/// Token counts estimated from characters, before the provider has counted them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenEstimator {
    observed_chars: u64,
    observed_tokens: u64,
}

impl TokenEstimator {
    /// Characters per token: four until a reply reports usage, then the ratio over every
    /// prompt whose input tokens were reported.
    pub fn chars_per_token(&self) -> f64 {
        if self.observed_tokens == 0 {
            INITIAL_CHARS_PER_TOKEN
        } else {
            self.observed_chars as f64 / self.observed_tokens as f64
        }
    }

    pub fn estimate(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token()).ceil() as u64
    }

    /// Learns from a reply's reported input tokens for a prompt of `prompt_chars` characters.
    pub fn observe(&mut self, prompt_chars: usize, reported_input_tokens: u64) {
        if prompt_chars == 0 || reported_input_tokens == 0 {
            return;
        }
        self.observed_chars += prompt_chars as u64;
        self.observed_tokens += reported_input_tokens;
    }

    /// The usage to account for a reply: as reported, or estimated when the server sent none.
    pub fn usage_or_estimate(
        &self,
        reported: Option<Usage>,
        prompt_chars: usize,
        reply_chars: usize,
    ) -> (Usage, UsageSource) {
        match reported {
            Some(usage) => (usage, UsageSource::Reported),
            None => (
                Usage {
                    input_tokens: self.estimate(prompt_chars),
                    output_tokens: self.estimate(reply_chars),
                },
                UsageSource::Estimated,
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    Reported,
    Estimated,
}

#[derive(Debug, Clone)]
struct SentRequest {
    at: Instant,
    request_id: String,
    tokens: u64,
}

/// requests_per_minute and tokens_per_minute over a sliding one-minute window. A request
/// counts its prompt estimate plus max_tokens (as the providers' own limiters do) until its
/// reply reports what it really used.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    requests_per_minute: Option<u32>,
    tokens_per_minute: Option<u64>,
    sent: VecDeque<SentRequest>,
}

impl RateLimiter {
    pub fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u64>) -> RateLimiter {
        RateLimiter {
            requests_per_minute,
            tokens_per_minute,
            sent: VecDeque::new(),
        }
    }

    pub fn for_settings(settings: &LlmSettings) -> RateLimiter {
        RateLimiter::new(settings.requests_per_minute, settings.tokens_per_minute)
    }

    /// How long to wait before a request of `tokens` may go; zero means now.
    pub fn wait_before(&mut self, now: Instant, tokens: u64) -> Duration {
        self.forget_before(now);
        let until_window_frees = |entry: &SentRequest| (entry.at + RATE_WINDOW) - now;
        let mut wait = Duration::ZERO;
        if let Some(limit) = self.requests_per_minute {
            let limit = limit as usize;
            if self.sent.len() >= limit {
                wait = wait.max(until_window_frees(&self.sent[self.sent.len() - limit]));
            }
        }
        if let Some(limit) = self.tokens_per_minute {
            let mut in_window: u64 = self.sent.iter().map(|entry| entry.tokens).sum();
            if in_window + tokens > limit {
                // A request larger than the whole limit goes once the window is empty;
                // otherwise it would wait forever.
                let needed_room = tokens.min(limit);
                for entry in &self.sent {
                    in_window -= entry.tokens;
                    if in_window + needed_room <= limit {
                        wait = wait.max(until_window_frees(entry));
                        break;
                    }
                }
            }
        }
        wait
    }

    pub fn record(&mut self, now: Instant, request_id: &str, tokens: u64) {
        self.sent.push_back(SentRequest {
            at: now,
            request_id: request_id.to_string(),
            tokens,
        });
    }

    /// Replaces a request's estimate with the tokens its reply reported.
    pub fn correct(&mut self, request_id: &str, actual_tokens: u64) {
        if let Some(entry) = self
            .sent
            .iter_mut()
            .find(|entry| entry.request_id == request_id)
        {
            entry.tokens = actual_tokens;
        }
    }

    fn forget_before(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|entry| entry.at + RATE_WINDOW <= now)
        {
            self.sent.pop_front();
        }
    }
}

/// Tokens and cost of a group of settled requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpendTotals {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Zero for a model without a price; `Budget::is_priced` tells the two apart.
    pub cost_usd: f64,
}

impl SpendTotals {
    fn add(&mut self, usage: Usage, cost_usd: f64) {
        self.requests += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cost_usd += cost_usd;
    }
}

/// The money set aside for one request in flight. It is consumed by `settle` or `release`,
/// so a request cannot be accounted twice.
#[derive(Debug)]
pub struct Reservation {
    request_id: String,
    round: u32,
    reserved_usd: f64,
}

impl Reservation {
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    pub fn reserved_usd(&self) -> f64 {
        self.reserved_usd
    }
}

/// What one request used and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestCost {
    pub request_id: String,
    pub round: u32,
    pub usage: Usage,
    pub usage_source: UsageSource,
    /// None for a model without a price.
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "budget_usd {limit_usd:.2} would be exceeded: {spent_usd:.4} spent, {in_flight_usd:.4} \
     reserved by requests in flight, the next request may cost up to {next_request_usd:.4}"
)]
pub struct BudgetRefusal {
    pub limit_usd: f64,
    pub spent_usd: f64,
    pub in_flight_usd: f64,
    pub next_request_usd: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct Limit {
    price: Price,
    limit_usd: f64,
}

/// Cost accounting per request, per round and per run, and the run's USD limit.
/// Each request in flight reserves its prompt estimate plus max_tokens at the model's price;
/// a request that could take the run past the limit is refused, and from then on every
/// request is: the run ends once what is in flight has settled.
#[derive(Debug, Clone)]
pub struct Budget {
    price: Option<Price>,
    limit: Option<Limit>,
    in_flight_usd: f64,
    in_flight_requests: u32,
    spent: SpendTotals,
    by_round: BTreeMap<u32, SpendTotals>,
    exhausted: bool,
}

impl Budget {
    pub fn unlimited(price: Option<Price>) -> Budget {
        Budget {
            price,
            limit: None,
            in_flight_usd: 0.0,
            in_flight_requests: 0,
            spent: SpendTotals::default(),
            by_round: BTreeMap::new(),
            exhausted: false,
        }
    }

    pub fn limited(price: Price, limit_usd: f64) -> Budget {
        Budget {
            limit: Some(Limit {
                price: price.clone(),
                limit_usd,
            }),
            ..Budget::unlimited(Some(price))
        }
    }

    /// Settings resolution guarantees a price wherever budget_usd is set.
    pub fn for_settings(settings: &LlmSettings) -> Budget {
        match (&settings.capability.price, settings.budget_usd) {
            (Some(price), Some(limit_usd)) => Budget::limited(price.clone(), limit_usd),
            (price, _) => Budget::unlimited(price.clone()),
        }
    }

    pub fn is_priced(&self) -> bool {
        self.price.is_some()
    }

    /// True once a request was refused: no further request is sent in this run.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    pub fn try_reserve(
        &mut self,
        request_id: &str,
        round: u32,
        prompt_tokens_estimate: u64,
        max_tokens: u32,
    ) -> Result<Reservation, BudgetRefusal> {
        let reserved_usd = self.price.as_ref().map_or(0.0, |price| {
            price.cost_usd(prompt_tokens_estimate, u64::from(max_tokens))
        });
        if let Some(limit) = &self.limit
            && (self.exhausted
                || self.spent.cost_usd + self.in_flight_usd + reserved_usd > limit.limit_usd)
        {
            self.exhausted = true;
            return Err(BudgetRefusal {
                limit_usd: limit.limit_usd,
                spent_usd: self.spent.cost_usd,
                in_flight_usd: self.in_flight_usd,
                next_request_usd: limit
                    .price
                    .cost_usd(prompt_tokens_estimate, u64::from(max_tokens)),
            });
        }
        self.in_flight_usd += reserved_usd;
        self.in_flight_requests += 1;
        Ok(Reservation {
            request_id: request_id.to_string(),
            round,
            reserved_usd,
        })
    }

    /// Replaces a reservation with what the reply used.
    pub fn settle(
        &mut self,
        reservation: Reservation,
        usage: Usage,
        usage_source: UsageSource,
    ) -> RequestCost {
        self.end_reservation(&reservation);
        let cost_usd = self
            .price
            .as_ref()
            .map(|price| price.cost_usd(usage.input_tokens, usage.output_tokens));
        let cost = cost_usd.unwrap_or(0.0);
        self.spent.add(usage, cost);
        self.by_round
            .entry(reservation.round)
            .or_default()
            .add(usage, cost);
        RequestCost {
            request_id: reservation.request_id,
            round: reservation.round,
            usage,
            usage_source,
            cost_usd,
        }
    }

    /// Frees a reservation whose request produced no answer (providers bill none).
    pub fn release(&mut self, reservation: Reservation) {
        self.end_reservation(&reservation);
    }

    fn end_reservation(&mut self, reservation: &Reservation) {
        self.in_flight_requests -= 1;
        self.in_flight_usd = if self.in_flight_requests == 0 {
            // Reset rather than subtract, so float residue cannot accumulate over a long run.
            0.0
        } else {
            (self.in_flight_usd - reservation.reserved_usd).max(0.0)
        };
    }

    /// A resumed run: what the run's earlier processes spent counts against the limit. Not a
    /// request of this process: the totals' request and token counts stay its own.
    pub fn count_earlier_spend(&mut self, cost_usd: f64) {
        if cost_usd.is_finite() && cost_usd > 0.0 {
            self.spent.cost_usd += cost_usd;
        }
    }

    pub fn in_flight_usd(&self) -> f64 {
        self.in_flight_usd
    }

    pub fn spent(&self) -> &SpendTotals {
        &self.spent
    }

    pub fn round(&self, round: u32) -> SpendTotals {
        self.by_round.get(&round).cloned().unwrap_or_default()
    }

    pub fn rounds(&self) -> &BTreeMap<u32, SpendTotals> {
        &self.by_round
    }
}

impl fmt::Display for SpendTotals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests, {} input tokens, {} output tokens, ${:.4}",
            self.requests, self.input_tokens, self.output_tokens, self.cost_usd
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::settings::{LlmKeys, RawLlmConfig, resolve};

    fn price(input: f64, output: f64) -> Price {
        Price {
            input_usd_per_mtok: input,
            output_usd_per_mtok: output,
            source: "test".to_string(),
        }
    }

    #[test]
    fn estimates_start_at_four_characters_a_token_and_learn() {
        let mut estimator = TokenEstimator::default();
        assert_eq!(estimator.estimate(4_001), 1_001);
        estimator.observe(3_000, 1_000);
        assert_eq!(estimator.chars_per_token(), 3.0);
        assert_eq!(estimator.estimate(3_000), 1_000);
        estimator.observe(5_000, 1_000);
        assert_eq!(estimator.chars_per_token(), 4.0);
        estimator.observe(100, 0);
        assert_eq!(estimator.chars_per_token(), 4.0);
    }

    #[test]
    fn usage_is_estimated_only_when_not_reported() {
        let estimator = TokenEstimator::default();
        let reported = Usage {
            input_tokens: 7,
            output_tokens: 9,
        };
        assert_eq!(
            estimator.usage_or_estimate(Some(reported), 400, 400),
            (reported, UsageSource::Reported)
        );
        assert_eq!(
            estimator.usage_or_estimate(None, 400, 80),
            (
                Usage {
                    input_tokens: 100,
                    output_tokens: 20
                },
                UsageSource::Estimated
            )
        );
    }

    /// Each step: (seconds since start, tokens, expected wait in seconds); a request that may
    /// go now is recorded.
    fn check_rate(rpm: Option<u32>, tpm: Option<u64>, steps: &[(u64, u64, u64)]) {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(rpm, tpm);
        for (index, &(at, tokens, expected_wait)) in steps.iter().enumerate() {
            let now = start + Duration::from_secs(at);
            let wait = limiter.wait_before(now, tokens);
            assert_eq!(
                wait,
                Duration::from_secs(expected_wait),
                "step {index}: at {at}s, {tokens} tokens"
            );
            if wait.is_zero() {
                limiter.record(now, &format!("r{index}"), tokens);
            }
        }
    }

    #[test]
    fn requests_per_minute() {
        check_rate(
            Some(2),
            None,
            &[
                (0, 1, 0),
                (10, 1, 0),
                (20, 1, 40),
                (59, 1, 1),
                (60, 1, 0),
                (65, 1, 5),
            ],
        );
    }

    #[test]
    fn tokens_per_minute() {
        check_rate(
            None,
            Some(1_000),
            &[
                (0, 600, 0),
                (30, 300, 0),
                (31, 200, 29),
                (60, 200, 0),
                (61, 600, 29),
            ],
        );
    }

    #[test]
    fn a_request_larger_than_the_token_limit_waits_for_an_empty_window() {
        check_rate(
            None,
            Some(1_000),
            &[(0, 100, 0), (10, 5_000, 50), (60, 5_000, 0)],
        );
    }

    #[test]
    fn no_limits_never_wait() {
        check_rate(None, None, &[(0, 1_000_000, 0), (0, 1_000_000, 0)]);
    }

    #[test]
    fn reported_usage_corrects_the_estimate() {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(None, Some(10_000));
        limiter.record(start, "big", 9_000);
        assert_eq!(
            limiter.wait_before(start + Duration::from_secs(1), 2_000),
            Duration::from_secs(59)
        );
        limiter.correct("big", 1_500);
        assert_eq!(
            limiter.wait_before(start + Duration::from_secs(1), 2_000),
            Duration::ZERO
        );
    }

    #[test]
    fn budget_reserves_prompt_and_max_tokens_and_refuses_past_the_limit() {
        // $1 per million tokens either way: a request of 100k prompt + 100k output reserves $0.20.
        let mut budget = Budget::limited(price(1.0, 1.0), 0.5);
        let first = budget.try_reserve("a", 1, 100_000, 100_000).unwrap();
        let second = budget.try_reserve("b", 1, 100_000, 100_000).unwrap();
        assert!((budget.in_flight_usd() - 0.4).abs() < 1e-12);
        let refusal = budget.try_reserve("c", 1, 100_000, 100_000).unwrap_err();
        assert!((refusal.in_flight_usd - 0.4).abs() < 1e-12);
        assert!(budget.is_exhausted());
        let cost = budget.settle(
            first,
            Usage {
                input_tokens: 100_000,
                output_tokens: 10_000,
            },
            UsageSource::Reported,
        );
        assert!((cost.cost_usd.unwrap() - 0.11).abs() < 1e-12);
        // Room came back, but the run has already decided to stop.
        assert!(budget.try_reserve("d", 2, 1, 1).is_err());
        budget.release(second);
        assert_eq!(budget.in_flight_usd(), 0.0);
        assert_eq!(budget.spent().requests, 1);
    }

    #[test]
    fn a_resumed_run_counts_what_its_earlier_processes_spent() {
        let mut budget = Budget::limited(price(1.0, 1.0), 0.5);
        budget.count_earlier_spend(0.35);
        budget.count_earlier_spend(f64::NAN);
        budget.count_earlier_spend(-1.0);
        assert!((budget.spent().cost_usd - 0.35).abs() < 1e-12);
        assert_eq!(budget.spent().requests, 0);
        // $0.20 more would take the run to $0.55.
        let refusal = budget.try_reserve("a", 1, 100_000, 100_000).unwrap_err();
        assert!((refusal.spent_usd - 0.35).abs() < 1e-12);
    }

    #[test]
    fn budget_totals_per_round_and_run() {
        let mut budget = Budget::unlimited(Some(price(3.0, 15.0)));
        let settle = |budget: &mut Budget, id: &str, round: u32, input: u64, output: u64| {
            let reservation = budget.try_reserve(id, round, input, 16_000).unwrap();
            budget.settle(
                reservation,
                Usage {
                    input_tokens: input,
                    output_tokens: output,
                },
                UsageSource::Reported,
            )
        };
        let cost = settle(&mut budget, "a", 1, 10_000, 2_000);
        assert_eq!(cost.request_id, "a");
        assert!((cost.cost_usd.unwrap() - 0.06).abs() < 1e-12);
        settle(&mut budget, "b", 1, 20_000, 1_000);
        settle(&mut budget, "c", 2, 1_000_000, 0);
        let round_one = budget.round(1);
        assert_eq!(
            (
                round_one.requests,
                round_one.input_tokens,
                round_one.output_tokens
            ),
            (2, 30_000, 3_000)
        );
        assert!((round_one.cost_usd - 0.135).abs() < 1e-12);
        assert!((budget.round(2).cost_usd - 3.0).abs() < 1e-12);
        assert_eq!(budget.round(3), SpendTotals::default());
        assert_eq!(budget.spent().requests, 3);
        assert!((budget.spent().cost_usd - 3.135).abs() < 1e-12);
        assert_eq!(budget.rounds().len(), 2);
        assert_eq!(
            budget.spent().to_string(),
            "3 requests, 1030000 input tokens, 3000 output tokens, $3.1350"
        );
    }

    #[test]
    fn unpriced_budget_counts_tokens_only() {
        let mut budget = Budget::unlimited(None);
        let reservation = budget.try_reserve("a", 1, 10, 10).unwrap();
        let cost = budget.settle(
            reservation,
            Usage {
                input_tokens: 10,
                output_tokens: 5,
            },
            UsageSource::Estimated,
        );
        assert_eq!(cost.cost_usd, None);
        assert!(!budget.is_priced());
        assert_eq!(budget.spent().output_tokens, 5);
    }

    #[test]
    fn budget_from_settings_uses_the_table_price() {
        let settings = resolve(
            &RawLlmConfig {
                model: Some("claude-sonnet-4-6".to_string()),
                keys: LlmKeys {
                    budget_usd: Some(0.10),
                    max_tokens: Some(8_000),
                    ..LlmKeys::default()
                },
                ..RawLlmConfig::default()
            },
            &|name| {
                name.ends_with("_API_KEY")
                    .then(|| "sk-ant-test".to_string())
            },
        )
        .unwrap();
        let mut budget = Budget::for_settings(&settings);
        // 8000 output tokens at $15 per million reserve $0.12, more than the $0.10 budget.
        let refusal = budget
            .try_reserve("b1", 1, 100, settings.max_tokens)
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "budget_usd 0.10 would be exceeded: 0.0000 spent, 0.0000 reserved by requests in \
             flight, the next request may cost up to 0.1203"
        );
    }
}
