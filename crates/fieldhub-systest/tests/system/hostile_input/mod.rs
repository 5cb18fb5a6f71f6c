//! Bad and hostile input: what one client sends or scribbles never stops
//! the others.

mod attacker;
mod challenge;
mod impostor;
mod ivshmem;
mod local_users;
mod recording;
mod shm;
mod shm_pages;
mod soak;
mod stream;
