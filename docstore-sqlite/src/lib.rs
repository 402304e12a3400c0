//! The sqlite backend of docstore (work in progress).
