//! Fuzz target: `docstore_cli::fuzzing::query_json` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| docstore_cli::fuzzing::query_json(input));
