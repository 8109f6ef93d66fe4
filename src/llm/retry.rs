//! Retries with exponential backoff and full jitter, honouring the server's retry-after.

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, SystemTime};

use super::attempt::{ChatProvider, ProviderError};
use super::request::{ChatReply, ChatRequest};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The backoff ceiling after the first failure; it doubles with each further failure.
    pub base: Duration,
    /// Caps both the backoff and a server's retry-after, so that no answer can park a
    /// request for hours.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_secs(2),
            max_delay: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The wait before the next attempt, after `attempts_made` attempts failed with a
    /// retryable error, or None when no attempt is left. `rng_value` in [0, 1) picks the
    /// point in the jitter window; the wait is never shorter than the server's retry-after.
    pub fn next_delay(
        &self,
        attempts_made: u32,
        retry_after: Option<Duration>,
        rng_value: f64,
    ) -> Option<Duration> {
        if attempts_made >= self.max_attempts {
            return None;
        }
        let doublings = attempts_made.saturating_sub(1).min(31);
        let ceiling = self
            .base
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        let jittered = ceiling.mul_f64(rng_value.clamp(0.0, 1.0));
        let server_asked = retry_after.unwrap_or_default().min(self.max_delay);
        Some(jittered.max(server_asked))
    }
}

/// A uniform value in [0, 1) for jitter, from the standard library's per-process random keys.
pub fn random_unit() -> f64 {
    let bits = RandomState::new().hash_one(SystemTime::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub reply: ChatReply,
    pub attempts: u32,
}

/// The last error once no attempt is left, or the first one that is not worth retrying.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("gave up after {attempts} {}: {error}", attempt_noun(*.attempts))]
pub struct Exhausted {
    pub error: ProviderError,
    pub attempts: u32,
}

fn attempt_noun(attempts: u32) -> &'static str {
    if attempts == 1 { "attempt" } else { "attempts" }
}

/// Sends until an answer, a non-retryable error, or the policy's last attempt.
/// `sleep` waits between attempts (tokio::time::sleep in the broker, a recorder in tests).
pub async fn send_with_retries<P, S, F>(
    provider: &P,
    request: &ChatRequest,
    policy: &RetryPolicy,
    jitter: &mut impl FnMut() -> f64,
    sleep: S,
) -> Result<Answered, Exhausted>
where
    P: ChatProvider,
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let error = match provider.send_once(request).await {
            Ok(reply) => return Ok(Answered { reply, attempts }),
            Err(error) => error,
        };
        let ProviderError::Retryable { retry_after, .. } = &error else {
            return Err(Exhausted { error, attempts });
        };
        let Some(delay) = policy.next_delay(attempts, *retry_after, jitter()) else {
            return Err(Exhausted { error, attempts });
        };
        tracing::warn!(
            request_id = %request.request_id,
            attempts,
            delay_s = delay.as_secs_f64(),
            "{error}; retrying"
        );
        sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::llm::attempt::RetryCause;
    use crate::llm::request::RequestKind;
    use crate::llm::retry_after::parse_retry_after;
    use crate::llm::settings::Provider;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base: Duration::from_secs(2),
            max_delay: Duration::from_secs(20),
        }
    }

    fn check_delay(attempts_made: u32, retry_after: Option<u64>, rng: f64, expected: Option<f64>) {
        let delay = policy().next_delay(attempts_made, retry_after.map(Duration::from_secs), rng);
        assert_eq!(
            delay,
            expected.map(Duration::from_secs_f64),
            "attempts {attempts_made}, retry-after {retry_after:?}, rng {rng}"
        );
    }

    #[test]
    fn backoff_doubles_with_full_jitter_and_a_cap() {
        check_delay(1, None, 0.5, Some(1.0));
        check_delay(1, None, 0.0, Some(0.0));
        check_delay(2, None, 0.5, Some(2.0));
        check_delay(3, None, 0.25, Some(2.0));
        check_delay(4, None, 1.0, Some(16.0));
        check_delay(4, None, 7.0, Some(16.0));
        check_delay(5, None, 0.5, None);
        check_delay(9, None, 0.5, None);
    }

    #[test]
    fn retry_after_is_a_floor_up_to_the_cap() {
        check_delay(1, Some(7), 0.5, Some(7.0));
        check_delay(4, Some(3), 0.5, Some(8.0));
        check_delay(1, Some(3600), 0.5, Some(20.0));
        check_delay(5, Some(1), 0.5, None);
    }

    #[test]
    fn large_attempt_counts_do_not_overflow() {
        let policy = RetryPolicy {
            max_attempts: u32::MAX,
            base: Duration::from_secs(2),
            max_delay: Duration::from_secs(20),
        };
        assert_eq!(
            policy.next_delay(200, None, 1.0),
            Some(Duration::from_secs(20))
        );
    }

    /// Issue 10: no number a server sends may panic; a huge one asks for the longest wait.
    #[test]
    fn retry_after_numbers_beyond_a_duration_saturate() {
        let now = SystemTime::UNIX_EPOCH;
        for huge in ["1e30", "18446744073709551616", "1e308", "inf", "+Infinity"] {
            assert_eq!(parse_retry_after(huge, now), Some(Duration::MAX), "{huge}");
        }
        for nothing in ["NaN", "-inf", "-1e30"] {
            assert_eq!(parse_retry_after(nothing, now), None, "{nothing}");
        }
        assert_eq!(
            policy().next_delay(1, parse_retry_after("1e30", now), 0.5),
            Some(Duration::from_secs(20)),
            "capped at max_delay"
        );
    }

    #[test]
    fn random_unit_stays_in_range_and_varies() {
        let values: Vec<f64> = (0..64).map(|_| random_unit()).collect();
        assert!(values.iter().all(|value| (0.0..1.0).contains(value)));
        assert!(values.windows(2).any(|pair| pair[0] != pair[1]));
    }

    /// Answers from a script, so the loop can be checked without a network.
    struct ScriptedProvider {
        answers: Mutex<VecDeque<Result<ChatReply, ProviderError>>>,
    }

    impl ChatProvider for ScriptedProvider {
        fn send_once(
            &self,
            _request: &ChatRequest,
        ) -> impl Future<Output = Result<ChatReply, ProviderError>> + Send {
            let next = self
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .expect("the script has an answer for every attempt");
            std::future::ready(next)
        }
    }

    fn retryable(retry_after: Option<u64>) -> ProviderError {
        ProviderError::Retryable {
            provider: Provider::Anthropic,
            cause: RetryCause::Status(529),
            retry_after: retry_after.map(Duration::from_secs),
            message: "overloaded".to_string(),
        }
    }

    fn reply() -> ChatReply {
        ChatReply {
            text: "ok".to_string(),
            truncated: false,
            usage: None,
        }
    }

    async fn run(
        script: Vec<Result<ChatReply, ProviderError>>,
    ) -> (Result<Answered, Exhausted>, Vec<Duration>) {
        let provider = ScriptedProvider {
            answers: Mutex::new(script.into()),
        };
        let request = ChatRequest {
            kind: RequestKind::Reflexion,
            system: String::new(),
            messages: Vec::new(),
            request_id: "x".to_string(),
        };
        let sleeps = Mutex::new(Vec::new());
        let mut jitter = || 0.5;
        let outcome = send_with_retries(&provider, &request, &policy(), &mut jitter, |delay| {
            sleeps.lock().unwrap().push(delay);
            std::future::ready(())
        })
        .await;
        (outcome, sleeps.into_inner().unwrap())
    }

    #[tokio::test]
    async fn retries_until_answered() {
        let (outcome, sleeps) = run(vec![
            Err(retryable(Some(9))),
            Err(retryable(None)),
            Ok(reply()),
        ])
        .await;
        assert_eq!(
            outcome,
            Ok(Answered {
                reply: reply(),
                attempts: 3
            })
        );
        assert_eq!(sleeps, vec![Duration::from_secs(9), Duration::from_secs(2)]);
    }

    #[tokio::test]
    async fn auth_errors_stop_at_once() {
        let auth = ProviderError::Auth {
            provider: Provider::Anthropic,
            status: 401,
            message: "invalid x-api-key".to_string(),
            env_var: "ANTHROPIC_API_KEY",
        };
        let (outcome, sleeps) = run(vec![Err(auth.clone())]).await;
        assert_eq!(
            outcome,
            Err(Exhausted {
                error: auth,
                attempts: 1
            })
        );
        assert!(sleeps.is_empty());
    }

    #[tokio::test]
    async fn gives_up_after_the_last_attempt() {
        let (outcome, sleeps) = run((0..5).map(|_| Err(retryable(None))).collect()).await;
        assert_eq!(outcome.unwrap_err().attempts, 5);
        assert_eq!(sleeps.len(), 4);
    }
}
