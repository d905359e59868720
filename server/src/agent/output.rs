//! Output in chunks with byte offsets: the server appends what it has not received yet, and notes
//! gaps (output the agent skipped because the server was far behind). Pure.

use super::protocol::OutputChunk;

/// What a chunk adds to a run's output, given the bytes received so far: the text to append and
/// the new offset; `None` when the chunk holds nothing new.
pub fn accept(received: u64, chunk: &OutputChunk) -> Option<(String, u64)> {
    let end = chunk.offset + chunk.len;
    if end <= received {
        return None;
    }
    let mut text = String::new();
    if chunk.offset > received {
        text.push_str(&format!(
            "\n[hourglass: {} bytes of output were skipped to keep up]\n",
            chunk.offset - received
        ));
        text.push_str(&chunk.data);
    } else {
        // Overlap with what arrived before (a resend after a lost answer): keep the new part.
        let skip = (received - chunk.offset) as usize;
        let from = (skip.min(chunk.data.len())..=chunk.data.len())
            .find(|&i| chunk.data.is_char_boundary(i))
            .unwrap_or(chunk.data.len());
        text.push_str(&chunk.data[from..]);
    }
    Some((text, end))
}

/// The longest prefix of `bytes` that does not end inside a UTF-8 sequence (a chunk boundary
/// must not split a character): at most 3 bytes are held back for the next chunk.
pub fn utf8_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let b = bytes[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = if b & 0b1000_0000 == 0 {
            1
        } else if b & 0b1110_0000 == 0b1100_0000 {
            2
        } else if b & 0b1111_0000 == 0b1110_0000 {
            3
        } else if b & 0b1111_1000 == 0b1111_0000 {
            4
        } else {
            return len; // not UTF-8 at all: send as is (lossily)
        };
        return if back < needed { len - back } else { len };
    }
    len
}

/// Keeps the last `limit` bytes of `log` + `more`, cut at a character boundary.
pub fn keep_tail(mut log: String, more: &str, limit: usize) -> String {
    log.push_str(more);
    if log.len() <= limit {
        return log;
    }
    let start = (log.len() - limit..log.len())
        .find(|&i| log.is_char_boundary(i))
        .unwrap_or(log.len());
    log.split_off(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(offset: u64, data: &str) -> OutputChunk {
        OutputChunk {
            run_id: 1,
            offset,
            len: data.len() as u64,
            data: data.into(),
        }
    }

    #[test]
    fn a_chunk_at_the_cursor_is_appended_whole() {
        assert_eq!(accept(0, &chunk(0, "hello")), Some(("hello".into(), 5)));
    }

    #[test]
    fn a_resent_chunk_adds_only_what_is_new() {
        assert_eq!(accept(5, &chunk(0, "hello")), None);
        assert_eq!(
            accept(3, &chunk(0, "hello world")),
            Some(("lo world".into(), 11))
        );
    }

    #[test]
    fn a_gap_is_said_in_the_output() {
        let (text, end) = accept(10, &chunk(100, "tail")).unwrap();
        assert!(text.contains("90 bytes of output were skipped"));
        assert!(text.ends_with("tail"));
        assert_eq!(end, 104);
    }

    #[test]
    fn a_chunk_boundary_never_splits_a_character() {
        let text = "ab€".as_bytes(); // € is 3 bytes
        assert_eq!(utf8_prefix(text), 5);
        assert_eq!(utf8_prefix(&text[..4]), 2);
        assert_eq!(utf8_prefix(&text[..3]), 2);
        assert_eq!(utf8_prefix(b"plain"), 5);
        assert_eq!(utf8_prefix(b""), 0);
    }

    #[test]
    fn the_kept_tail_is_bounded_and_whole_characters() {
        let kept = keep_tail("ééé".into(), "abc", 4);
        assert_eq!(kept, "abc");
        assert_eq!(keep_tail("ab".into(), "cd", 10), "abcd");
    }
}
