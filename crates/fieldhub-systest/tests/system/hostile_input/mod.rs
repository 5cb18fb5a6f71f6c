//! Bad and hostile input: what one client sends or scribbles never stops
//! the others.

mod shm;
mod stream;
