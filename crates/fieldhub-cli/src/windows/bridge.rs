//! `fieldhub bridge` on Windows: SocketCAN is Linux-only (`linux_only.rs`).

pub use crate::linux_only::AnyArgs as BridgeArgs;

pub fn run(args: BridgeArgs) -> anyhow::Result<()> {
    args.refuse("bridge")
}
