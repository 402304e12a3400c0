//! The whole conformance suite against dynoxide (`scripts/with-dynamodb-emulators`).

mod support;

static TABLE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();

conformance_tests::conformance_suite!(crate::support::Harness {
    emulator: crate::support::Emulator::Dynoxide,
    table: Some(&crate::TABLE),
});
