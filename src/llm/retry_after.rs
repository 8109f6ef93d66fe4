//! A server's retry-after: delay-seconds or an HTTP date, read without ever panicking.

use std::time::{Duration, SystemTime};

use actors::civil_date::days_from_civil;

/// Parses a retry-after value: delay-seconds, or an IMF-fixdate
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, the only date form RFC 9110 lets servers send).
/// A date in the past means no wait. Any non-negative number is accepted, however large
/// (`1e30`, `inf`): it only asks for the longest wait, which [`RetryPolicy::max_delay`] caps.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return delay_from_seconds(seconds);
    }
    let at = parse_imf_fixdate(value)?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A server's delay in seconds as a Duration: None for a negative or NaN number, which asks
/// for nothing; a number too large for a Duration (or infinite) saturates, for the policy's
/// cap to bring down. `Duration::from_secs_f64` would panic on those.
pub(super) fn delay_from_seconds(seconds: f64) -> Option<Duration> {
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

fn parse_imf_fixdate(value: &str) -> Option<SystemTime> {
    let (_weekday, rest) = value.split_once(", ")?;
    let mut fields = rest.split(' ');
    let day: u32 = fields.next()?.parse().ok()?;
    let month_name = fields.next()?;
    // IMF-fixdate's year is four digits; a longer one would overflow the day arithmetic.
    let year_text = fields.next()?;
    if year_text.len() != 4 {
        return None;
    }
    let year: i64 = year_text.parse().ok()?;
    let time = fields.next()?;
    if fields.next()? != "GMT" || fields.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|name| *name == month_name)? as u32 + 1;
    let mut clock = time.split(':').map(|part| part.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = u64::try_from(days).ok()? * 86_400 + hour * 3600 + minute * 60 + second;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_values() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let check = |value: &str, expected: Option<Duration>| {
            assert_eq!(parse_retry_after(value, now), expected, "{value:?}");
        };
        check("120", Some(Duration::from_secs(120)));
        check(" 1.5 ", Some(Duration::from_millis(1500)));
        check("0", Some(Duration::ZERO));
        check("-3", None);
        check("soon", None);
        check("Wed, 21 Oct 2015 07:28:00 GMT", Some(Duration::ZERO));
        check(
            "Wed, 21 Oct 2015 07:29:05 GMT",
            Some(Duration::from_secs(65)),
        );
        check("Tue, 20 Oct 2015 07:28:00 GMT", Some(Duration::ZERO));
        check("Wed, 21 Oct 2015 07:28:00 UTC", None);
        check("Wed, 21 Foo 2015 07:28:00 GMT", None);
        check("Wed, 21 Oct 2015 25:28:00 GMT", None);
        check("Wed, 21 Oct 99999999999999999 07:28:00 GMT", None);
        check("Wed, 21 Oct +015 07:28:00 GMT", None);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2015, 10, 21), 16_729);
    }
}
