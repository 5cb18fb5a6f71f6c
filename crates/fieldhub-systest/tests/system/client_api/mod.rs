//! Client features that need a real hub: the ready fd, acceptance filters,
//! a client closed from another thread, requests that time out.

mod close_and_timeouts;
mod ready_fd_and_filters;
