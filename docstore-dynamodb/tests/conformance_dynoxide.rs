//! The whole conformance suite against dynoxide (`scripts/with-dynamodb-emulators`).

mod support;

static TABLE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();

conformance_tests::conformance_suite!(crate::support::Harness {
    emulator: crate::support::Emulator::Dynoxide,
    table: Some(&crate::TABLE),
});

/// The contract's families again with indexes declared on the fields the cases query (each store on a
/// table of its own, made with the indexes' GSIs).
mod indexed {
    conformance_tests::index_suite!(crate::support::Harness {
        emulator: crate::support::Emulator::Dynoxide,
        table: Some(&crate::TABLE),
    });
}
