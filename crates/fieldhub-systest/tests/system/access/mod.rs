//! Who may do what: per-client grants (`[[access]]`), the read-only
//! monitor token, and other local users of the machine.

mod grants;
mod local_users;
mod monitor_token;
