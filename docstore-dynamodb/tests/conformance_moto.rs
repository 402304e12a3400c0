//! The whole conformance suite against moto (`scripts/with-dynamodb-emulators`).
//!
//! Each store the suite opens gets a table of its own: every moto Query page walks its whole
//! table, so one shared table would make the suite quadratic.

mod support;

conformance_tests::conformance_suite!(crate::support::Harness {
    emulator: crate::support::Emulator::Moto,
    table: None,
});

/// The contract's families again with indexes declared on the fields the cases query (each store on a
/// table of its own, made with the indexes' GSIs).
mod indexed {
    conformance_tests::index_suite!(crate::support::Harness {
        emulator: crate::support::Emulator::Moto,
        table: None,
    });
}
