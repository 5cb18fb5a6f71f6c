//! What the hub can hold: thousands of idle sessions at a bounded cost, and
//! the room of removed channels and routes given back.

mod idle_sessions;
mod slot_recycling;
