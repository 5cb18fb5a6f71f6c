//! LIN description files (LDF, LIN 2.x specification section 9) read for
//! fieldhub's LIN channels (`[channel.lin] ldf = "body.ldf"`,
//! docs/buses.md): the cluster's speed, its nodes, each frame's
//! identifier, publisher and length, each node's protocol version (which
//! gives a frame's checksum model), the event-triggered and sporadic frames
//! and the schedule tables.
//!
//! - `lexer.rs` the tokens, `parser.rs` the grammar, `check.rs` the
//!   cross-references, `model.rs` what comes out.
//! - Errors name the line and column and say what to do; nothing panics on
//!   any input (the `ldf` target of `crates/fieldhub-fuzz`), and no input
//!   makes the parser recurse or allocate beyond a bound of its length,
//!   which is at most [`MAX_LDF_BYTES`].
//! - Checked against python's `ldfparser` on the files of
//!   `python/tests/test_ldf.py`.
//! - Depends on `thiserror` only.

mod check;
mod error;
mod lexer;
mod model;
mod parser;

pub use error::{LdfError, Pos};
pub use model::{Entry, EventTriggeredFrame, Frame, Ldf, Publisher, ScheduleTable, SporadicFrame};

/// The largest LDF read: 4 MiB, far over any real cluster's file.
pub const MAX_LDF_BYTES: usize = 4 << 20;

/// The longest schedule slot: 1,000 s, as the hub's other turns.
pub const MAX_DELAY_US: u64 = 1_000_000_000;

/// Parse an LDF's text and check its cross-references.
pub fn parse(text: &str) -> Result<Ldf, LdfError> {
    let lines = text.lines().count().max(1);
    let end = Pos { line: lines as u32, column: text.lines().last().map_or(0, str::len) as u32 + 1 };
    if text.len() > MAX_LDF_BYTES {
        return Err(LdfError::at(
            Pos { line: 1, column: 1 },
            format!("the file has {} bytes, over the {MAX_LDF_BYTES} an LDF may have; is it an LDF?", text.len()),
        ));
    }
    let toks = lexer::tokens(text)?;
    let parts = parser::Parser::new(toks, end).file()?;
    check::check(parts, end)
}
