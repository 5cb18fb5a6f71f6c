//! How clients reach the hub: TCP and unix sockets, shared memory (and
//! receiving from it without a reader thread), ivshmem, TLS, the default
//! hub local clients find without a URL, the socketcand server, and idle
//! socketcand and cannelloni endpoints that sleep.

mod default_hub;
mod idle_endpoints;
mod ivshmem;
mod shm;
mod shm_receive;
mod socketcand;
mod tcp_and_unix;
mod tls;
