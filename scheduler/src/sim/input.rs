//! What every simulator parser returns on bad input, and the duration syntax of the command line.

use std::fmt;

use crate::ids::Time;

/// Why an input text was rejected: the line (1-based, when known), the field, and what is wrong.
/// The caller adds the file name: `TRACE.csv: line 12, field `gpus`: …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub line: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    pub(crate) fn at(line: usize, field: &str, message: impl Into<String>) -> InputError {
        InputError {
            line: Some(line),
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    pub(crate) fn new(
        line: Option<usize>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> InputError {
        InputError {
            line,
            field: field.map(str::to_string),
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.line, &self.field) {
            (Some(line), Some(field)) => write!(f, "line {line}, field `{field}`: ")?,
            (Some(line), None) => write!(f, "line {line}: ")?,
            (None, Some(field)) => write!(f, "field `{field}`: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for InputError {}

/// The 1-based line holding byte `offset` of `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parses `7d`, `8h`, `30m`, `90s`, `1d12h` or plain seconds (`3600`) into seconds.
pub fn parse_duration(text: &str) -> Result<Time, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(seconds) = text.parse::<Time>() {
        return if seconds >= 0 {
            Ok(seconds)
        } else {
            Err(format!("`{text}` is negative"))
        };
    }
    let mut total: Time = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("`{text}`: unknown unit `{c}` (use d, h, m or s)")),
        };
        let value: Time = number
            .parse()
            .map_err(|_| format!("`{text}`: expected a number before `{c}`"))?;
        total = value
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("`{text}` is too long"))?;
        number.clear();
    }
    if !number.is_empty() {
        return Err(format!("`{text}`: a number without a unit at the end"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_plain_seconds() {
        assert_eq!(parse_duration("7d"), Ok(7 * 86_400));
        assert_eq!(parse_duration("1d12h"), Ok(36 * 3_600));
        assert_eq!(parse_duration("90"), Ok(90));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("5h3").is_err());
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let e = InputError::at(12, "gpus", "expected a whole number ≥ 1, got `x`");
        assert_eq!(
            e.to_string(),
            "line 12, field `gpus`: expected a whole number ≥ 1, got `x`"
        );
        assert_eq!(line_of("a\nb\nc", 2), 2);
    }
}
