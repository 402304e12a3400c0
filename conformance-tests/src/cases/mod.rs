//! The cases, one module per family. Each is an `async fn(&dyn Harness)` that panics on a
//! broken rule.

pub mod names;
