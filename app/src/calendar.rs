//! Calendar arithmetic in one place, shared by the server and the browser: UTC days, calendar and
//! fiscal quarters, ISO 8601 dates typed into forms and API parameters. All of it is chrono's; the
//! server keeps epoch seconds and turns them into dates only here.

use chrono::{DateTime, Datelike, Months, NaiveDate, NaiveDateTime, Timelike, Utc};

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// The UTC moment of an epoch time (times beyond chrono's range clamp to its ends).
fn utc(epoch_s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(epoch_s, 0).unwrap_or(if epoch_s < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// Epoch seconds of a day's 00:00 UTC.
fn midnight(date: NaiveDate) -> i64 {
    date.and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp())
        .unwrap_or_default()
}

/// `(year, month, day)` (UTC) of an epoch time.
pub fn civil_date(epoch_s: i64) -> (i32, u32, u32) {
    let t = utc(epoch_s);
    (t.year(), t.month(), t.day())
}

/// Seconds since the epoch of `y-m-d 00:00 UTC`, or `None` for a day that does not exist.
pub fn epoch_of(year: i32, month: u32, day: u32) -> Option<i64> {
    NaiveDate::from_ymd_opt(year, month, day).map(midnight)
}

// Dates are written field by field rather than through chrono's strftime, which would add its
// format parser to every page's wasm.

/// `2026-11-30` (UTC).
pub fn format_date(epoch_s: i64) -> String {
    let t = utc(epoch_s);
    format!("{:04}-{:02}-{:02}", t.year(), t.month(), t.day())
}

/// `14:02:05` (UTC).
pub fn clock(epoch_s: i64) -> String {
    let t = utc(epoch_s);
    format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
}

/// `2026-11-30T10:00:00Z`.
pub fn iso(epoch_s: i64) -> String {
    format!("{}T{}Z", format_date(epoch_s), clock(epoch_s))
}

/// `2026-10-01 to 2026-12-31` for the period `[from, to)`.
pub fn period_label(from: i64, to: i64) -> String {
    format!("{} to {}", format_date(from), format_date(to - 1))
}

/// Whether two epoch times fall on the same UTC day.
pub fn same_day(a: i64, b: i64) -> bool {
    a.div_euclid(DAY) == b.div_euclid(DAY)
}

/// January, the month a calendar year starts in (a serde default).
pub fn january() -> u32 {
    1
}

/// A fiscal calendar: the year starts on the first of `start_month` (1 = January, the calendar
/// year) and is named by the calendar year it ends in, as "FY2027" for October 2026 – September
/// 2027 when it starts in October.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fiscal {
    start_month: u32,
}

impl Default for Fiscal {
    fn default() -> Self {
        Fiscal { start_month: 1 }
    }
}

impl Fiscal {
    /// `None` for a month that is not 1–12.
    pub fn starting(start_month: u32) -> Option<Fiscal> {
        (1..=12)
            .contains(&start_month)
            .then_some(Fiscal { start_month })
    }

    /// The month the year starts in (1 = January).
    pub fn start_month(self) -> u32 {
        self.start_month
    }

    /// The first day of fiscal year `year`.
    fn year_start(self, year: i32) -> Option<NaiveDate> {
        let calendar_year = if self.start_month == 1 {
            year
        } else {
            year - 1
        };
        NaiveDate::from_ymd_opt(calendar_year, self.start_month, 1)
    }

    /// `[start, end)` of quarter `q` (1–4) of fiscal year `year`, in epoch seconds.
    pub fn quarter(self, year: i32, q: u32) -> Option<(i64, i64)> {
        if !(1..=4).contains(&q) {
            return None;
        }
        let start = self
            .year_start(year)?
            .checked_add_months(Months::new((q - 1) * 3))?;
        let end = start.checked_add_months(Months::new(3))?;
        Some((midnight(start), midnight(end)))
    }

    /// `[start, end)` of fiscal year `year`.
    pub fn year(self, year: i32) -> Option<(i64, i64)> {
        let start = self.year_start(year)?;
        let end = start.checked_add_months(Months::new(12))?;
        Some((midnight(start), midnight(end)))
    }

    /// The fiscal `(year, quarter)` containing `epoch_s`.
    pub fn quarter_of(self, epoch_s: i64) -> (i32, u32) {
        let (year, month, _) = civil_date(epoch_s);
        // Months since the fiscal year began, and whether it began last calendar year.
        let into = (month + 12 - self.start_month) % 12;
        let fiscal_year = if self.start_month == 1 || month < self.start_month {
            year
        } else {
            year + 1
        };
        (fiscal_year, into / 3 + 1)
    }

    /// `Q4 2026` for calendar years, `Q1 FY2027` otherwise.
    pub fn quarter_label(self, year: i32, q: u32) -> String {
        if self.start_month == 1 {
            format!("Q{q} {year}")
        } else {
            format!("Q{q} FY{year}")
        }
    }
}

/// `[start, end)` of calendar quarter `q` (1–4) of `year`, in epoch seconds.
pub fn quarter(year: i32, q: u32) -> Option<(i64, i64)> {
    Fiscal::default().quarter(year, q)
}

/// The calendar `(year, quarter)` containing `epoch_s`.
pub fn quarter_of(epoch_s: i64) -> (i32, u32) {
    Fiscal::default().quarter_of(epoch_s)
}

/// Why a date typed in did not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadDate(pub String);

impl std::fmt::Display for BadDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A day typed into a form, `2027-01-01`, as its 00:00 UTC; empty is `None`.
pub fn parse_day(raw: &str) -> Result<Option<i64>, BadDate> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .map(|d| Some(midnight(d)))
        .map_err(|_| BadDate(format!("\"{raw}\" is not a date like 2027-01-01.")))
}

/// A moment in an API parameter: epoch seconds (`1790812800`), an ISO 8601 day (`2026-10-01`,
/// its 00:00 UTC) or an ISO 8601 time with its zone (`2026-10-01T00:00:00Z`, `…+02:00`).
pub fn parse_moment(raw: &str) -> Result<i64, BadDate> {
    let raw = raw.trim();
    if let Ok(epoch) = raw.parse::<i64>() {
        return Ok(epoch);
    }
    if let Ok(date) = NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
        return Ok(midnight(date));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Ok(t.timestamp());
    }
    if NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S").is_ok() {
        return Err(BadDate(format!(
            "\"{raw}\" has no time zone: add Z for UTC (2026-10-01T00:00:00Z) or an offset \
             (+02:00)."
        )));
    }
    Err(BadDate(format!(
        "\"{raw}\" is not a date: use 2026-10-01, 2026-10-01T00:00:00Z or epoch seconds."
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_the_utc_calendar_day() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(951_782_400), "2000-02-29");
        assert_eq!(format_date(1_796_083_199), "2026-11-30");
        assert_eq!(civil_date(-1), (1969, 12, 31));
        assert_eq!(iso(1_796_034_310), "2026-11-30T10:25:10Z");
        assert_eq!(clock(1_796_034_310), "10:25:10");
        assert_eq!(epoch_of(2026, 11, 30), Some(1_795_996_800));
        assert_eq!(epoch_of(2026, 2, 29), None);
    }

    #[test]
    fn quarters_start_on_the_first_of_january_april_july_and_october() {
        let (start, end) = quarter(2026, 4).unwrap();
        assert_eq!(
            (Some(start), Some(end)),
            (epoch_of(2026, 10, 1), epoch_of(2027, 1, 1))
        );
        assert_eq!(Some(quarter(2026, 1).unwrap().1), epoch_of(2026, 4, 1));
        assert!(quarter(2026, 5).is_none());
        assert_eq!(quarter_of(0), (1970, 1));
        assert_eq!(quarter_of(1_796_034_310), (2026, 4));
        assert_eq!(quarter_of(1_782_864_000), (2026, 3));
    }

    #[test]
    fn a_fiscal_year_starting_in_october_is_named_by_the_year_it_ends_in() {
        let fy = Fiscal::starting(10).unwrap();
        let oct_2026 = epoch_of(2026, 10, 1).unwrap();
        assert_eq!(fy.quarter_of(oct_2026), (2027, 1));
        assert_eq!(fy.quarter_of(oct_2026 - 1), (2026, 4));
        assert_eq!(fy.quarter_of(epoch_of(2027, 3, 31).unwrap()), (2027, 2));
        assert_eq!(
            fy.quarter(2027, 1),
            Some((oct_2026, epoch_of(2027, 1, 1).unwrap()))
        );
        assert_eq!(
            fy.year(2027),
            Some((oct_2026, epoch_of(2027, 10, 1).unwrap()))
        );
        assert_eq!(fy.quarter_label(2027, 1), "Q1 FY2027");
        assert!(Fiscal::starting(13).is_none());
        // Every day of a year falls in the quarter that contains it.
        for fy in (1..=12).filter_map(Fiscal::starting) {
            let mut t = epoch_of(2026, 1, 1).unwrap();
            while t < epoch_of(2028, 1, 1).unwrap() {
                let (y, q) = fy.quarter_of(t);
                let (from, to) = fy.quarter(y, q).unwrap();
                assert!(from <= t && t < to, "{fy:?} {} in {y} Q{q}", iso(t));
                t += DAY;
            }
        }
    }

    #[test]
    fn a_moment_reads_as_epoch_seconds_an_iso_day_or_an_iso_time_with_its_zone() {
        let oct = epoch_of(2026, 10, 1).unwrap();
        assert_eq!(parse_moment("2026-10-01"), Ok(oct));
        assert_eq!(parse_moment("2026-10-01T00:00:00Z"), Ok(oct));
        assert_eq!(parse_moment("2026-10-01T02:00:00+02:00"), Ok(oct));
        assert_eq!(parse_moment(&oct.to_string()), Ok(oct));
        let no_zone = parse_moment("2026-10-01T00:00:00").unwrap_err();
        assert!(no_zone.0.contains("no time zone"), "{no_zone}");
        let bad = parse_moment("2026-13-01").unwrap_err();
        assert!(bad.0.contains("is not a date"), "{bad}");
        assert_eq!(parse_day(" "), Ok(None));
        assert_eq!(parse_day("2027-01-01"), Ok(epoch_of(2027, 1, 1)));
        assert!(parse_day("2027-02-30").is_err());
    }
}
