//! Hub-side recordings (`POST /api/v1/recordings`): where they may be
//! written ([`path`]: only inside `[hub] recordings_dir`) and the writer that
//! formats and writes them off the bus thread ([`writer`]).

pub mod path;
pub mod writer;
