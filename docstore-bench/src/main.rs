//! docstore-bench (in progress).

fn main() {}
