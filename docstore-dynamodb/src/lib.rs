//! The dynamodb backend of docstore (work in progress).
