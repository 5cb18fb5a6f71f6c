//! What a hub serves only on Linux, and the error a configuration that asks
//! for it elsewhere (Windows, `docs/windows.md`) gets: shared memory
//! (`[hub] shm`), unix sockets (`unix:` listen addresses), ivshmem regions
//! and SocketCAN ports. They need memfd segments, futexes shared between
//! processes, `SCM_RIGHTS` and SocketCAN, which this build compiles out.
//! Telling which local user a client is (`session::peer_user`) is
//! Linux-only too: elsewhere a hub admits clients by token or certificate.
//!
//! Invariant: a configuration that passes `linux_only` on this platform
//! never reaches a transport this build lacks.

use fieldhub_bus::config::PortConfig;

use super::hub_section::HubSection;

/// A setting only a hub on Linux serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinuxOnly {
    #[error(
        "shared memory (shm://) is Linux-only; a hub on {} serves clients over TCP and TLS: leave out [hub] shm \
         (fieldhub hub --no-shm)",
        std::env::consts::OS
    )]
    Shm,
    #[error(
        "unix sockets are Linux-only; a hub on {} listens on TCP: give HOST:PORT (with tls_cert and tls_key for \
         TLS)",
        std::env::consts::OS
    )]
    UnixSocket,
    #[error("ivshmem regions are Linux-only; a hub on {} serves no QEMU guests through them", std::env::consts::OS)]
    Ivshmem,
    #[error("SocketCAN is Linux-only; a hub on {} has no SocketCAN ports", std::env::consts::OS)]
    SocketCan,
    #[error(
        "a hub on {} cannot tell which user a local client is (Linux-only), so it admits clients by token: give \
         it one (fieldhub hub --token-file FILE, or [hub] token), or client certificates (tls_client_ca), or \
         admit every local user with insecure_local",
        std::env::consts::OS
    )]
    LocalUsers,
}

/// Whether this build serves what [`LinuxOnly`] names.
pub const LINUX: bool = cfg!(target_os = "linux");

/// The first setting of `[hub]` and the `[[port]]`s that a hub on Linux
/// only serves, when `on_linux` is false: its field (a `[hub]` key, or a
/// `[[port]]` index with its key) and why.
pub(crate) fn linux_only(hub: &HubSection, ports: &[PortConfig], on_linux: bool) -> Option<(Field, LinuxOnly)> {
    if on_linux {
        return None;
    }
    if hub.shm.is_some() {
        return Some((Field::Hub("shm"), LinuxOnly::Shm));
    }
    // `unix:PATH`, as `ListenAddr::parse` reads it.
    if hub.listen.iter().any(|text| text.starts_with("unix:")) {
        return Some((Field::Hub("listen"), LinuxOnly::UnixSocket));
    }
    if !hub.ivshmem.is_empty() {
        return Some((Field::Hub("ivshmem"), LinuxOnly::Ivshmem));
    }
    let port = ports.iter().position(|p| p.socketcan.is_some())?;
    Some((Field::Port(port, "socketcan"), LinuxOnly::SocketCan))
}

/// [`LinuxOnly::LocalUsers`] when `on_linux` is false and `hub` admits
/// clients by who they are (no token, no client certificates, not
/// `insecure_local`): checked when the hub starts, once the binary has read
/// its token files.
pub fn admits_by_user_only(hub: &HubSection, on_linux: bool) -> Option<LinuxOnly> {
    let admits = hub.token.is_some() || hub.tls_client_ca.is_some() || hub.insecure_local;
    (!on_linux && !admits).then_some(LinuxOnly::LocalUsers)
}

/// Where a refused setting is in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Hub(&'static str),
    Port(usize, &'static str),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HubConfig;

    fn parse(text: &str) -> HubConfig {
        HubConfig::parse(text, "test").unwrap()
    }

    const CHANNEL: &str = "[[channel]]\nname = \"can0\"\nprotocol = \"can\"\n";
    impl HubConfig {
        fn linux_only_at(&self, on_linux: bool) -> Option<(Field, LinuxOnly)> {
            linux_only(&self.hub, &self.ports, on_linux)
        }
        fn admits_at(&self, on_linux: bool) -> Option<LinuxOnly> {
            admits_by_user_only(&self.hub, on_linux)
        }
    }

    /// A token, so the settings under test are the first refused.
    const TOKEN: &str = "token = \"secret\"\n";

    #[test]
    fn elsewhere_shm_unix_sockets_ivshmem_and_socketcan_are_refused_naming_their_field() {
        let shm = parse(&format!("[hub]\nshm = \"default\"\n{TOKEN}{CHANNEL}"));
        assert_eq!(shm.linux_only_at(false), Some((Field::Hub("shm"), LinuxOnly::Shm)));
        let unix = parse(&format!("[hub]\nlisten = [\"127.0.0.1:0\", \"unix:/tmp/h.sock\"]\n{TOKEN}{CHANNEL}"));
        assert_eq!(unix.linux_only_at(false), Some((Field::Hub("listen"), LinuxOnly::UnixSocket)));
        let ivshmem = parse(&format!("[hub]\nivshmem = [\"/dev/shm/fieldhub-vm0\"]\n{TOKEN}{CHANNEL}"));
        assert_eq!(ivshmem.linux_only_at(false), Some((Field::Hub("ivshmem"), LinuxOnly::Ivshmem)));
        let socketcan = parse(&format!(
            "[hub]\n{TOKEN}{CHANNEL}[[port]]\nname = \"vcan\"\nchannel = \"can0\"\nsocketcan = \"vcan0\"\n"
        ));
        assert_eq!(socketcan.linux_only_at(false), Some((Field::Port(0, "socketcan"), LinuxOnly::SocketCan)));
        for config in [&shm, &unix, &ivshmem, &socketcan] {
            assert_eq!(config.linux_only_at(true), None, "a hub on Linux serves them all");
        }
    }

    #[test]
    fn the_refusal_names_the_platform_and_what_to_do() {
        let text = LinuxOnly::Shm.to_string();
        assert!(text.contains(std::env::consts::OS) && text.contains("--no-shm"), "{text}");
    }

    #[test]
    fn elsewhere_a_tcp_hub_runs_with_a_token_and_without_one_is_refused() {
        let tcp = parse(&format!("[hub]\nlisten = [\"127.0.0.1:0\"]\ntoken = \"secret\"\n{CHANNEL}"));
        assert_eq!(tcp.linux_only_at(false), None);
        assert_eq!(tcp.admits_at(false), None);
        let open = parse(&format!("[hub]\nlisten = [\"127.0.0.1:0\"]\n{CHANNEL}"));
        assert_eq!(open.linux_only_at(false), None);
        assert_eq!(open.admits_at(false), Some(LinuxOnly::LocalUsers));
        assert_eq!(open.admits_at(true), None, "a hub on Linux tells local users apart");
        let insecure = parse(&format!("[hub]\nlisten = [\"127.0.0.1:0\"]\ninsecure_local = true\n{CHANNEL}"));
        assert_eq!(insecure.admits_at(false), None);
    }
}
