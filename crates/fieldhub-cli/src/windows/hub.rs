//! `fieldhub hub` on Windows: Linux-only (`linux_only.rs`).

pub use crate::linux_only::AnyArgs as HubArgs;

pub fn run(args: HubArgs) -> anyhow::Result<()> {
    args.refuse("hub")
}
