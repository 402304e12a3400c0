//! The text a user gives the CLI (documents, patches, queries, batches, config files): read
//! as bytes and refused as invalid input, naming where, when it is not UTF-8 (a document
//! file in Latin-1 is a mistake in the input, not a failing disk: docs/contract.md, "The
//! command line").

use crate::exit::CliError;
use std::io::Read;
use std::path::Path;

/// All of `reader` as text; `what` names it in errors ("the batch", "standard input").
pub fn read_text<R: Read + ?Sized>(reader: &mut R, what: &str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(what, e))?;
    utf8(bytes, what)
}

/// The file at `path` as text, named by its path in errors.
pub fn read_file(path: &Path) -> Result<String, CliError> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| CliError::io(&what, e))?;
    utf8(bytes, &what)
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
