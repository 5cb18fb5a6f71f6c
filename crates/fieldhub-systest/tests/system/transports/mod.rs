//! How clients reach the hub: TCP and unix sockets, shared memory (and
//! receiving from it without a reader thread), ivshmem, TLS, and the
//! default hub local clients find without a URL.

mod default_hub;
mod ivshmem;
mod shm;
mod shm_receive;
mod tcp_and_unix;
mod tls;
