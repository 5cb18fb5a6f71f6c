//! Bad and hostile input: what one client sends or scribbles never stops
//! the others.

mod local_users;
mod ivshmem;
mod recording;
mod shm;
mod stream;
