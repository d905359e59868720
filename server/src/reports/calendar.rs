//! UTC calendar arithmetic for reports and dates typed into forms.

use crate::ServerError;

/// Seconds since the epoch of `y-m-d 00:00 UTC` (Howard Hinnant's days-from-civil).
pub fn epoch_of(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) * 86_400
}

/// `[start, end)` of quarter `q` (1–4) of `year`, in epoch seconds.
pub fn quarter(year: i32, q: u32) -> Option<(i64, i64)> {
    if !(1..=4).contains(&q) {
        return None;
    }
    let first_month = i64::from(q - 1) * 3 + 1;
    let start = epoch_of(i64::from(year), first_month, 1);
    let end = if q == 4 {
        epoch_of(i64::from(year) + 1, 1, 1)
    } else {
        epoch_of(i64::from(year), first_month + 3, 1)
    };
    Some((start, end))
}

/// `YYYY-MM-DD` → that day's 00:00 UTC; empty → `None` (on approval).
pub fn parse_date(raw: &str) -> Result<Option<i64>, ServerError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let invalid = || {
        ServerError::invalid(
            "effective_at",
            format!("\"{raw}\" is not a date like 2027-01-01."),
        )
    };
    let parts: Vec<i64> = raw
        .split('-')
        .map(|p| p.parse().map_err(|_| invalid()))
        .collect::<Result<_, _>>()?;
    let [y, m, d] = parts[..] else {
        return Err(invalid());
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(invalid());
    }
    Ok(Some(epoch_of(y, m, d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarters_start_on_the_first_of_january_april_july_and_october() {
        assert_eq!(epoch_of(1970, 1, 1), 0);
        assert_eq!(epoch_of(2026, 11, 30), 1_795_996_800);
        let (start, end) = quarter(2026, 4).unwrap();
        assert_eq!((start, end), (epoch_of(2026, 10, 1), epoch_of(2027, 1, 1)));
        assert_eq!(quarter(2026, 1).unwrap().1, epoch_of(2026, 4, 1));
        assert!(quarter(2026, 5).is_none());
    }
}
