//! The hand-written baselines: for each backend, what a careful programmer writes directly
//! against the same database, with the same data layout, doing the same thing per call.

pub mod dynamodb;
pub mod memory;
pub mod postgres;
pub mod sqlite;
