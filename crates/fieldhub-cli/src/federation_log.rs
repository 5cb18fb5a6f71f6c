//! The hub's log layer for federation refusals on the side that listens:
//! Zenoh logs them at debug level in its accept path, below any usual log
//! filter, so this layer takes that one target whatever `FIELDHUB_LOG` says
//! and hands each event to the hub's [`RefusalLog`], which words the
//! warning (rate-limited) once the configuration says which token file the
//! hub has.

use std::sync::OnceLock;
use std::time::Instant;

use fieldhub_hub::federation::{RefusalLog, ACCEPT_LOG_TARGET};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::layer::{Context, Layer};

/// Set once the configuration is read; events before that are not
/// federation refusals (no Zenoh session exists yet).
static REFUSALS: OnceLock<RefusalLog> = OnceLock::new();

/// Start telling refusals, for a hub whose configuration has been read.
pub fn watch(refusals: RefusalLog) {
    let _ = REFUSALS.set(refusals);
}

/// The layer, filtered to Zenoh's accept path at debug level.
pub fn layer<S: Subscriber>() -> Filtered<RefusedLinks, Targets, S> {
    RefusedLinks.with_filter(Targets::new().with_target(ACCEPT_LOG_TARGET, Level::DEBUG))
}

pub struct RefusedLinks;

impl<S: Subscriber> Layer<S> for RefusedLinks {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let Some(refusals) = REFUSALS.get() else { return };
        let mut message = Message(String::new());
        event.record(&mut message);
        if let Some(line) = refusals.take(&message.0, Instant::now()) {
            tracing::warn!(target: "fieldhub_hub::federation", "federation: {line}");
        }
    }
}

/// An event's `message` field, as text.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}
