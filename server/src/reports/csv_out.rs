//! CSV exports, written by the `csv` crate (which quotes commas, quotes and line breaks), with
//! text cells a spreadsheet would run as a formula neutralised.

/// What a CSV writer over memory wrote (it cannot fail to write to a `Vec`).
pub fn written(out: csv::Writer<Vec<u8>>) -> String {
    out.into_inner()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// A text cell as written: one that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
/// gets a leading `'`, so a spreadsheet shows it instead of running it (OWASP's advice on CSV
/// injection). Numbers are written by the exports themselves and never pass through here.
pub fn text_cell(text: &str) -> String {
    match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}"),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_a_spreadsheet_would_run_gets_a_leading_quote_and_commas_stay_in_their_cell() {
        let mut out = csv::Writer::from_writer(Vec::new());
        out.write_record([text_cell("=HYPERLINK(\"x\"),y"), text_cell("ai/olmo")])
            .unwrap();
        let text = written(out);
        assert_eq!(text, "\"'=HYPERLINK(\"\"x\"\"),y\",ai/olmo\n");
        let row = csv::Reader::from_reader(format!("a,b\n{text}").as_bytes())
            .records()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(&row[0], "'=HYPERLINK(\"x\"),y");
        for risky in ["+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert!(text_cell(risky).starts_with('\''), "{risky:?}");
        }
        assert_eq!(text_cell(""), "");
    }
}
