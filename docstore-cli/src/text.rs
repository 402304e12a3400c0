//! The text a user gives the CLI (documents, patches, queries, batches, config files): read
//! as bytes and refused as invalid input, naming where, when it is not UTF-8 (a document
//! file in Latin-1 is a mistake in the input, not a failing disk: docs/contract.md, "The
//! command line").

use crate::exit::{CliError, TOO_LARGE};
use std::io::{BufRead, Read};
use std::path::Path;

/// The most the CLI reads of one input given whole (a document, a patch, a query, a batch, a
/// config file): far above anything the store accepts (a batch is at most 3 000 000 bytes),
/// so a larger input is refused before it is held in memory.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The longest line `import` keeps: an export line of the largest document with every
/// character escaped, and its metadata, fit many times over. A longer line is read through and
/// skipped, never held whole.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// All of `reader` as text; `what` names it in errors ("the batch", "standard input").
pub fn read_text<R: Read + ?Sized>(reader: &mut R, what: &str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(what, e))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(CliError::new(
            TOO_LARGE,
            format!("{what} is larger than {MAX_INPUT_BYTES} bytes, more than any input can hold"),
        ));
    }
    utf8(bytes, what)
}

/// The file at `path` as text, named by its path in errors.
pub fn read_file(path: &Path) -> Result<String, CliError> {
    let what = path.display().to_string();
    let mut file = std::fs::File::open(path).map_err(|e| CliError::io(&what, e))?;
    read_text(&mut file, &what)
}

/// A UTF-8 byte order mark, which an input's first line may start with.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The text of one input line as read by [`read_line`] (the first line possibly starting
/// with a byte order mark, which is dropped): `None` for a blank line, else why the line is
/// skipped — longer than [`MAX_LINE_BYTES`], or not UTF-8.
pub fn line_text(line: &[u8], first_line: bool) -> Result<Option<&str>, String> {
    let line = match first_line {
        true => line.strip_prefix(BOM).unwrap_or(line),
        false => line,
    };
    if line.len() > MAX_LINE_BYTES {
        return Err(format!(
            "longer than {MAX_LINE_BYTES} bytes (more than any document line can be)"
        ));
    }
    let text = std::str::from_utf8(line).map_err(|err| {
        format!(
            "not UTF-8 (invalid byte at byte {} of the line)",
            err.valid_up_to() + 1
        )
    })?;
    Ok(Some(text).filter(|text| !text.trim().is_empty()))
}

/// Reads one line (with its `\n`) into `bytes` and gives the bytes read, as
/// [`BufRead::read_until`] does, but keeps at most [`MAX_LINE_BYTES`] + 1 of a line: the rest
/// of a longer line is read and dropped, so `bytes` longer than [`MAX_LINE_BYTES`] means the
/// line was too long.
pub fn read_line(input: &mut dyn BufRead, bytes: &mut Vec<u8>) -> std::io::Result<usize> {
    let kept = (&mut *input)
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', bytes)?;
    if bytes.len() <= MAX_LINE_BYTES || bytes.last() == Some(&b'\n') {
        return Ok(kept);
    }
    let mut dropped = 0;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let (used, ended) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        input.consume(used);
        dropped += used;
        if ended {
            break;
        }
    }
    Ok(kept + dropped)
}

/// `bytes` as text, or an invalid-argument error naming the line and column (both from 1,
/// the column in bytes) of the first byte that is not UTF-8.
pub fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, CliError> {
    String::from_utf8(bytes).map_err(|err| {
        let bytes = err.as_bytes();
        let at = err.utf8_error().valid_up_to();
        let before = &bytes[..at];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let column = at
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |n| n + 1)
            + 1;
        CliError::invalid(format!(
            "{what} is not UTF-8 text: invalid byte 0x{:02x} at line {line} column {column}",
            bytes[at]
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_larger_than_the_bound_is_refused_unread() {
        let mut huge = std::io::repeat(b'x').take(MAX_INPUT_BYTES + 10);
        let err = read_text(&mut huge, "DATA").unwrap_err();
        assert_eq!(err.code, TOO_LARGE);
        assert!(err.message.contains("larger than"), "{err}");
    }

    #[test]
    fn a_line_longer_than_the_bound_is_cut_and_the_next_one_read_whole() {
        let long = vec![b'x'; MAX_LINE_BYTES + 100];
        let input = [&long[..], b"\n{\"a\": 1}\n"].concat();
        let mut reader = std::io::BufReader::new(&input[..]);
        let mut bytes = Vec::new();
        assert_eq!(read_line(&mut reader, &mut bytes).unwrap(), long.len() + 1);
        assert_eq!(
            bytes.len(),
            MAX_LINE_BYTES + 1,
            "kept one byte past the bound"
        );
        bytes.clear();
        assert_eq!(read_line(&mut reader, &mut bytes).unwrap(), 9);
        assert_eq!(bytes, b"{\"a\": 1}\n");
    }

    #[test]
    fn the_first_invalid_byte_is_named_by_line_and_column() {
        let err = utf8(b"{\n  \"a\": \"caf\xe9\"}".to_vec(), "DATA").unwrap_err();
        assert_eq!(err.code, crate::exit::INVALID_ARGUMENT);
        assert_eq!(
            err.message,
            "DATA is not UTF-8 text: invalid byte 0xe9 at line 2 column 12"
        );
        let err = utf8(b"\xff".to_vec(), "q").unwrap_err();
        assert!(err.message.ends_with("0xff at line 1 column 1"), "{err}");
        assert_eq!(utf8("é\n".as_bytes().to_vec(), "x").unwrap(), "é\n");
    }
}
