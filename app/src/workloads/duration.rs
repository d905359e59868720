//! Durations as people type them into forms: `15 min`, `2h`, `1 h 30 min`, `1.5 h`, `90`.

/// The seconds `text` names: a bare number is minutes; otherwise number–unit pairs (`d`, `h`,
/// `min` or `m`, `s`, or their words), added up. Reads back what [`super::sentences::duration`]
/// writes. `None` for anything else, negative or absurdly long.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim().to_ascii_lowercase();
    if text.is_empty() {
        return None;
    }
    if let Ok(minutes) = text.parse::<f64>() {
        return whole(minutes * 60.0);
    }
    let mut total = 0.0;
    let mut rest = text.as_str();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = match &rest[..letters] {
            "d" | "day" | "days" => 86_400.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            _ => return None,
        };
        rest = &rest[letters..];
        total += value * unit;
    }
    whole(total)
}

fn whole(seconds: f64) -> Option<i64> {
    (seconds.is_finite() && (0.0..1e10).contains(&seconds)).then(|| seconds.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::sentences::duration;

    #[test]
    fn people_write_durations_many_ways_and_a_bare_number_is_minutes() {
        for (text, seconds) in [
            ("0", 0),
            ("15", 900),
            ("15m", 900),
            ("15 min", 900),
            ("2h", 7_200),
            ("1.5 h", 5_400),
            ("1h30m", 5_400),
            ("1 hour 30 minutes", 5_400),
            ("  45 S ", 45),
            ("2 d 3 h", 183_600),
        ] {
            assert_eq!(parse_duration(text), Some(seconds), "{text:?}");
        }
    }

    #[test]
    fn what_the_pages_write_reads_back_as_the_same_duration() {
        for seconds in [0, 45, 900, 930, 3_600, 5_400, 28_800, 190_800] {
            assert_eq!(parse_duration(&duration(seconds)), Some(seconds));
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for text in ["", "soon", "-5", "15 parsecs", "h", "1.2.3h", "1e400"] {
            assert_eq!(parse_duration(text), None, "{text:?}");
        }
    }
}
